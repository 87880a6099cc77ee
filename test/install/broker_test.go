package install

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marketplane/marketplane/pkg/manifests"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/charts"
	"github.com/marketplane/marketplane/internal/broker/app"
	"github.com/marketplane/marketplane/internal/broker/sf"
	"github.com/marketplane/marketplane/internal/operator/deploy/process"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// brokerPackage is the broker's main package.
const brokerPackage = "github.com/marketplane/marketplane/cmd/marketplane-broker"

// The catalog of TestBrokerInCluster: one bindable service offering,
// retrievable instances and bindings, and one plan that provisions
// asynchronously (manager.async) and binds synchronously, as an OSB
// platform finds both. The IDs are the platform's choice; any GUID does.
const (
	brokerServiceID  = "0d7f5f43-8a43-4d3c-9d43-2f5b8f4f1a01"
	brokerPlanID     = "0d7f5f43-8a43-4d3c-9d43-2f5b8f4f1a02"
	brokerInstanceID = "0d7f5f43-8a43-4d3c-9d43-2f5b8f4f1a03"
	brokerBindingID  = "0d7f5f43-8a43-4d3c-9d43-2f5b8f4f1a04"
)

// brokerCatalog is the SFService and SFPlan of the test, in the namespace
// %[1]s. The plan's template is never rendered (no inter-operator runs);
// the CRD requires one.
const brokerCatalog = `apiVersion: osb.servicefabrik.io/v1alpha1
kind: SFService
metadata:
  name: install-test
  namespace: %[1]s
spec:
  id: ` + brokerServiceID + `
  name: install-test
  description: The service offering of test/install
  bindable: true
  instancesRetrievable: true
  bindingsRetrievable: true
  planUpdatable: false
---
apiVersion: osb.servicefabrik.io/v1alpha1
kind: SFPlan
metadata:
  name: install-test-small
  namespace: %[1]s
spec:
  id: ` + brokerPlanID + `
  name: small
  serviceId: ` + brokerServiceID + `
  description: Provisions asynchronously, binds synchronously
  free: true
  bindable: true
  manager:
    async: true
  schemas:
    service_instance:
      create:
        parameters:
          $schema: http://json-schema.org/draft-06/schema#
          type: object
          additionalProperties: false
          properties:
            size:
              type: string
  templates:
  - action: provision
    type: gotemplate
    content: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: never-rendered
`

// tombstoneTTL replaces the broker's default (5 minutes, which the chart
// keeps): the only argument the test adds to the chart's, so that the
// reaper releases the tombstones of the deleted instance and binding, and
// deletes the instance's namespace, within the test.
const tombstoneTTL = "2s"

