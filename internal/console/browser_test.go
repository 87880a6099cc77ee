package console_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/console"
	"github.com/marketplane/marketplane/pkg/metricsauth"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// ScreenshotsEnv, set to 1, makes TestBrowser write screenshots of the main
// pages into docs/console/.
const ScreenshotsEnv = "CONSOLE_SCREENSHOTS"

// stepTimeout bounds each browser step.
const stepTimeout = 20 * time.Second

// chromiumPath finds bin/chromium (`make chromium`) where the API-server
// binaries are: $KUBEBUILDER_ASSETS or the repository's bin/.
func chromiumPath(t *testing.T) string {
	t.Helper()
	dir, err := testenv.BinaryDir()
	if err != nil {
		t.Fatalf("find bin/: %v", err)
	}
	p := filepath.Join(dir, "chromium")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run `make chromium` (it unpacks Debian's chromium into bin/): %v", p, err)
	}
	return p
}

// newBrowser starts a headless Chromium for the test. --no-sandbox: the
// tests run as root in a container, where Chromium's sandbox cannot start
// (docs/console.md).
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first Run starts the browser, which lives as long as the context
	// of that Run: ctx itself, not one with a timeout.
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// step runs browser actions within stepTimeout; on failure the message
// names the step and quotes the page.
func step(ctx context.Context, t *testing.T, what string, actions ...chromedp.Action) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Run(c, actions...); err != nil {
		var loc, body string
		c2, cancel2 := context.WithTimeout(ctx, 5*time.Second)
		defer cancel2()
		_ = chromedp.Run(c2, chromedp.Location(&loc), chromedp.Text("body", &body, chromedp.ByQuery))
		t.Fatalf("%s: %v\nat %s, the page says:\n%s", what, err, loc, body)
	}
}

func screenshot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	if os.Getenv(ScreenshotsEnv) != "1" {
		return
	}
	var png []byte
	step(ctx, t, "screenshot "+name, chromedp.FullScreenshot(&png, 100))
	dir := filepath.Join("..", "..", "docs", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// pageCheck runs actions that load a page (a navigation, or a click that
// submits or follows a link), checks the HTTP status of the page that
// loads (after redirects) and that it shows each of want, then writes its
// screenshot as name (with CONSOLE_SCREENSHOTS=1).
func pageCheck(ctx context.Context, t *testing.T, name string, status int, want []string, actions ...chromedp.Action) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(c, actions...)
	if err != nil {
		t.Fatalf("load the %s page: %v", name, err)
	}
	var body, loc string
	step(ctx, t, "read the "+name+" page", chromedp.Location(&loc), chromedp.Text("body", &body, chromedp.ByQuery))
	if resp == nil || int(resp.Status) != status {
		got := 0
		if resp != nil {
			got = int(resp.Status)
		}
		t.Fatalf("the %s page (%s): status %d, want %d; it says:\n%s", name, loc, got, status, body)
	}
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("the %s page (%s) lacks %q; it says:\n%s", name, loc, w, body)
		}
	}
	screenshot(ctx, t, name)
}

func signInBrowser(ctx context.Context, t *testing.T, base, token, who string) {
	t.Helper()
	step(ctx, t, who+" signs in",
		chromedp.Navigate(base+"/login"),
		chromedp.WaitVisible("#token", chromedp.ByQuery),
		chromedp.SetValue("#token", token, chromedp.ByQuery),
		chromedp.Click("#sign-in", chromedp.ByQuery),
		chromedp.WaitVisible("#offerings", chromedp.ByQuery))
}

// metricsServer serves a real Prometheus histogram, like the
// inter-operator's reconcile durations, behind the same authentication and
// authorization as Marketplane's metrics endpoints (TokenReview and
// SubjectAccessReview against the API server).
func metricsServer(t *testing.T, e *env) (string, []byte) {
	t.Helper()
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: console.DefaultLatencyMetric, Help: "test", Buckets: prometheus.ExponentialBuckets(0.005, 2, 10),
	}, []string{"kind"})
	reg.MustRegister(h)
	for i, v := range []float64{0.004, 0.012, 0.03, 0.03, 0.06, 0.07, 0.08, 0.15, 0.16, 0.3, 0.7, 1.9, 3} {
		kind := "SFServiceInstance"
		if i%3 == 0 {
			kind = "SFServiceBinding"
		}
		h.WithLabelValues(kind).Observe(v)
	}
	protected, err := metricsauth.Protect(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), e.cluster.Config, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(protected)
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return srv.URL + "/metrics", ca
}

