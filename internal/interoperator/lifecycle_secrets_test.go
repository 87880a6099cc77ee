package interoperator_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/app"
	"github.com/marketplane/marketplane/internal/broker/sf"
	"github.com/marketplane/marketplane/internal/cli"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestLifecycleSecretsNeverLeak runs the sample plan "small" through a
// whole OSB lifecycle, with the real broker (internal/broker/app) in front
// of the real inter-operator: provision, bind, use the credentials as the
// README's quick start does (marketplane kubeconfig-from-credentials),
// unbind, deprovision. It captures every log line of the broker, the
// inter-operator and the target's kube-controller-manager, every version
// of the SFServiceInstance and SFServiceBinding, and at each step every
// Event and the status and annotations of every object of every API
// server involved, and finds none of the secrets the lifecycle created:
// the binding's token, the bind response, the broker's password.
func TestLifecycleSecretsNeverLeak(t *testing.T) {
	needsClusters(t)
	t.Parallel()
	const (
		id, bid  = "6f1e2d3c-0000-4000-8000-00000000a020", "7a2b3c4d-0000-4000-8000-00000000b020"
		user     = "platform"
		identity = "lifecycle-secrets"
	)
	e := newEnv(t, envOptions{namespace: sf.InstanceNamespace(id)})
	applySamplePlanSmall(t, e)
	ctx := context.Background()

	recorder := recordObjects(t, e.ns)
	password := randomHex(t, 24)
	var brokerLogs testenv.SyncBuffer
	osb := startBroker(t, e.catalog, user, password, funcr.New(func(prefix, args string) {
		brokerLogs.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 10}))
	osb.identity = identity

	var corpus strings.Builder
	sweep := func(step string) {
		for _, c := range []*testenv.Cluster{platform, onboarding, target} {
			sweepCluster(t, c, step, &corpus)
		}
	}

	// Provision and bind, synchronously (the sample plan is).
	query := "service_id=" + sampleServiceID + "&plan_id=" + samplePlanSmall
	osb.expect(http.MethodGet, "/v2/catalog", nil, http.StatusOK)
	osb.expect(http.MethodPut, "/v2/service_instances/"+id, map[string]any{"service_id": sampleServiceID, "plan_id": samplePlanSmall,
		"organization_guid": "org-1", "space_guid": "space-1", "parameters": map[string]any{"pods": 5}}, http.StatusCreated)
	sweep("provisioned")
	response := osb.expect(http.MethodPut, "/v2/service_instances/"+id+"/service_bindings/"+bid,
		map[string]any{"service_id": sampleServiceID, "plan_id": samplePlanSmall}, http.StatusCreated)
	var creds credentials
	must(t, json.Unmarshal(response, &creds))
	token := creds.Credentials.Token
	if token == "" || strings.Count(token, ".") != 2 {
		t.Fatalf("the bind response has no JWT token (%d bytes of response)", len(response))
	}

	// The README's quick start: a kubeconfig from the credentials creates
	// a ConfigMap in the instance's namespace and is Forbidden in default.
	kubeconfig := kubeconfigFromCredentials(t, response)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	must(t, err)
	loaded, err := clientcmd.Load(kubeconfig)
	must(t, err)
	ns := loaded.Contexts[loaded.CurrentContext].Namespace
	if ns != "sf-"+id {
		t.Errorf("the kubeconfig's namespace is %q, want the instance's sf-%s", ns, id)
	}
	tenant, err := client.New(cfg, client.Options{Scheme: scheme})
	must(t, err)
	must(t, tenant.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"}, Data: map[string]string{"greeting": "hi"}}))
	if err := tenant.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("default")); !apierrors.IsForbidden(err) {
		t.Errorf("the credentials listing ConfigMaps in default: %v, want Forbidden", err)
	}
	sweep("bound")

	// Unbind and deprovision.
	osb.expect(http.MethodDelete, "/v2/service_instances/"+id+"/service_bindings/"+bid+"?"+query, nil, http.StatusOK)
	waitFor(t, "the unbound token to be rejected", func() bool {
		return apierrors.IsUnauthorized(tenant.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns)))
	})
	sweep("unbound")
	osb.expect(http.MethodDelete, "/v2/service_instances/"+id+"?"+query, nil, http.StatusOK)
	for _, n := range []string{ns, credentialsNamespace(id)} {
		waitGone(t, target.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	sweep("deprovisioned")

	secrets := map[string]string{
		"the binding's token":                    token,
		"the binding's token, base64":            base64.StdEncoding.EncodeToString([]byte(token)),
		"the signature of the binding's token":   token[strings.LastIndex(token, ".")+1:],
		"the bind response":                      string(bytes.TrimSpace(response)),
		"the bind response, base64":              base64.StdEncoding.EncodeToString(bytes.TrimSpace(response)),
		"the broker password":                    password,
		"the broker's basic-auth header, base64": base64.StdEncoding.EncodeToString([]byte(user + ":" + password)),
	}
	places := map[string]string{
		"the inter-operator's log":                   logs.String(),
		"the broker's log":                           brokerLogs.String(),
		"the target's kube-controller-manager log":   target.ControllerManagerLog(),
		"the instances and bindings (every version)": recorder.String(),
		"the events, statuses and annotations":       corpus.String(),
	}
	// The places hold what they should, so that finding nothing means
	// something.
	if !strings.Contains(logs.LinesWith(bid), `"Bound"`) {
		t.Errorf("the inter-operator's log has no line that it bound %s: the capture is broken", bid)
	}
	for place, want := range map[string]string{
		"the broker's log":                           identity,
		"the instances and bindings (every version)": `"state":"succeeded"`,
		"the events, statuses and annotations":       "SFServiceBinding",
	} {
		if !strings.Contains(places[place], want) {
			t.Errorf("%s does not contain %q: the capture is broken", place, want)
		}
	}
	for what, secret := range secrets {
		for place, text := range places {
			if i := strings.Index(text, secret); i >= 0 {
				t.Errorf("%s appears in %s: …%s…", what, place, redactedContext(text, i, len(secret), secrets))
			}
		}
	}
}

// redactedContext is the text around a secret found at i, n bytes long,
// with every one of secrets replaced by <SECRET>.
func redactedContext(text string, i, n int, secrets map[string]string) string {
	out := text[max(0, i-120):min(len(text), i+n+120)]
	// Longest first: a secret may contain another (the token its
	// signature).
	values := slices.Collect(maps.Values(secrets))
	slices.SortFunc(values, func(a, b string) int { return len(b) - len(a) })
	for _, s := range values {
		out = strings.ReplaceAll(out, s, "<SECRET>")
	}
	return out
}

// osbClient calls the broker as an OSB platform does.
type osbClient struct {
	t                    *testing.T
	base, user, password string
	identity             string
	http                 *http.Client
}

// expect sends a request and fails the test unless the broker answers
// status; it returns the body.
func (c *osbClient) expect(method, path string, body any, status int) []byte {
	c.t.Helper()
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		must(c.t, err)
		in = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, in)
	must(c.t, err)
	req.SetBasicAuth(c.user, c.password)
	req.Header.Set("X-Broker-API-Version", "2.17")
	req.Header.Set("X-Broker-API-Request-Identity", c.identity)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	must(c.t, err)
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	must(c.t, err)
	if resp.StatusCode != status {
		c.t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, status, out)
	}
	return out
}