// TestBrokerInCluster installs the chart's CRDs, the broker's RBAC and its
// credentials Secret into a real API server that keeps an audit log,
// creates a catalog of one service offering and plan in the catalog
// namespace, and runs `marketplane-broker` with the arguments of the
// chart's Deployment as a pod would (in-cluster configuration only; no
// onboarding kubeconfig, so the platform cluster is the onboarding
// cluster). It then drives the OSB API as a platform does, with the
// Secret's basic-auth credentials: catalog, provision (asynchronous),
// last_operation, fetch instance, bind, fetch binding, unbind, deprovision,
// last_operation; the test plays the inter-operator's provisioner (its
// finalizer, the status it writes, the bind response Secret). It scrapes
// the broker's metrics as a scraper the platform authorizes, and checks
// the chart's RBAC for the broker against the audit log: nothing the
// broker asked for was denied, and everything granted was used or is
// listed in brokerNotReached.
func TestBrokerInCluster(t *testing.T) {
	testenv.SkipIfShort(t)
	objs, err := charts.Render(charts.WithExampleRegistry(nil))
	if err != nil {
		t.Fatalf("render the chart: %v", err)
	}
	bc := componentObjects(t, objs, "broker")
	t.Run("NoWildcardsNoClusterAdmin", bc.checkNoWildcards)

	container := bc.container(t, "broker", false)
	if slices.ContainsFunc(container.Args, func(a string) bool {
		return strings.HasPrefix(a, "--kubeconfig") || strings.HasPrefix(a, "--onboarding-kubeconfig")
	}) {
		t.Fatalf("the broker's args %q name a kubeconfig: with the default values it must use the in-cluster configuration for both clusters", container.Args)
	}
	catalogNamespace := brokerFlag(t, container.Args, "--catalog-namespace")
	secret := brokerCredentialsSecret(t, objs, brokerFlag(t, container.Args, "--credentials-secret"))

	dir := t.TempDir()
	testenv.BuildBinaries(t, dir, brokerPackage)
	binary := filepath.Join(dir, "marketplane-broker")
	apiArgs, auditLog := auditArgs(t, dir)
	// No controller manager: the test plays the provisioner, and a
	// namespace the reaper deletes only needs to be terminating.
	c := testenv.Start(t, testenv.WithName("install-broker"), testenv.WithCRDs(), testenv.WithAPIServerArgs(apiArgs...))
	// install creates the namespaces of the broker's roles: the release
	// namespace and the catalog namespace (the inter-operator's, which the
	// broker only reads).
	bc.install(t, c)
	if err := c.Client.Create(t.Context(), secret.DeepCopy()); err != nil {
		t.Fatalf("create the credentials Secret: %v", err)
	}
	createTestCatalog(t, c, catalogNamespace)

	ns, sa := bc.ServiceAccount.Namespace, bc.ServiceAccount.Name
	creds := writeCredentials(t, c, dir, ns, serviceAccountToken(t, c, bc.ServiceAccount))
	out := &testenv.SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("broker output ends:\n%s", tail(out.String(), 12000))
		}
	})
	hostBefore := hostServiceAccountDir(t)
	t.Cleanup(func() {
		if after := hostServiceAccountDir(t); after != hostBefore {
			t.Errorf("the host's %s changed: before %q, after %q", filepath.Dir(process.ServiceAccountNamespaceFile), hostBefore, after)
		}
	})

	args, osbPort := argsWithPorts(t, container.Args, "--bind-address")
	args, metricsPort := argsWithPorts(t, args, "--metrics-bind-address")
	if osbPort == "" || metricsPort == "" {
		t.Fatalf("the chart's broker args %q lack --bind-address or --metrics-bind-address", container.Args)
	}
	args = append(args, "--tombstone-ttl="+tombstoneTTL)
	proc := startPodProcess(t, binary, args, podEnv(t, c, bc, container, "broker"), creds, out)
	running := func(t *testing.T, what string) {
		t.Helper()
		if done, err := proc.exited(); done {
			t.Fatalf("the broker exited (%v) %s", err, what)
		}
	}

	osb := &osbClient{
		base:     "http://127.0.0.1:" + osbPort,
		username: string(secret.Data[app.SecretKeyUsername]),
		password: string(secret.Data[app.SecretKeyPassword]),
		hc:       &http.Client{Timeout: 90 * time.Second},
	}
	p := &testProvisioner{c: c, running: running}
	scenario := t.Run("ServesCatalog", func(t *testing.T) { osbServesCatalog(t, osb, running) }) &&
		t.Run("Provisions", func(t *testing.T) { osbProvision(t, osb, p) }) &&
		t.Run("Binds", func(t *testing.T) { osbBind(t, osb, p) }) &&
		t.Run("Unbinds", func(t *testing.T) { osbUnbind(t, osb, p) }) &&
		t.Run("Deprovisions", func(t *testing.T) { osbDeprovision(t, osb, p) })
	t.Run("MetricsAuthorizedByPlatform", func(t *testing.T) {
		checkChartMetrics(t, "broker", scrapeMetrics(t, c, metricsPort))
		refuseAnonymousScrape(t, metricsPort)
	})
	running(t, "before the audit log was read")

	t.Run("RBACAsUsed", func(t *testing.T) {
		user := serviceaccount.MakeUsername(ns, sa)
		checkComponentRBACAsUsed(t, bc, readAudit(t, auditLog, user), brokerNotReached, scenario)
	})
}