// platformObjects writes what the platform view shows: a ServiceProvider
// and two SFClusters with status, as the operator and the inter-operator
// would.
func platformObjects(t *testing.T, e *env) {
	t.Helper()
	ctx := t.Context()
	c := e.cluster.Client
	sp := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: "sample"}}
	sp.Spec.Image = "registry.example.com/marketplane/sample:v0.1.0"
	if err := c.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	sp.Status.Phase = "Ready"
	apimeta.SetStatusCondition(&sp.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Running", Message: "the run Deployment is available"})
	if err := c.Status().Update(ctx, sp); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "interoperator"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, cl := range []struct {
		name      string
		instances int32
		cpu, mem  string
		capCPU    string
		capMem    string
	}{{"1", 12, "6", "12Gi", "8", "32Gi"}, {"workload-2", 3, "1500m", "3Gi", "4", "16Gi"}} {
		sf := &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "interoperator", Name: cl.name}, Spec: resourcev1alpha1.SFClusterSpec{SecretRef: cl.name + "-kubeconfig"}}
		if err := c.Create(ctx, sf); err != nil {
			t.Fatal(err)
		}
		sf.Status.ServiceInstanceCount = cl.instances
		sf.Status.TotalCapacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cl.capCPU), corev1.ResourceMemory: resource.MustParse(cl.capMem)}
		sf.Status.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cl.cpu), corev1.ResourceMemory: resource.MustParse(cl.mem)}
		apimeta.SetStatusCondition(&sf.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Reachable", Message: "ok"})
		if err := c.Status().Update(ctx, sf); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBrowser drives the console in a real headless Chromium against a real
// API server: tenant A signs in, searches the offerings, sees a schema error
// inline, orders a cache instance that turns Ready live, binds it and reads
// the credentials, deletes it, orders a Sample; tenant B can neither see nor
// delete A's instances; the platform operator sees providers, capacity and
// the latency histogram, which tenant B may not. No token ever appears in a
// response or the log.
func TestBrowser(t *testing.T) {
	e := setup(t)
	metricsURL, metricsCA := metricsServer(t, e)
	platformObjects(t, e)
	cs := startConsole(t, e, false, func(o *console.Options) { o.MetricsURL, o.MetricsCAData = metricsURL, metricsCA })
	ctx := newBrowser(t)
	admin := e.cluster.Client
	base := cs.URL

	// Tenant A: sign in, offerings, search.
	pageCheck(ctx, t, "login", http.StatusOK, []string{"Sign in", "Bearer token"}, chromedp.Navigate(base+"/offerings"))
	signInBrowser(ctx, t, base, e.tokenA, "tenant A")
	var offerings string
	pageCheck(ctx, t, "offerings", http.StatusOK, []string{"Offerings", "cache", "Sample"}, chromedp.Navigate(base+"/offerings"))
	step(ctx, t, "read the offerings", chromedp.Text("#offerings", &offerings, chromedp.ByQuery))
	if !strings.Contains(offerings, "cache") || !strings.Contains(offerings, "Sample") {
		t.Fatalf("offerings page lacks the cache or the Sample offering:\n%s", offerings)
	}
	step(ctx, t, "search for redis hides the Sample offering",
		chromedp.SendKeys("#search", "redis", chromedp.ByQuery),
		chromedp.WaitNotVisible(`a.offering[href="/offerings/`+sampleOffering+`"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`a.offering[href="/offerings/`+sfOffering+`"]`, chromedp.ByQuery))

	// The order form: HTML5 constraints from the schema; the server's
	// check shows the schema's error next to the field.
	var minAttr, maxAttr string
	var ok bool
	pageCheck(ctx, t, "offering", http.StatusOK, []string{"Plans:", "dev", "maxmemory", "Create"},
		chromedp.Click(`a.offering[href="/offerings/`+sfOffering+`"]`, chromedp.ByQuery))
	step(ctx, t, "open the cache offering",
		chromedp.WaitVisible("#order", chromedp.ByQuery),
		chromedp.AttributeValue("#f-maxmemory", "min", &minAttr, &ok, chromedp.ByQuery),
		chromedp.AttributeValue("#f-maxmemory", "max", &maxAttr, &ok, chromedp.ByQuery))
	if minAttr != "16" || maxAttr != "256" {
		t.Errorf("maxmemory input: min %q max %q, want 16 and 256 from the schema", minAttr, maxAttr)
	}
	var fieldErr string
	step(ctx, t, "submit maxmemory 8 (the browser's own check switched off, as a script could)",
		chromedp.SetValue("#name", "cache-a", chromedp.ByQuery),
		chromedp.SetValue("#f-maxmemory", "8", chromedp.ByQuery),
		chromedp.SetAttributeValue("#order", "novalidate", "", chromedp.ByQuery))
	pageCheck(ctx, t, "offering-form-errors", http.StatusUnprocessableEntity, []string{"minimum"}, chromedp.Click("#create", chromedp.ByQuery))
	step(ctx, t, "read the error next to maxmemory",
		chromedp.WaitVisible(`.field-error[data-field="maxmemory"]`, chromedp.ByQuery),
		chromedp.Text(`.field-error[data-field="maxmemory"]`, &fieldErr, chromedp.ByQuery))
	if !strings.Contains(fieldErr, "16") {
		t.Errorf("the error next to maxmemory does not name the minimum 16: %q", fieldErr)
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "cache-a"}, &osbv1alpha1.SFServiceInstance{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the invalid form created an instance (or the check failed): %v", err)
	}

	// Create; play the inter-operator; the page turns Ready by itself.
	step(ctx, t, "fill in maxmemory 64", chromedp.SetValue("#f-maxmemory", "64", chromedp.ByQuery))
	pageCheck(ctx, t, "instance-new", http.StatusOK, []string{"cache-a", "Conditions", "Events", "Bindings"}, chromedp.Click("#create", chromedp.ByQuery))
	step(ctx, t, "the new instance's page",
		chromedp.WaitVisible("#instance-name", chromedp.ByQuery),
		chromedp.WaitVisible(`#ready.unknown`, chromedp.ByQuery))
	inst := &osbv1alpha1.SFServiceInstance{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "cache-a"}, inst); err != nil {
		t.Fatal(err)
	}
	if string(inst.Spec.Parameters.Raw) != `{"maxmemory":64}` || inst.Spec.PlanID != e.planID {
		t.Errorf("instance: plan %q parameters %s", inst.Spec.PlanID, inst.Spec.Parameters.Raw)
	}
	if err := admin.Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: nsA, Name: "cache-a.provisioned"},
		InvolvedObject: corev1.ObjectReference{Kind: "SFServiceInstance", APIVersion: osbv1alpha1.GroupVersion.String(), Namespace: nsA, Name: "cache-a", UID: inst.UID},
		Reason:         "Provisioned", Message: "the cache Deployment is available", Type: corev1.EventTypeNormal, Count: 1,
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Source: corev1.EventSource{Component: "marketplane-interoperator"},
	}); err != nil {
		t.Fatal(err)
	}
	inst.Status.State, inst.Status.Phase = osbv1alpha1.StateSucceeded, "Ready"
	apimeta.SetStatusCondition(&inst.Status.Conditions, metav1.Condition{Type: "Scheduled", Status: metav1.ConditionTrue, Reason: "Scheduled", Message: "on SFCluster 1"})
	apimeta.SetStatusCondition(&inst.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Provisioned", Message: "the cache is available"})
	if err := admin.Status().Update(ctx, inst); err != nil {
		t.Fatal(err)
	}
	var events string
	step(ctx, t, "the instance page turns Ready without a reload (polling)",
		chromedp.WaitVisible(`#ready.true`, chromedp.ByQuery),
		chromedp.WaitVisible(`#conditions tr[data-type="Scheduled"]`, chromedp.ByQuery),
		chromedp.Text("#events", &events, chromedp.ByQuery))
	if !strings.Contains(events, "Provisioned") {
		t.Errorf("events table lacks the Provisioned event:\n%s", events)
	}
	screenshot(ctx, t, "instance")

	// Bind; play the inter-operator's bind; show the credentials.
	step(ctx, t, "create the binding cred-a",
		chromedp.SetValue("#binding", "cred-a", chromedp.ByQuery),
		chromedp.Click("#create-binding", chromedp.ByQuery),
		chromedp.WaitVisible(`#bindings tr[data-name="cred-a"]`, chromedp.ByQuery))
	b := &osbv1alpha1.SFServiceBinding{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "cred-a"}, b); err != nil {
		t.Fatal(err)
	}
	if b.Spec.InstanceID != "cache-a" || b.Spec.ServiceID != e.serviceID || b.Spec.PlanID != e.planID {
		t.Errorf("binding spec %+v", b.Spec)
	}
	password := randomHex(t)
	resp, err := json.Marshal(map[string]any{"credentials": map[string]any{"host": "cache.sf-cache-a", "port": 6379, "password": password}})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "sf-cred-a"}, Data: map[string][]byte{"response": resp}}); err != nil {
		t.Fatal(err)
	}
	b.Status.State, b.Status.Phase = osbv1alpha1.StateSucceeded, "Ready"
	b.Status.Response = &osbv1alpha1.BindingResponse{SecretRef: "sf-cred-a"}
	apimeta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Bound", Message: "credentials available"})
	if err := admin.Status().Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	var shown, loc string
	step(ctx, t, "show the binding's credentials",
		chromedp.WaitVisible(`button.show-credentials[data-binding="cred-a"]`, chromedp.ByQuery),
		chromedp.Click(`button.show-credentials[data-binding="cred-a"]`, chromedp.ByQuery),
		chromedp.WaitVisible("#credentials-text", chromedp.ByQuery),
		chromedp.Text("#credentials-text", &shown, chromedp.ByQuery),
		chromedp.Location(&loc))
	if !strings.Contains(shown, password) {
		t.Errorf("the credentials shown lack the password: %q", shown)
	}
	if strings.Contains(loc, password) {
		t.Errorf("the password is in the URL")
	}
	screenshot(ctx, t, "bindings")

	// Delete the binding: a confirmation first; Cancel keeps it.
	deleteBinding := `a.delete-binding[data-binding="cred-a"]`
	var confirmTitle string
	pageCheck(ctx, t, "binding-delete-confirmation", http.StatusOK, []string{"This removes", "credentials", "Cancel"}, chromedp.Click(deleteBinding, chromedp.ByQuery))
	step(ctx, t, "delete the binding cred-a, then cancel",
		chromedp.WaitVisible("#confirm-title", chromedp.ByQuery),
		chromedp.Text("#confirm-title", &confirmTitle, chromedp.ByQuery))
	if confirmTitle != "Delete binding cred-a?" {
		t.Errorf("binding confirmation title %q, want %q", confirmTitle, "Delete binding cred-a?")
	}
	step(ctx, t, "cancel the binding's deletion",
		chromedp.Click("#cancel-delete", chromedp.ByQuery),
		chromedp.WaitVisible(deleteBinding, chromedp.ByQuery))
	if err := admin.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "cred-a"}, b); err != nil || b.DeletionTimestamp != nil {
		t.Fatalf("cred-a after a cancelled delete: %v, deletion %v", err, b.DeletionTimestamp)
	}
	step(ctx, t, "delete the binding cred-a, confirmed",
		chromedp.Click(deleteBinding, chromedp.ByQuery),
		chromedp.WaitVisible("#confirm-delete", chromedp.ByQuery),
		chromedp.Click("#confirm-delete", chromedp.ByQuery),
		chromedp.WaitVisible("#instance-name", chromedp.ByQuery),
		chromedp.WaitNotPresent(`#bindings tr[data-name="cred-a"]`, chromedp.ByQuery))
	waitFor(t, "cred-a to be deleted", func(ctx context.Context) string {
		if err := admin.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "cred-a"}, &osbv1alpha1.SFServiceBinding{}); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("still there (%v)", err)
		}
		return ""
	})

	// Delete the instance: a confirmation first; Cancel keeps it.
	pageCheck(ctx, t, "delete-confirmation", http.StatusOK, []string{"This removes", "the service instance", "cannot be undone", "Cancel"}, chromedp.Click("#delete", chromedp.ByQuery))
	step(ctx, t, "delete cache-a, then cancel",
		chromedp.WaitVisible("#confirm-title", chromedp.ByQuery),
		chromedp.Text("#confirm-title", &confirmTitle, chromedp.ByQuery))
	if confirmTitle != "Delete cache-a?" {
		t.Errorf("confirmation title %q, want %q", confirmTitle, "Delete cache-a?")
	}
	step(ctx, t, "cancel the deletion of cache-a",
		chromedp.Click("#cancel-delete", chromedp.ByQuery),
		chromedp.WaitVisible("#instance-name", chromedp.ByQuery))
	if err := admin.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "cache-a"}, inst); err != nil || inst.DeletionTimestamp != nil {
		t.Fatalf("cache-a after a cancelled delete: %v, deletion %v", err, inst.DeletionTimestamp)
	}
	step(ctx, t, "delete cache-a, confirmed",
		chromedp.Click("#delete", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm-delete", chromedp.ByQuery),
		chromedp.Click("#confirm-delete", chromedp.ByQuery),
		chromedp.WaitVisible("#count", chromedp.ByQuery))
	waitFor(t, "cache-a to be deleted", func(ctx context.Context) string {
		if err := admin.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "cache-a"}, &osbv1alpha1.SFServiceInstance{}); !apierrors.IsNotFound(err) {
			return "still there"
		}
		return ""
	})

	// A code-based offering: the order creates the ManagedControlPlane the
	// provider's object needs (same name and namespace), and the page
	// shows the control plane's progress.
	step(ctx, t, "order a Sample",
		chromedp.Navigate(base+"/offerings/"+sampleOffering),
		chromedp.WaitVisible("#f-version", chromedp.ByQuery),
		chromedp.SetValue("#name", "mcp-a", chromedp.ByQuery),
		chromedp.SetValue("#f-version", "v1", chromedp.ByQuery),
		chromedp.Click("#create", chromedp.ByQuery),
		chromedp.WaitVisible("#instance-name", chromedp.ByQuery),
		chromedp.WaitVisible(`#controlplane[data-name="mcp-a"] #controlplane-ready.unknown`, chromedp.ByQuery))
	sample := &unstructured.Unstructured{}
	sample.SetGroupVersionKind(schema.GroupVersionKind{Group: "sample.services.openmcp.cloud", Version: "v1alpha1", Kind: "Sample"})
	if err := admin.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "mcp-a"}, sample); err != nil {
		t.Fatalf("the Sample was not created: %v", err)
	}
	if v, _, _ := unstructured.NestedString(sample.Object, "spec", "version"); v != "v1" {
		t.Errorf("Sample spec.version %q, want v1", v)
	}
	mcp := &corev2alpha1.ManagedControlPlane{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "mcp-a"}, mcp); err != nil {
		t.Fatalf("ordering the Sample created no ManagedControlPlane mcp-a next to it (the provider would fail MCPNotFound): %v", err)
	}
	apimeta.SetStatusCondition(&mcp.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "the control plane is available"})
	if err := admin.Status().Update(ctx, mcp); err != nil {
		t.Fatal(err)
	}
	step(ctx, t, "the Sample's page shows its control plane turn Ready",
		chromedp.WaitVisible(`#controlplane-ready.true`, chromedp.ByQuery))
	screenshot(ctx, t, "instance-controlplane")

	// The picker: an existing control plane of the namespace takes the
	// order; one that has a Sample already cannot be picked.
	if err := admin.Create(ctx, &corev2alpha1.ManagedControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "team-a"}}); err != nil {
		t.Fatal(err)
	}
	var takenDisabled bool
	step(ctx, t, "pick the control plane team-a for a Sample",
		chromedp.Navigate(base+"/offerings/"+sampleOffering),
		chromedp.WaitReady(`#controlplane option[value="team-a"]`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('#controlplane option[value="mcp-a"]').disabled`, &takenDisabled),
		chromedp.SetValue("#f-version", "v2", chromedp.ByQuery),
		chromedp.SetValue("#controlplane", "team-a", chromedp.ByQuery))
	if !takenDisabled {
		t.Error("the picker offers mcp-a, which has a Sample already")
	}
	screenshot(ctx, t, "offering-controlplane-picker")
	step(ctx, t, "order the Sample at team-a",
		chromedp.Click("#create", chromedp.ByQuery),
		chromedp.WaitVisible(`#controlplane[data-name="team-a"]`, chromedp.ByQuery))
	if err := admin.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "team-a"}, sample); err != nil {
		t.Fatalf("no Sample team-a at the picked control plane: %v", err)
	}
	if _, created := mcp.Annotations[console.AnnotationCreatedBy]; !created {
		t.Errorf("mcp-a lacks the annotation %s that says the console created it", console.AnnotationCreatedBy)
	}
	pageCheck(ctx, t, "instances", http.StatusOK, []string{"instances in " + nsA, "mcp-a", "team-a"}, chromedp.Navigate(base+"/instances?namespace="+nsA))
	step(ctx, t, "the instances page lists the Sample",
		chromedp.WaitVisible(`table.instances tr[data-name="mcp-a"]`, chromedp.ByQuery))
	step(ctx, t, "tenant A signs out", chromedp.Click("#logout", chromedp.ByQuery), chromedp.WaitVisible("#token", chromedp.ByQuery))

	// Tenant B sees nothing of A's and deletes nothing of A's, while a
	// session of tenant A is open on the same console.
	alice := signIn(t, cs, e.tokenA)
	signInBrowser(ctx, t, base, e.tokenB, "tenant B")
	sampleRes := "samples.v1alpha1.sample.services.openmcp.cloud"
	var title string
	pageCheck(ctx, t, "error-not-permitted", http.StatusForbidden, []string{"Not permitted", "You are not permitted"}, chromedp.Navigate(base+"/ns/"+nsA+"/"+sampleRes+"/mcp-a"))
	step(ctx, t, "tenant B lists tenant A's namespace",
		chromedp.Navigate(base+"/instances?namespace="+nsA),
		chromedp.WaitVisible("#not-permitted", chromedp.ByQuery),
		chromedp.Navigate(base+"/ns/"+nsA+"/"+sampleRes+"/mcp-a"),
		chromedp.WaitVisible("#error-title", chromedp.ByQuery),
		chromedp.Text("#error-title", &title, chromedp.ByQuery))
	if title != "Not permitted" {
		t.Errorf("tenant B on tenant A's instance page: %q, want Not permitted", title)
	}
	pageCheck(ctx, t, "platform-tenant", http.StatusOK, []string{"Service providers", "not permitted"}, chromedp.Navigate(base+"/platform"))
	step(ctx, t, "tenant B's platform view",
		chromedp.WaitVisible("#providers .not-permitted", chromedp.ByQuery),
		chromedp.WaitVisible("#clusters .not-permitted", chromedp.ByQuery),
		chromedp.WaitVisible("#latency .not-permitted", chromedp.ByQuery))
	bobby := signIn(t, cs, e.tokenB)
	forged := bobby.postForm(t, "/ns/"+nsA+"/"+sampleRes+"/mcp-a/delete", map[string]string{"csrf": bobby.csrf, console.ConfirmField: "mcp-a"})
	if forged.StatusCode != http.StatusForbidden || !strings.Contains(forged.Body, "not permitted") {
		t.Errorf("tenant B deleting tenant A's Sample: status %d, want 403 saying not permitted", forged.StatusCode)
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "mcp-a"}, sample); err != nil || sample.GetDeletionTimestamp() != nil {
		t.Errorf("tenant A's Sample after tenant B's delete: %v, deletion %v", err, sample.GetDeletionTimestamp())
	}
	if code, body := alice.get(t, "/instances?namespace="+nsA); code != http.StatusOK || !strings.Contains(body, `data-name="mcp-a"`) {
		t.Errorf("tenant A's own session, open alongside tenant B's: status %d, mcp-a listed %v", code, strings.Contains(body, `data-name="mcp-a"`))
	}
	step(ctx, t, "tenant B signs out", chromedp.Click("#logout", chromedp.ByQuery), chromedp.WaitVisible("#token", chromedp.ByQuery))

	// The platform operator.
	signInBrowser(ctx, t, base, e.tokenP, "the platform operator")
	var providers, clusters string
	pageCheck(ctx, t, "platform", http.StatusOK, []string{"Service providers", "SFClusters", "sample"}, chromedp.Navigate(base+"/platform"))
	step(ctx, t, "the platform view",
		chromedp.WaitVisible(`#providers tr[data-name="sample"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#clusters figure[data-name="1"] svg`, chromedp.ByQuery),
		chromedp.WaitVisible(`#latency svg.histogram rect`, chromedp.ByQuery),
		chromedp.Text("#providers", &providers, chromedp.ByQuery),
		chromedp.Text("#clusters", &clusters, chromedp.ByQuery))
	if !strings.Contains(providers, "Running") || !strings.Contains(clusters, "12 of 16") {
		t.Errorf("platform view: providers %q; clusters %q (want the provider's reason and 12 of 16 instances on cluster 1)", providers, clusters)
	}

	cs.assertNoSecrets(t, map[string]string{"tenant A's token": e.tokenA, "tenant B's token": e.tokenB, "the operator's token": e.tokenP})
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