// startBroker runs the broker on the test's API servers, serving the
// catalog namespace, until the test ends.
func startBroker(t *testing.T, catalogNamespace, user, password string, log logr.Logger) *osbClient {
	t.Helper()
	platformKubeconfig, err := platform.KubeconfigPath()
	must(t, err)
	onboardingKubeconfig, err := onboarding.KubeconfigPath()
	must(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	ready := make(chan struct{})
	o := app.DefaultOptions()
	o.Kubeconfig, o.OnboardingKubeconfig, o.CatalogNamespace = platformKubeconfig, onboardingKubeconfig, catalogNamespace
	o.Listener, o.MetricsBindAddress = ln, "0"
	o.Username, o.Password = user, password
	// Synchronous requests wait for the provisioner; the machine is shared.
	o.SyncTimeout = 3 * time.Minute
	o.Verbosity = "DEBUG"
	o.Logger = &log
	o.Ready = func() { close(ready) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("broker: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the broker did not start: %v", err)
	case <-time.After(pollTimeout):
		t.Fatal("the broker did not become ready")
	}
	return &osbClient{t: t, base: "http://" + ln.Addr().String(), user: user, password: password,
		http: &http.Client{Timeout: o.SyncTimeout + time.Minute}}
}

// kubeconfigFromCredentials runs `marketplane kubeconfig-from-credentials`
// on a bind response.
func kubeconfigFromCredentials(t *testing.T, response []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	cmd := cli.NewRootCommand(&out)
	cmd.SetIn(bytes.NewReader(response))
	cmd.SetArgs([]string{"kubeconfig-from-credentials"})
	must(t, cmd.Execute())
	return out.Bytes()
}

// sweepCluster appends to corpus every Event of c, whole, and the status
// and annotations of every other object of c that can be listed.
func sweepCluster(t *testing.T, c *testenv.Cluster, step string, corpus *strings.Builder) {
	t.Helper()
	eachObject(t, c, func(kind string, item *unstructured.Unstructured) {
		var part any = map[string]any{"status": item.Object["status"], "annotations": item.GetAnnotations()}
		if kind == "Event" {
			part = item.Object
		}
		b, err := json.Marshal(part)
		must(t, err)
		fmt.Fprintf(corpus, "%s %s %s %s/%s: %s\n", step, c.Name, kind, item.GetNamespace(), item.GetName(), b)
	})
}

// eachObject calls fn with every object of every listable resource of c
// and the resource's kind.
func eachObject(t *testing.T, c *testenv.Cluster, fn func(kind string, item *unstructured.Unstructured)) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	must(t, err)
	lists, err := dc.ServerPreferredResources()
	must(t, err)
	dyn, err := dynamic.NewForConfig(c.Config)
	must(t, err)
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		must(t, err)
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			items, err := dyn.Resource(gv.WithResource(r.Name)).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatalf("%s: list %s: %v", c.Name, r.Name, err)
			}
			for i := range items.Items {
				fn(r.Kind, &items.Items[i])
			}
		}
	}
}