// brokerNotReached are the permissions the chart grants the broker that
// TestBrokerInCluster does not use, keyed as notReached is, each with the
// code that needs it and why the scenario (one instance provisioned,
// bound, unbound and deprovisioned through the OSB API, the test as the
// provisioner) does not get there.
var brokerNotReached = map[string]string{
	// The initial list of an informer: client-go (>= 1.35, WatchListClient)
	// streams it as a watch with sendInitialEvents, so only "watch" is
	// requested; it falls back to "list" where the API server does not
	// stream lists. The catalog cache (SFServices, SFPlans) is only read
	// through its informers (internal/broker/catalog/watcher.go).
	"list sfservices.osb.servicefabrik.io": "catalog informer's initial list, streamed as a watch",
	"list sfplans.osb.servicefabrik.io":    "catalog informer's initial list, streamed as a watch",
	// kubestore's informer of the broker's own namespaces (by label).
	"list namespaces": "kubestore's namespace informer's initial list, streamed as a watch",
	// A deprovision lists an instance's bindings from kubestore's cache.
	"list sfservicebindings.osb.servicefabrik.io": "kubestore's binding informer's initial list, streamed as a watch",
	// A status is written only when an operation starts on an object that
	// exists (startOperation): an update, or the retry of a failed
	// deletion. The scenario's provision and bind create their objects
	// (no status), and its unbind and deprovision are one DELETE each.
	"update sfserviceinstances/status.osb.servicefabrik.io": "an update, or the retry of a failed deprovision (sf.Backend.begin)",
	"update sfservicebindings/status.osb.servicefabrik.io":  "the retry of a failed unbind (sf.Backend.begin)",
}

// refuseAnonymousScrape checks that the broker's metrics port, which the
// chart exposes on every address of the pod, answers /metrics only with a
// token: a request without one is refused.
func refuseAnonymousScrape(t *testing.T, port string) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// The broker serves metrics with a self-signed certificate.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a test scraper of a self-signed loopback endpoint
	}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://127.0.0.1:"+port+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics without a token: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET /metrics without a token: got %s, want 401 or 403", resp.Status)
	}
}

// brokerFlag returns the value of the flag name (--name=value) in args.
func brokerFlag(t *testing.T, args []string, name string) string {
	t.Helper()
	for _, a := range args {
		if n, v, ok := strings.Cut(a, "="); ok && n == name {
			return v
		}
	}
	t.Fatalf("the args %q set no %s", args, name)
	return ""
}

// brokerCredentialsSecret returns the chart's Secret ref ("namespace/name"),
// the broker's --credentials-secret.
func brokerCredentialsSecret(t *testing.T, objs []*unstructured.Unstructured, ref string) *corev1.Secret {
	t.Helper()
	ns, name, _ := strings.Cut(ref, "/")
	for _, u := range objs {
		if u.GetKind() == "Secret" && u.GetNamespace() == ns && u.GetName() == name {
			s := &corev1.Secret{}
			fromUnstructured(t, u, s)
			if len(s.Data[app.SecretKeyUsername]) == 0 || len(s.Data[app.SecretKeyPassword]) == 0 {
				t.Fatalf("the chart's credentials Secret %s lacks %s or %s", ref, app.SecretKeyUsername, app.SecretKeyPassword)
			}
			return s
		}
	}
	t.Fatalf("the chart renders no credentials Secret %s", ref)
	return nil
}

