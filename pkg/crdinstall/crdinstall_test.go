package crdinstall_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/crds"
	"github.com/marketplane/marketplane/pkg/crdinstall"
	"github.com/marketplane/marketplane/pkg/testenv"
)

func TestApply(t *testing.T) {
	c := testenv.Start(t, testenv.WithName("crdinstall"), testenv.WithCRDs())
	ctx := t.Context()
	platform, err := crds.ForCluster(crds.ClusterPlatform)
	if err != nil || len(platform) == 0 {
		t.Fatalf("platform CRDs: %d, %v", len(platform), err)
	}

	// Twice: the second run must be a no-op, not a conflict.
	for i := range 2 {
		if err := crdinstall.Apply(ctx, c.Client, "marketplane-test", 0, platform...); err != nil {
			t.Fatalf("Apply #%d: %v", i+1, err)
		}
	}
	for _, crd := range platform {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, got); err != nil {
			t.Fatalf("get %s: %v", crd.Name, err)
		}
		if got.Labels[crds.ClusterLabel] != crds.ClusterPlatform {
			t.Errorf("%s: label %s=%q, want %q", crd.Name, crds.ClusterLabel, got.Labels[crds.ClusterLabel], crds.ClusterPlatform)
		}
	}
	// Objects of the installed kinds are served at once.
	if err := c.Client.List(ctx, &apiextensionsv1.CustomResourceDefinitionList{}); err != nil {
		t.Fatal(err)
	}

	bad := platform[0].DeepCopy()
	bad.Name = "wrong.name.example.com" // must be <plural>.<group>
	err = crdinstall.Apply(ctx, c.Client, "marketplane-test", 5*time.Second, bad)
	if err == nil || !strings.Contains(err.Error(), "wrong.name.example.com") {
		t.Fatalf("Apply of an invalid CRD: want an error naming it, got %v", err)
	}
}

// TestApplyMissing installs only the CRDs a cluster lacks and leaves one
// it has as it is, also when its owner runs another version of it.
func TestApplyMissing(t *testing.T) {
	c := testenv.Start(t, testenv.WithName("crdinstall-missing"), testenv.WithCRDs())
	ctx := t.Context()
	platform, err := crds.ForCluster(crds.ClusterPlatform)
	if err != nil || len(platform) < 2 {
		t.Fatalf("platform CRDs: %d, %v", len(platform), err)
	}
	own := platform[0].DeepCopy()
	own.Labels = map[string]string{"owner": "someone-else"}
	if err := crdinstall.Apply(ctx, c.Client, "someone-else", 0, own); err != nil {
		t.Fatal(err)
	}
	n, err := crdinstall.ApplyMissing(ctx, c.Client, "marketplane-test", 0, platform[:2]...)
	if err != nil || n != 1 {
		t.Fatalf("ApplyMissing = %d, %v; want the one missing CRD installed", n, err)
	}
	got := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: own.Name}, got); err != nil {
		t.Fatal(err)
	}
	if got.Labels["owner"] != "someone-else" || got.Labels[crds.ClusterLabel] != "" {
		t.Errorf("the CRD the cluster had was changed: labels %v", got.Labels)
	}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: platform[1].Name}, got); err != nil || !crdinstall.Established(got) {
		t.Errorf("the missing CRD %s: %v, established %v", platform[1].Name, err, err == nil && crdinstall.Established(got))
	}
	if n, err := crdinstall.ApplyMissing(ctx, c.Client, "marketplane-test", 0, platform[:2]...); err != nil || n != 0 {
		t.Errorf("ApplyMissing again = %d, %v; want nothing to do", n, err)
	}
}

// TestApplyRetriesOverloadedServer puts a proxy in front of the API server
// that answers CRD applies as an overloaded server does (504 Timeout, 429),
// as seen when a loaded machine started a landscape. Apply must send the
// idempotent apply again and succeed, also when the first refusal took
// longer than Apply's timeout (the server's own request timeout is a
// minute), and must not repeat an apply the server refused for the CRD
// itself.
func TestApplyRetriesOverloadedServer(t *testing.T) {
	c := testenv.Start(t, testenv.WithName("crdinstall-retry"), testenv.WithCRDs())
	platform, err := crds.ForCluster(crds.ClusterPlatform)
	if err != nil || len(platform) == 0 {
		t.Fatalf("platform CRDs: %d, %v", len(platform), err)
	}
	transport, err := rest.TransportFor(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	proxy.Transport = transport
	var (
		mu      sync.Mutex
		applies int           // CRD applies the proxy saw
		refuse  []int         // the answers to the next applies, then passed on
		slow    time.Duration // how long a refusal takes
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch && strings.Contains(r.URL.Path, "/customresourcedefinitions/") {
			mu.Lock()
			applies++
			code, wait := 0, slow
			if len(refuse) > 0 {
				code, refuse = refuse[0], refuse[1:]
			}
			mu.Unlock()
			if code != 0 {
				select { // a server that takes its time to give up
				case <-time.After(wait):
				case <-r.Context().Done():
				}
				writeStatus(w, code)
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	// expect sets the answers to the next applies and returns the count
	// of applies from then on.
	expect := func(codes []int, wait time.Duration) func() int {
		mu.Lock()
		defer mu.Unlock()
		applies, refuse, slow = 0, codes, wait
		return func() int {
			mu.Lock()
			defer mu.Unlock()
			return applies
		}
	}
	cl, err := client.New(&rest.Config{Host: srv.URL}, client.Options{Scheme: c.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	crd := platform[0]
	sent := expect([]int{http.StatusGatewayTimeout, http.StatusTooManyRequests}, 0)
	if err := crdinstall.Apply(ctx, cl, "marketplane-test", 30*time.Second, crd); err != nil {
		t.Fatalf("Apply through an overloaded server: %v", err)
	}
	if n := sent(); n != 3 {
		t.Errorf("the proxy saw %d applies; want 3 (two refused, one passed)", n)
	}
	got := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, got); err != nil || !crdinstall.Established(got) {
		t.Fatalf("%s after Apply: established=%v, %v", crd.Name, crdinstall.Established(got), err)
	}

	// A refusal that takes longer than the timeout is retried all the
	// same: the retries have the timeout from the first refusal on. (The
	// CRD is Established already, so the wait for it ends at its first
	// read; the timeout leaves that read time on a loaded machine.)
	const timeout = 5 * time.Second
	sent = expect([]int{http.StatusGatewayTimeout}, timeout+time.Second)
	if err := crdinstall.Apply(ctx, cl, "marketplane-test", timeout, crd); err != nil {
		t.Fatalf("Apply after a refusal slower than its timeout: %v", err)
	}
	if n := sent(); n != 2 {
		t.Errorf("the proxy saw %d applies; want 2 (a slow refusal, one passed)", n)
	}

	// A CRD the server refuses (422 Invalid) is not sent again.
	sent = expect(nil, 0)
	bad := platform[0].DeepCopy()
	bad.Name = "wrong.name.example.com"
	if err := crdinstall.Apply(ctx, cl, "marketplane-test", 30*time.Second, bad); err == nil {
		t.Fatal("Apply of an invalid CRD succeeded")
	}
	if n := sent(); n != 1 {
		t.Errorf("an invalid CRD was applied %d times; want once", n)
	}
}

// writeStatus answers as the API server does when it gives up on a request.
func writeStatus(w http.ResponseWriter, code int) {
	reason := metav1.StatusReasonTimeout
	if code == http.StatusTooManyRequests {
		reason = metav1.StatusReasonTooManyRequests
	}
	body, err := json.Marshal(metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason,
		Message: "request did not complete within requested timeout",
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}