// objectRecorder keeps every version of the SFServiceInstances and
// SFServiceBindings of a namespace that a watch delivered.
type objectRecorder struct {
	testenv.SyncBuffer
}

// recordObjects watches the instances and bindings of namespace on the
// onboarding cluster until the test ends.
func recordObjects(t *testing.T, namespace string) *objectRecorder {
	t.Helper()
	dyn, err := dynamic.NewForConfig(rest.CopyConfig(onboarding.Config))
	must(t, err)
	rec := &objectRecorder{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, resource := range []string{"sfserviceinstances", "sfservicebindings"} {
		w, err := dyn.Resource(osbv1alpha1.GroupVersion.WithResource(resource)).Namespace(namespace).Watch(ctx, metav1.ListOptions{})
		must(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					continue
				}
				if u, ok := ev.Object.(*unstructured.Unstructured); ok {
					u.SetManagedFields(nil)
					b, err := json.Marshal(u.Object)
					if err != nil {
						// An object left out of the record would escape
						// the secret checks that read it.
						t.Errorf("encode watched %s %s: %v", u.GetKind(), u.GetName(), err)
						continue
					}
					rec.WriteString(string(ev.Type) + " " + string(b) + "\n")
				}
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return rec
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	must(t, err)
	return hex.EncodeToString(b)
}