// createTestCatalog creates the test's SFService and SFPlan in namespace.
func createTestCatalog(t *testing.T, c *testenv.Cluster, namespace string) {
	t.Helper()
	objs, err := manifests.Decode([]byte(fmt.Sprintf(brokerCatalog, namespace)))
	if err != nil {
		t.Fatalf("decode the test catalog: %v", err)
	}
	for _, u := range objs {
		if err := c.Client.Create(t.Context(), u); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// osbClient is an OSB platform: basic auth and the API version header on
// every request.
type osbClient struct {
	base, username, password string
	hc                       *http.Client
}

// osbAnswer is the broker's answer: the status and the JSON body.
type osbAnswer struct {
	Code int
	Body map[string]any
	Raw  string
}

// String describes the answer for messages.
func (a osbAnswer) String() string { return fmt.Sprintf("%d %s", a.Code, a.Raw) }

// do sends one request; body, when not nil, is encoded as JSON.
func (o *osbClient) do(ctx context.Context, method, path string, body any) (osbAnswer, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return osbAnswer{}, fmt.Errorf("encode the body of %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, o.base+path, rd)
	if err != nil {
		return osbAnswer{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.SetBasicAuth(o.username, o.password)
	req.Header.Set("X-Broker-API-Version", "2.17")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := o.hc.Do(req)
	if err != nil {
		return osbAnswer{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return osbAnswer{}, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	a := osbAnswer{Code: resp.StatusCode, Raw: string(raw)}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &a.Body); err != nil {
			return a, fmt.Errorf("%s %s: answer %d is not a JSON object: %w", method, path, resp.StatusCode, err)
		}
	}
	return a, nil
}

// call sends one request and fails t when it gets no answer.
func (o *osbClient) call(t *testing.T, method, path string, body any) osbAnswer {
	t.Helper()
	a, err := o.do(t.Context(), method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// pendingRequest is a request whose answer waits for the provisioner.
type pendingRequest struct {
	what string
	done chan struct{}
	a    osbAnswer
	err  error
}

// start sends a request in the background, for a synchronous operation
// the test must let finish as the provisioner while the broker waits.
func (o *osbClient) start(t *testing.T, method, path string, body any) *pendingRequest {
	p := &pendingRequest{what: method + " " + path, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.a, p.err = o.do(t.Context(), method, path, body)
	}()
	return p
}

// answer waits for the answer of a request start sent.
func (p *pendingRequest) answer(t *testing.T) osbAnswer {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(waitTimeout):
		t.Fatalf("%s: no answer within %s", p.what, waitTimeout)
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.a
}

// expectStatus fails t unless a has status code.
func expectStatus(t *testing.T, what string, a osbAnswer, code int) {
	t.Helper()
	if a.Code != code {
		t.Fatalf("%s: got %s, want status %d", what, a, code)
	}
}

// osbServesCatalog waits until the broker serves its catalog (it listens once
// its caches synced) and checks that it holds the test's offering and plan.
func osbServesCatalog(t *testing.T, osb *osbClient, running func(*testing.T, string)) {
	var a osbAnswer
	eventually(t, "GET /v2/catalog answered 200", func(ctx context.Context) (bool, string, error) {
		running(t, "while waiting for the catalog")
		var err error
		if a, err = osb.do(ctx, http.MethodGet, "/v2/catalog", nil); err != nil {
			return false, err.Error(), nil
		}
		return a.Code == http.StatusOK, a.String(), nil
	})
	var cat struct {
		Services []struct {
			ID                  string `json:"id"`
			BindingsRetrievable bool   `json:"bindings_retrievable"`
			Plans               []struct {
				ID string `json:"id"`
			} `json:"plans"`
		} `json:"services"`
	}
	if err := json.Unmarshal([]byte(a.Raw), &cat); err != nil {
		t.Fatalf("decode the catalog: %v", err)
	}
	if len(cat.Services) != 1 || cat.Services[0].ID != brokerServiceID || len(cat.Services[0].Plans) != 1 ||
		cat.Services[0].Plans[0].ID != brokerPlanID || !cat.Services[0].BindingsRetrievable {
		t.Fatalf("catalog: want service %s (bindings_retrievable) with plan %s, got %s", brokerServiceID, brokerPlanID, a.Raw)
	}

	// A platform without the credentials is refused.
	anon := *osb
	anon.password = "wrong"
	if a := anon.call(t, http.MethodGet, "/v2/catalog", nil); a.Code != http.StatusUnauthorized {
		t.Errorf("GET /v2/catalog with a wrong password: got %s, want 401", a)
	}
}

// testProvisioner plays the inter-operator's provisioner
// (internal/interoperator/provisioner) on the objects the broker writes:
// its finalizer, the status of the operation (state and observed
// generation), and the bind response Secret sf-<binding name> with the key
// response, named by the binding's status.response.secretRef.
type testProvisioner struct {
	c       *testenv.Cluster
	running func(*testing.T, string)
}

// await waits until obj at key exists and cond holds for it.
func (p *testProvisioner) await(t *testing.T, what string, key client.ObjectKey, obj client.Object, cond func() (bool, string)) {
	t.Helper()
	eventually(t, what, func(ctx context.Context) (bool, string, error) {
		p.running(t, "while waiting for "+what)
		if err := p.c.Client.Get(ctx, key, obj); err != nil {
			return false, err.Error(), nil
		}
		ok, why := cond()
		return ok, why, nil
	})
}

// write applies change to the latest version of obj and writes it (with
// status, its status), again on a conflict, as the provisioner's next
// reconcile would: the broker may write the object meanwhile.
func (p *testProvisioner) write(t *testing.T, what string, obj client.Object, status bool, change func()) {
	t.Helper()
	ctx := t.Context()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := p.c.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change()
		if status {
			return p.c.Client.Status().Update(ctx, obj)
		}
		return p.c.Client.Update(ctx, obj)
	})
	if err != nil {
		t.Fatalf("%s %s as the provisioner: %v", what, client.ObjectKeyFromObject(obj), err)
	}
}

// accept adds the provisioner's finalizer to obj, as the provisioner's
// first write does.
func (p *testProvisioner) accept(t *testing.T, obj client.Object) {
	t.Helper()
	p.write(t, "add the finalizer to", obj, false, func() { controllerutil.AddFinalizer(obj, osbv1alpha1.FinalizerProvisioner) })
}

// release removes the provisioner's finalizer from obj, as the provisioner
// does once it removed what it made for obj.
func (p *testProvisioner) release(t *testing.T, obj client.Object) {
	t.Helper()
	p.write(t, "remove the finalizer from", obj, false, func() { controllerutil.RemoveFinalizer(obj, osbv1alpha1.FinalizerProvisioner) })
}

// osbInstancePath is the OSB path of the test's instance.
const osbInstancePath = "/v2/service_instances/" + brokerInstanceID

// osbBindingPath is the OSB path of the test's binding.
const osbBindingPath = osbInstancePath + "/service_bindings/" + brokerBindingID

// osbIDsQuery is the query of requests that name the offering and plan.
const osbIDsQuery = "service_id=" + brokerServiceID + "&plan_id=" + brokerPlanID

// osbProvision provisions the instance (202: the plan is asynchronous),
// provisions it as the provisioner, and polls last_operation until it
// succeeded; then fetches the instance.
func osbProvision(t *testing.T, osb *osbClient, p *testProvisioner) {
	a := osb.call(t, http.MethodPut, osbInstancePath+"?accepts_incomplete=true", map[string]any{
		"service_id": brokerServiceID, "plan_id": brokerPlanID,
		"organization_guid": "org-guid", "space_guid": "space-guid",
		"context":    map[string]any{"platform": "kubernetes", "namespace": "team-a"},
		"parameters": map[string]any{"size": "s"},
	})
	expectStatus(t, "provision", a, http.StatusAccepted)
	op, _ := a.Body["operation"].(string)
	if op == "" {
		t.Fatalf("provision: 202 without an operation: %s", a)
	}

	inst := &osbv1alpha1.SFServiceInstance{}
	p.await(t, "the SFServiceInstance", sf.InstanceKey(brokerInstanceID), inst, func() (bool, string) { return true, "" })
	if inst.Spec.PlanID != brokerPlanID || inst.Spec.InstanceID != brokerInstanceID {
		t.Fatalf("SFServiceInstance %s: spec %+v does not record the request", inst.Name, inst.Spec)
	}
	p.accept(t, inst)
	p.write(t, "write the status of", inst, true, func() {
		inst.Status.State = osbv1alpha1.StateSucceeded
		inst.Status.Description = "ready"
		inst.Status.DashboardURL = "https://dashboard.example.invalid/" + brokerInstanceID
		inst.Status.ObservedGeneration = inst.Generation
	})

	awaitLastOperation(t, osb, osbInstancePath+"/last_operation?operation="+op+"&"+osbIDsQuery, p.running, false)

	a = osb.call(t, http.MethodGet, osbInstancePath, nil)
	expectStatus(t, "fetch instance", a, http.StatusOK)
	if a.Body["service_id"] != brokerServiceID || a.Body["plan_id"] != brokerPlanID {
		t.Errorf("fetch instance: %s does not name the service offering and plan", a)
	}
}

// awaitLastOperation polls last_operation until it answers "succeeded"
// (or, with goneOK, 410: a finished deletion whose tombstone the reaper
// released already).
func awaitLastOperation(t *testing.T, osb *osbClient, path string, running func(*testing.T, string), goneOK bool) {
	t.Helper()
	eventually(t, "GET "+path+" succeeded", func(ctx context.Context) (bool, string, error) {
		running(t, "while polling last_operation")
		a, err := osb.do(ctx, http.MethodGet, path, nil)
		switch {
		case err != nil:
			return false, "", err
		case goneOK && a.Code == http.StatusGone:
			return true, "", nil
		case a.Code != http.StatusOK:
			return false, "", fmt.Errorf("last_operation: got %s, want 200", a)
		case a.Body["state"] == "failed":
			return false, "", fmt.Errorf("last_operation: the operation failed: %s", a)
		}
		return a.Body["state"] == "succeeded", a.String(), nil
	})
}

// testBindResponse is what the provisioner writes into the bind response
// Secret, and what the broker must answer.
var testBindResponse = map[string]any{"credentials": map[string]any{"username": "user-a", "password": "not-a-real-secret"}}

// osbBind binds (synchronously: the request waits while the test, as the
// provisioner, writes the response Secret and the binding's status), then
// fetches the binding.
func osbBind(t *testing.T, osb *osbClient, p *testProvisioner) {
	req := osb.start(t, http.MethodPut, osbBindingPath, map[string]any{
		"service_id": brokerServiceID, "plan_id": brokerPlanID,
		"bind_resource": map[string]any{"app_guid": "app-guid"},
	})
	b := &osbv1alpha1.SFServiceBinding{}
	p.await(t, "the SFServiceBinding", sf.BindingKey(brokerInstanceID, brokerBindingID), b, func() (bool, string) { return true, "" })
	p.accept(t, b)
	resp, err := json.Marshal(testBindResponse)
	if err != nil {
		t.Fatal(err)
	}
	secretName := "sf-" + b.Name
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: secretName, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: osbv1alpha1.GroupVersion.String(), Kind: "SFServiceBinding", Name: b.Name, UID: b.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{osbv1alpha1.BindingSecretResponseKey: resp},
	}
	if err := p.c.Client.Create(t.Context(), sec); err != nil {
		t.Fatalf("write the bind response Secret as the provisioner: %v", err)
	}
	p.write(t, "write the status of", b, true, func() {
		b.Status.State = osbv1alpha1.StateSucceeded
		b.Status.Response = &osbv1alpha1.BindingResponse{SecretRef: secretName}
		b.Status.ObservedGeneration = b.Generation
	})

	a := req.answer(t)
	expectStatus(t, "bind", a, http.StatusCreated)
	checkBindCredentials(t, "bind", a)

	a = osb.call(t, http.MethodGet, osbBindingPath, nil)
	expectStatus(t, "fetch binding", a, http.StatusOK)
	checkBindCredentials(t, "fetch binding", a)
}

// checkBindCredentials fails t unless a carries the provisioner's credentials.
func checkBindCredentials(t *testing.T, what string, a osbAnswer) {
	t.Helper()
	want, err := json.Marshal(testBindResponse["credentials"])
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(a.Body["credentials"])
	if err != nil {
		t.Fatalf("%s: encode the credentials answered: %v", what, err)
	}
	if !bytes.Equal(got, want) {
		// The credentials are the test's own, not secrets.
		t.Errorf("%s: credentials %s, want %s", what, got, want)
	}
}

// osbUnbind unbinds (synchronously) while the test, as the provisioner,
// deletes the response Secret and releases the binding.
func osbUnbind(t *testing.T, osb *osbClient, p *testProvisioner) {
	req := osb.start(t, http.MethodDelete, osbBindingPath+"?"+osbIDsQuery, nil)
	b := &osbv1alpha1.SFServiceBinding{}
	p.await(t, "the SFServiceBinding being deleted", sf.BindingKey(brokerInstanceID, brokerBindingID), b, func() (bool, string) {
		return b.DeletionTimestamp != nil, fmt.Sprintf("finalizers %q", b.Finalizers)
	})
	if err := p.c.Client.Delete(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: "sf-" + b.Name}}); err != nil {
		t.Fatalf("delete the bind response Secret as the provisioner: %v", err)
	}
	p.release(t, b)
	expectStatus(t, "unbind", req.answer(t), http.StatusOK)
}

// osbDeprovision deprovisions the instance (202), releases it as the
// provisioner, polls last_operation, and waits until the reaper released
// the tombstones of the instance and its binding and deleted the
// instance's namespace.
func osbDeprovision(t *testing.T, osb *osbClient, p *testProvisioner) {
	a := osb.call(t, http.MethodDelete, osbInstancePath+"?accepts_incomplete=true&"+osbIDsQuery, nil)
	expectStatus(t, "deprovision", a, http.StatusAccepted)
	op, _ := a.Body["operation"].(string)
	key := sf.InstanceKey(brokerInstanceID)
	inst := &osbv1alpha1.SFServiceInstance{}
	p.await(t, "the SFServiceInstance being deleted", key, inst, func() (bool, string) {
		return inst.DeletionTimestamp != nil, fmt.Sprintf("finalizers %q", inst.Finalizers)
	})
	p.release(t, inst)
	awaitLastOperation(t, osb, osbInstancePath+"/last_operation?operation="+op+"&"+osbIDsQuery, p.running, true)

	eventually(t, "the tombstones released and the instance's namespace deleted", func(ctx context.Context) (bool, string, error) {
		p.running(t, "while waiting for the reaper")
		if err := p.c.Client.Get(ctx, key, &osbv1alpha1.SFServiceInstance{}); !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("SFServiceInstance still there (%v)", err), nil
		}
		if err := p.c.Client.Get(ctx, sf.BindingKey(brokerInstanceID, brokerBindingID), &osbv1alpha1.SFServiceBinding{}); !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("SFServiceBinding still there (%v)", err), nil
		}
		ns := &corev1.Namespace{}
		err := p.c.Client.Get(ctx, client.ObjectKey{Name: key.Namespace}, ns)
		if apierrors.IsNotFound(err) || (err == nil && ns.DeletionTimestamp != nil) {
			return true, "", nil
		}
		return false, fmt.Sprintf("namespace %s not deleted (%v)", key.Namespace, err), nil
	})
}
