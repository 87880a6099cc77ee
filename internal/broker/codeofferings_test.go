package broker_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker"
	"github.com/marketplane/marketplane/internal/broker/catalog"
	"github.com/marketplane/marketplane/internal/broker/code"
	"github.com/marketplane/marketplane/internal/broker/kubestore"
	"github.com/marketplane/marketplane/internal/broker/osb"
	"github.com/marketplane/marketplane/internal/broker/sf"
	"github.com/marketplane/marketplane/internal/marketplace"
	"github.com/marketplane/marketplane/pkg/providertest"
	"github.com/marketplane/marketplane/pkg/testenv"
)

const (
	// sampleProviderImage is the image of the sample ServiceProvider,
	// mapped to the binary the test builds.
	sampleProviderImage = "marketplane.local/sample:dev"
	// sampleOffering is the Offering of the ServiceProvider "sample".
	sampleOffering = "sp-sample"
	// brokerAccessNamespace is the broker's namespace on the platform
	// cluster (AccessRequests of bindings).
	brokerAccessNamespace = "marketplane-broker"
	// codeTimeout bounds each wait of the code-based tests.
	codeTimeout = 60 * time.Second
	// sampleBindingRules are the rights of a binding: the sample's
	// DomainServiceAPI on the MCP, nothing else.
	sampleBindingRules = `[{"apiGroups":["domain.sample.services.openmcp.cloud"],"resources":["sampleobjects"],"verbs":["get","list","watch","create","update","patch","delete"]}]`
)

// codeLandscape is a landscape with the sample provider deployed by the
// operator, the marketplace controller and a broker serving both backends
// over loopback HTTP.
type codeLandscape struct {
	l *providertest.Landscape
	// base and other are two brokers on the same clusters.
	base, other string
}

// startCodeLandscape starts the API servers, the operator's controllers
// (MCPs, AccessRequests, provider deployment), the marketplace controller
// and the broker, and deploys the sample ServiceProvider without OSB
// opt-in.
func startCodeLandscape(t *testing.T) *codeLandscape {
	t.Helper()
	testenv.SkipIfShort(t)
	ctrl.SetLogger(testenv.Logger())
	bin := t.TempDir()
	testenv.BuildBinaries(t, bin, "github.com/marketplane/marketplane/providers/sample/cmd/sample")
	l := providertest.Start(t, providertest.WithProviderImages(map[string]string{sampleProviderImage: filepath.Join(bin, "sample")}),
		providertest.WithWaitTimeout(codeTimeout), providertest.WithMCPClusters(3), providertest.WithWorkloadCluster())
	ctx := t.Context()

	// The marketplace controller: Offerings from ServiceProviders.
	mgr, err := ctrl.NewManager(l.Platform.Config, ctrl.Options{Scheme: l.Platform.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	onboarding, err := cluster.New(l.Onboarding.Config, func(o *cluster.Options) { o.Scheme = l.Onboarding.Scheme })
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(onboarding); err != nil {
		t.Fatal(err)
	}
	if err := marketplace.Setup(mgr, mgr, onboarding, marketplace.WithControllerName("test-marketplace")); err != nil {
		t.Fatal(err)
	}
	mctx, stopMarketplace := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		stopMarketplace()
		if err := <-done; err != nil {
			t.Errorf("marketplace manager: %v", err)
		}
	})

	// The broker: an empty SF catalog, the code-based offerings, the SF
	// store on the onboarding cluster.
	if err := l.Platform.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: brokerAccessNamespace}}); err != nil {
		t.Fatal(err)
	}
	bctx, stopBroker := context.WithCancel(context.Background())
	t.Cleanup(stopBroker)
	offeringCache, err := cache.New(l.Onboarding.Config, cache.Options{Scheme: l.Onboarding.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	storeCache, err := cache.New(l.Onboarding.Config, kubestore.CacheOptions(cache.Options{Scheme: l.Onboarding.Scheme}))
	if err != nil {
		t.Fatal(err)
	}
	watcher := catalog.NewOfferingWatcher(offeringCache, testenv.Logger().WithName("offerings"))
	store := kubestore.New(storeCache, l.Onboarding.Client)
	go func() { _ = offeringCache.Start(bctx) }()
	go func() { _ = storeCache.Start(bctx) }()
	go func() { _ = watcher.Start(bctx) }()
	if err := store.Informers(bctx); err != nil {
		t.Fatal(err)
	}
	if !storeCache.WaitForCacheSync(ctx) {
		t.Fatal("store cache did not sync")
	}
	empty := catalog.Empty()
	auth, err := osb.NewBasicAuth(testUser, testPassword)
	if err != nil {
		t.Fatal(err)
	}
	// newBroker starts one broker: two of them are two replicas, or one
	// broker before and after a restart, since a broker keeps nothing in
	// memory but caches.
	newBroker := func() string {
		merged := broker.NewMergedCatalog(osb.CatalogFn(func() *catalog.Snapshot { return empty }), watcher.Snapshot, testenv.Logger().WithName("catalog"))
		sfBackend, err := sf.New(merged, store, sf.WithSyncTimeout(testSyncTimeout))
		if err != nil {
			t.Fatal(err)
		}
		codeBackend, err := code.New(merged, l.Onboarding.Client, l.Platform.Client, brokerAccessNamespace,
			code.WithSFStore(store), code.WithBindTimeout(codeTimeout), code.WithLogger(testenv.Logger().WithName("code")))
		if err != nil {
			t.Fatal(err)
		}
		return serveRouter(t, merged, sfBackend, codeBackend, auth)
	}

	// The sample provider, not opted into OSB yet, with its
	// ProviderConfig once its init has installed the kind.
	sp := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: "sample"}, Spec: providerv1alpha1.ServiceProviderSpec{DeploymentSpec: providerv1alpha1.DeploymentSpec{Image: sampleProviderImage}}}
	if err := l.Platform.Client.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The provider goes after the test's MCPs (registered later, so
		// cleaned up earlier) and before the landscape.
		_ = l.Platform.Client.Delete(context.Background(), sp)
	})
	pc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "sample.services.openmcp.cloud/v1alpha1", "kind": "ProviderConfig",
		"metadata": map[string]any{"name": "sample"},
		"spec":     map[string]any{"pollInterval": "10s", "versions": []any{"v1", "v2"}},
	}}
	awaitCond(t, "the sample's ProviderConfig can be created", func(ctx context.Context) (bool, error) {
		err := l.Platform.Client.Create(ctx, pc.DeepCopy())
		return err == nil || apierrors.IsAlreadyExists(err), nil
	})
	awaitCond(t, "Offering "+sampleOffering+" is Ready", func(ctx context.Context) (bool, error) {
		o := &marketplacev1alpha1.Offering{}
		if err := l.Onboarding.Client.Get(ctx, client.ObjectKey{Name: sampleOffering}, o); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return o.Spec.Ready && len(o.Spec.Kinds) > 0 && o.Spec.Kinds[0].Schema != nil, nil
	})
	return &codeLandscape{l: l, base: newBroker(), other: newBroker()}
}

// optIn sets the ServiceProvider's OSB annotations and waits until the
// broker's catalog lists its offering.
func (c *codeLandscape) optIn(t *testing.T, rules string) {
	t.Helper()
	sp := &providerv1alpha1.ServiceProvider{}
	if err := c.l.Platform.Client.Get(t.Context(), client.ObjectKey{Name: "sample"}, sp); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(sp.DeepCopy())
	if sp.Annotations == nil {
		sp.Annotations = map[string]string{}
	}
	sp.Annotations[marketplacev1alpha1.AnnotationOSB] = "true"
	sp.Annotations[marketplacev1alpha1.AnnotationBindingRules] = rules
	if err := c.l.Platform.Client.Patch(t.Context(), sp, patch); err != nil {
		t.Fatal(err)
	}
	poll(t, c.base, call{method: http.MethodGet, path: "/v2/catalog"}, codeTimeout, "the catalog lists "+sampleOffering, func(r reply) bool {
		return catalogService(r, catalog.OfferingServiceID(sampleOffering)) != nil
	})
}

// serveRouter serves the handler of both backends over loopback HTTP
// until the test ends and returns its URL.
func serveRouter(t *testing.T, cat osb.Catalog, sfBackend *sf.Backend, codeBackend *code.Offerings, auth *osb.BasicAuth) string {
	t.Helper()
	rt, err := broker.NewHandler(cat, sfBackend, codeBackend, auth)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rt)
	t.Cleanup(srv.Close)
	return srv.URL
}

// catalogService returns the service of id in a catalog reply, or nil.
func catalogService(r reply, id string) map[string]any {
	services, _ := r.body["services"].([]any)
	for _, s := range services {
		if m, ok := s.(map[string]any); ok && m["id"] == id {
			return m
		}
	}
	return nil
}

// samplePlanID is the plan of the Sample kind.
var samplePlanID = catalog.OfferingPlanID(sampleOffering, "sample.services.openmcp.cloud", "Sample")

// codeProvisionBody is a provision of the Sample plan.
func codeProvisionBody(params obj) obj {
	b := obj{"service_id": catalog.OfferingServiceID(sampleOffering), "plan_id": samplePlanID,
		"organization_guid": "org-1", "space_guid": "space-1",
		"context": obj{"platform": "cloudfoundry", "organization_guid": "org-1", "space_guid": "space-1"}}
	if params != nil {
		b["parameters"] = params
	}
	return b
}

func codeDeleteQuery() string {
	return "service_id=" + catalog.OfferingServiceID(sampleOffering) + "&plan_id=" + samplePlanID + "&accepts_incomplete=true"
}

// TestCodeOffering runs the OSB lifecycle of the sample provider's
// offering through the broker over loopback HTTP, on real API servers
// with the operator and the sample provider running: opt-in, catalog,
// provision, last_operation, bind (the kubeconfig can do exactly the
// declared rights on the MCP), unbind (the credentials stop working),
// deprovision, and nothing left behind; and the requests the broker must
// refuse.
func TestCodeOffering(t *testing.T) {
	c := startCodeLandscape(t)
	ctx := t.Context()
	serviceID := catalog.OfferingServiceID(sampleOffering)

	t.Run("NotOptedIn", func(t *testing.T) {
		h := h2(t, c.base)
		r := h.expect(h.do(call{method: http.MethodGet, path: "/v2/catalog"}), http.StatusOK, "catalog")
		if catalogService(r, serviceID) != nil {
			t.Fatalf("the catalog lists %s, which did not opt in: %s", sampleOffering, r)
		}
		r = h.expect(h.do(call{method: http.MethodPut, path: instancePath("not-opted-in"), query: "accepts_incomplete=true", body: codeProvisionBody(nil)}),
			http.StatusBadRequest, "provision of an offering that did not opt in")
		if !strings.Contains(r.str("description"), serviceID) {
			t.Errorf("description %q does not name the service id", r.str("description"))
		}
		assertNoNamespace(t, c.l.Onboarding.Client, code.Namespace("not-opted-in"))
	})

	c.optIn(t, sampleBindingRules)

	t.Run("Catalog", func(t *testing.T) {
		h := h2(t, c.base)
		r := h.expect(h.do(call{method: http.MethodGet, path: "/v2/catalog"}), http.StatusOK, "catalog")
		svc := catalogService(r, serviceID)
		if bindable, updatable := svc["bindable"].(bool), svc["plan_updateable"].(bool); svc["name"] != sampleOffering || !bindable || updatable || svc["description"] == "" {
			t.Errorf("service: %v", svc)
		}
		// Instances and bindings can be fetched (update and fetch are
		// served); plans cannot change, each is another kind.
		instances, _ := svc["instances_retrievable"].(bool)
		bindings, _ := svc["bindings_retrievable"].(bool)
		if !instances || !bindings {
			t.Errorf("instances_retrievable %v, bindings_retrievable %v; want true, true", svc["instances_retrievable"], svc["bindings_retrievable"])
		}
		plans, _ := svc["plans"].([]any)
		if len(plans) != 1 {
			t.Fatalf("plans: %v", plans)
		}
		plan := plans[0].(map[string]any)
		if plan["id"] != samplePlanID || plan["name"] != "sample" {
			t.Errorf("plan: %v", plan)
		}
		params, _ := field(plan, "schemas", "service_instance", "create", "parameters").(map[string]any)
		if params["$schema"] != "http://json-schema.org/draft-04/schema#" || field(params, "properties", "version", "type") != "string" ||
			field(params, "properties", catalog.ControlPlaneParameter, "type") != "object" {
			t.Errorf("create parameters schema: %v", params)
		}
	})

	t.Run("BadParameters", func(t *testing.T) {
		h := h2(t, c.base)
		for name, params := range map[string]obj{
			"WrongType":    {"version": 5},
			"TooLong":      {"version": strings.Repeat("v", 64)},
			"UnknownField": {"flavour": "v1"},
		} {
			id := "bad-params-" + strings.ToLower(name)
			r := h.expect(h.do(call{method: http.MethodPut, path: instancePath(id), query: "accepts_incomplete=true", body: codeProvisionBody(params)}),
				http.StatusBadRequest, "provision with parameters the spec schema refuses ("+name+")")
			if !strings.Contains(r.str("description"), "do not match the schema") {
				t.Errorf("%s: description %q", name, r.str("description"))
			}
			assertNoNamespace(t, c.l.Onboarding.Client, code.Namespace(id))
		}
	})

	t.Run("ForeignControlPlane", func(t *testing.T) {
		h := h2(t, c.base)
		// Another tenant's MCP, and a missing one: the same answer, and
		// nothing created. The tenant's own MCP exists with no
		// annotation, or one for another instance.
		victim := &corev2alpha1.ManagedControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-b", Name: "prod",
			Annotations: map[string]string{code.AnnotationAllowInstance: "someone-elses-instance"}}}
		if err := c.l.Onboarding.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-b"}}); err != nil {
			t.Fatal(err)
		}
		if err := c.l.Onboarding.Client.Create(ctx, victim); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.l.Onboarding.Client.Delete(context.Background(), victim) })
		var descriptions []string
		for _, ref := range []obj{{"namespace": "tenant-b", "name": "prod"}, {"namespace": "tenant-b", "name": "missing"}} {
			id := "attacker-" + ref["name"].(string)
			r := h.expect(h.do(call{method: http.MethodPut, path: instancePath(id), query: "accepts_incomplete=true",
				body: codeProvisionBody(obj{"version": "v1", catalog.ControlPlaneParameter: ref})}),
				http.StatusBadRequest, fmt.Sprintf("provision naming ManagedControlPlane %v", ref))
			d := strings.ReplaceAll(r.str("description"), ref["name"].(string), "NAME")
			descriptions = append(descriptions, d)
			if !strings.Contains(d, code.AnnotationAllowInstance) {
				t.Errorf("description %q does not say what would allow it", d)
			}
			assertNoNamespace(t, c.l.Onboarding.Client, code.Namespace(id))
		}
		if descriptions[0] != descriptions[1] {
			t.Errorf("an existing foreign MCP and a missing one are told apart:\n%s\n%s", descriptions[0], descriptions[1])
		}
		sample := &unstructured.Unstructured{}
		sample.SetAPIVersion("sample.services.openmcp.cloud/v1alpha1")
		sample.SetKind("Sample")
		if err := c.l.Onboarding.Client.Get(ctx, client.ObjectKey{Namespace: "tenant-b", Name: "prod"}, sample); !apierrors.IsNotFound(err) {
			t.Errorf("a Sample for the foreign MCP: %v", err)
		}
	})

	// Each holds an MCP cluster of its own: they run side by side.
	// Through service-catalog's client library at 2.13, 2.14 and 2.17,
	// one version after the other: each holds a control plane.
	t.Run("RealClient", func(t *testing.T) {
		for i, v := range osbVersions {
			t.Run(v.name, func(t *testing.T) {
				realClientCode(t, c.base, v, "rc-code-"+strings.ReplaceAll(v.name, ".", ""), i == 0)
			})
		}
	})
	t.Run("Lifecycle", func(t *testing.T) { t.Parallel(); lifecycle(t, c) })
	t.Run("ExistingControlPlane", func(t *testing.T) { t.Parallel(); existingControlPlane(t, c) })
	t.Run("Failed", func(t *testing.T) { t.Parallel(); failedProvision(t, c) })
	t.Run("SameNameTenant", func(t *testing.T) { t.Parallel(); sameNameTenant(t, c) })
}

func h2(t *testing.T, base string) h { return h{t: t, base: base} }

// existingControlPlane provisions for a tenant's own MCP that allows the
// instance: the Sample goes next to it; binding works while the tenant
// allows the instance and is refused once the annotation is gone;
// deprovision removes the Sample, the AccessRequest and the record and
// leaves the tenant's MCP alone.
func existingControlPlane(t *testing.T, c *codeLandscape) {
	ctx := t.Context()
	h := h2(t, c.base)
	const id = "attach-1"
	start := time.Now()
	step := func(what string) { t.Logf("%5.1fs %s", time.Since(start).Seconds(), what) }
	mcp := c.l.CreateMCP(t, "team", "tenant-c")
	step("MCP Ready")
	m := &corev2alpha1.ManagedControlPlane{}
	key := client.ObjectKey{Namespace: mcp.Namespace, Name: mcp.Name}
	sample := &unstructured.Unstructured{}
	sample.SetAPIVersion("sample.services.openmcp.cloud/v1alpha1")
	sample.SetKind("Sample")
	params := obj{"version": "v1", catalog.ControlPlaneParameter: obj{"namespace": mcp.Namespace, "name": mcp.Name}}

	// Bindable while the tenant allows it, not after.
	const id2, bid = id, "attach-1-binding"
	allow := func(value string) {
		t.Helper()
		if err := c.l.Onboarding.Client.Get(ctx, key, m); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(m.DeepCopy())
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[code.AnnotationAllowInstance] = value
		if err := c.l.Onboarding.Client.Patch(ctx, m, patch); err != nil {
			t.Fatal(err)
		}
	}
	allow(id2)
	r := h.expect(h.do(call{method: http.MethodPut, path: instancePath(id2), query: "accepts_incomplete=true", body: codeProvisionBody(params)}),
		http.StatusAccepted, "provision for the tenant's MCP")
	poll(t, c.base, call{method: http.MethodGet, path: instancePath(id2) + "/last_operation", query: "operation=" + r.str("operation")}, codeTimeout,
		"provision succeeded", func(r reply) bool { return r.status == http.StatusOK && r.str("state") == "succeeded" })
	step("provision succeeded")
	bindReq := obj{"service_id": catalog.OfferingServiceID(sampleOffering), "plan_id": samplePlanID}
	h.expect(h.do(call{method: http.MethodPut, path: bindingPath(id2, bid), body: bindReq}), http.StatusCreated, "bind while allowed")
	allow("")
	h.expect(h.do(call{method: http.MethodPut, path: bindingPath(id2, bid+"-2"), body: bindReq}), http.StatusBadRequest, "bind after the tenant withdrew")
	step("bound")
	r = h.expect(h.do(call{method: http.MethodDelete, path: instancePath(id2), query: codeDeleteQuery()}), http.StatusAccepted, "deprovision")
	poll(t, c.base, call{method: http.MethodGet, path: instancePath(id2) + "/last_operation", query: "operation=" + r.str("operation")}, codeTimeout,
		"deprovision finished", func(r reply) bool { return r.status == http.StatusGone })
	step("deprovision done")
	if err := c.l.Onboarding.Client.Get(ctx, key, sample); !apierrors.IsNotFound(err) {
		t.Errorf("the Sample after deprovision: %v, want NotFound", err)
	}
	assertNoNamespace(t, c.l.Onboarding.Client, code.Namespace(id2))
	ars := &clustersv1alpha1.AccessRequestList{}
	if err := c.l.Platform.Client.List(ctx, ars, client.InNamespace(brokerAccessNamespace), client.MatchingLabels{code.LabelCodeInstance: code.Namespace(id2)}); err != nil || len(ars.Items) != 0 {
		t.Errorf("AccessRequests of %s left behind: %d (%v)", id2, len(ars.Items), err)
	}
	if err := c.l.Onboarding.Client.Get(ctx, key, m); err != nil || m.DeletionTimestamp != nil {
		t.Errorf("the tenant's MCP after deprovision: %v; the broker must leave it alone", err)
	}

	recreatedObject(t, c, mcp.Namespace, mcp.Name, allow)
}

// recreatedObject provisions an instance for the tenant's control plane
// (which allows it), and then the tenant deletes the instance's Sample
// and creates its own under the same name, with the same labels and
// annotations: the broker recorded the UID of its Sample, so the new one
// is not the instance's. The instance counts as gone, and deprovision
// leaves the tenant's Sample alone.
func recreatedObject(t *testing.T, c *codeLandscape, namespace, name string, allow func(string)) {
	ctx := t.Context()
	h := h2(t, c.base)
	const id = "attach-2"
	oc := c.l.Onboarding.Client
	allow(id)
	params := obj{"version": "v1", catalog.ControlPlaneParameter: obj{"namespace": namespace, "name": name}}
	// The provision creates the Sample before it answers. It need not
	// become Ready: the previous instance's workload namespace, named
	// after the control plane, is still terminating (the workload cluster
	// runs no namespace controller), and nothing here depends on it.
	h.expect(h.do(call{method: http.MethodPut, path: instancePath(id), query: "accepts_incomplete=true", body: codeProvisionBody(params)}),
		http.StatusAccepted, "provision for the tenant's MCP")

	// The tenant replaces the Sample by one of its own.
	key := client.ObjectKey{Namespace: namespace, Name: name}
	sample := &unstructured.Unstructured{}
	sample.SetAPIVersion("sample.services.openmcp.cloud/v1alpha1")
	sample.SetKind("Sample")
	if err := oc.Get(ctx, key, sample); err != nil {
		t.Fatalf("the instance's Sample: %v", err)
	}
	original := sample.GetUID()
	forged := &unstructured.Unstructured{Object: map[string]any{"spec": sample.Object["spec"]}}
	forged.SetAPIVersion(sample.GetAPIVersion())
	forged.SetKind(sample.GetKind())
	forged.SetNamespace(namespace)
	forged.SetName(name)
	forged.SetLabels(sample.GetLabels())
	forged.SetAnnotations(sample.GetAnnotations())
	if err := oc.Delete(ctx, sample); err != nil {
		t.Fatalf("the tenant deletes the Sample: %v", err)
	}
	awaitCond(t, "the instance's Sample is gone", func(ctx context.Context) (bool, error) {
		err := oc.Get(ctx, key, &unstructured.Unstructured{Object: map[string]any{"apiVersion": sample.GetAPIVersion(), "kind": sample.GetKind()}})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err := oc.Create(ctx, forged); err != nil {
		t.Fatalf("the tenant creates its own Sample: %v", err)
	}
	t.Cleanup(func() { _ = oc.Delete(context.Background(), forged) })
	if forged.GetUID() == original {
		t.Fatal("the tenant's Sample has the UID of the deleted one")
	}

	// An update must not write the tenant's Sample either: the
	// instance's object is gone.
	h.expect(h.do(call{method: http.MethodPatch, path: instancePath(id), query: "accepts_incomplete=true",
		body: obj{"service_id": catalog.OfferingServiceID(sampleOffering), "parameters": obj{"version": "v2"}}}),
		http.StatusNotFound, "update after the tenant replaced the Sample")
	if err := oc.Get(ctx, key, forged); err != nil || forged.GetGeneration() != 1 {
		t.Errorf("the tenant's own Sample after an update of %s: %v, generation %d; the broker must leave it alone", id, err, forged.GetGeneration())
	}

	// Deprovision: the broker's Sample is gone; the tenant's stays.
	r := h.expect(h.do(call{method: http.MethodDelete, path: instancePath(id), query: codeDeleteQuery()}), http.StatusAccepted, "deprovision")
	poll(t, c.base, call{method: http.MethodGet, path: instancePath(id) + "/last_operation", query: "operation=" + r.str("operation")}, codeTimeout,
		"deprovision finished", func(r reply) bool { return r.status == http.StatusGone })
	got := &unstructured.Unstructured{Object: map[string]any{"apiVersion": sample.GetAPIVersion(), "kind": sample.GetKind()}}
	if err := oc.Get(ctx, key, got); err != nil || got.GetUID() != forged.GetUID() || got.GetDeletionTimestamp() != nil {
		t.Errorf("the tenant's own Sample after the deprovision of %s: %v (deleting: %v); the broker must leave it alone", id, err, got.GetDeletionTimestamp() != nil)
	}
	assertNoNamespace(t, oc, code.Namespace(id))
}

// lifecycle provisions, binds, unbinds and deprovisions one instance.
func lifecycle(t *testing.T, c *codeLandscape) {
	ctx := t.Context()
	h := h2(t, c.base)
	const id, bid = "6d1f8a52-0c3e-4b7a-9e21-4f5a6b7c8d90", "7e2a9b63-1d4f-4c8b-8f32-5a6b7c8d9e01"
	nsName := code.Namespace(id)

	r := h.expect(h.do(call{method: http.MethodPut, path: instancePath(id), query: "accepts_incomplete=true", body: codeProvisionBody(obj{"version": "v1"})}),
		http.StatusAccepted, "provision")
	op := r.str("operation")
	// The same request again is the same operation; other parameters
	// are a conflict.
	h.expect(h.do(call{method: http.MethodPut, path: instancePath(id), query: "accepts_incomplete=true", body: codeProvisionBody(obj{"version": "v1"})}),
		http.StatusAccepted, "identical provision")
	h.expect(h.do(call{method: http.MethodPut, path: instancePath(id), query: "accepts_incomplete=true", body: codeProvisionBody(obj{"version": "v2"})}),
		http.StatusConflict, "provision with other parameters")
	whileProvisioning(t, c, id, op)

	t.Cleanup(func() {
		if t.Failed() {
			mcp := &corev2alpha1.ManagedControlPlane{}
			err := c.l.Onboarding.Client.Get(context.Background(), client.ObjectKey{Namespace: nsName, Name: sf.ObjectName(id)}, mcp)
			t.Logf("ManagedControlPlane of the instance: %v %+v", err, mcp.Status)
		}
	})
	// Another broker (a replica, or this one restarted) knows the
	// instance: its state is in the clusters.
	other := h2(t, c.other)
	poll(t, c.other, call{method: http.MethodGet, path: instancePath(id) + "/last_operation", query: "operation=" + op}, codeTimeout,
		"provision succeeded", func(r reply) bool {
			if r.status != http.StatusOK || r.str("state") == "failed" {
				t.Fatalf("last_operation: %s", r)
			}
			return r.str("state") == "succeeded"
		})

	// Bind: a kubeconfig for the MCP with the declared rights only.
	r = other.expect(other.do(call{method: http.MethodPut, path: bindingPath(id, bid), body: obj{"service_id": catalog.OfferingServiceID(sampleOffering), "plan_id": samplePlanID}}),
		http.StatusCreated, "bind")
	again := h.expect(h.do(call{method: http.MethodPut, path: bindingPath(id, bid), body: obj{"service_id": catalog.OfferingServiceID(sampleOffering), "plan_id": samplePlanID}}),
		http.StatusOK, "identical bind on the other broker")
	if field(again.body, "credentials", "kubeconfig") != field(r.body, "credentials", "kubeconfig") {
		t.Error("an identical bind returned other credentials")
	}
	kubeconfig, _ := field(r.body, "credentials", "kubeconfig").(string)
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	if err != nil {
		t.Fatalf("the bind response holds no kubeconfig: %v", err)
	}
	bound, err := client.New(cfg, client.Options{Scheme: c.l.Onboarding.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	objects := &unstructured.UnstructuredList{}
	objects.SetAPIVersion("domain.sample.services.openmcp.cloud/v1alpha1")
	objects.SetKind("SampleObjectList")
	if err := bound.List(ctx, objects); err != nil {
		t.Errorf("list sampleobjects (declared) with the binding's kubeconfig: %v", err)
	}
	if err := bound.List(ctx, &corev1.SecretList{}); !apierrors.IsForbidden(err) {
		t.Errorf("list secrets (not declared) with the binding's kubeconfig: %v, want 403 Forbidden", err)
	}
	arKey := client.ObjectKey{Namespace: brokerAccessNamespace, Name: code.BindingAccessRequestName(bid)}
	if err := c.l.Platform.Client.Get(ctx, arKey, &clustersv1alpha1.AccessRequest{}); err != nil {
		t.Errorf("the binding's AccessRequest: %v", err)
	}
	fetchBinding(t, c, id, bid, kubeconfig)
	updateParameters(t, c, id)

	// Unbind: the AccessRequest is gone and the credentials stop working.
	q := codeDeleteQuery()
	h.expect(h.do(call{method: http.MethodDelete, path: bindingPath(id, bid), query: q}), http.StatusOK, "unbind")
	if err := c.l.Platform.Client.Get(ctx, arKey, &clustersv1alpha1.AccessRequest{}); !apierrors.IsNotFound(err) {
		t.Errorf("the AccessRequest after unbind: %v, want NotFound", err)
	}
	awaitCond(t, "the unbound kubeconfig is refused", func(ctx context.Context) (bool, error) {
		err := bound.List(ctx, objects)
		return apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err), nil
	})
	h.expect(h.do(call{method: http.MethodDelete, path: bindingPath(id, bid), query: q}), http.StatusGone, "unbind again")

	// A second binding, left for deprovision to remove.
	h.expect(h.do(call{method: http.MethodPut, path: bindingPath(id, bid+"-2"), body: obj{"service_id": catalog.OfferingServiceID(sampleOffering), "plan_id": samplePlanID}}),
		http.StatusCreated, "second bind")

	// Deprovision: everything goes, the MCP after the Sample.
	h.expect(h.do(call{method: http.MethodDelete, path: instancePath(id), query: strings.Replace(q, "&accepts_incomplete=true", "", 1)}),
		http.StatusUnprocessableEntity, "deprovision without accepts_incomplete")
	r = h.expect(h.do(call{method: http.MethodDelete, path: instancePath(id), query: q}), http.StatusAccepted, "deprovision")
	poll(t, c.base, call{method: http.MethodGet, path: instancePath(id) + "/last_operation", query: "operation=" + r.str("operation")}, codeTimeout,
		"deprovision finished", func(r reply) bool {
			if r.status == http.StatusOK && r.str("state") == "failed" {
				t.Fatalf("last_operation: %s", r)
			}
			return r.status == http.StatusGone
		})
	assertNoNamespace(t, c.l.Onboarding.Client, nsName)
	// Only this instance's: the other subtests bind in the same namespace
	// at the same time.
	ars := &clustersv1alpha1.AccessRequestList{}
	if err := c.l.Platform.Client.List(ctx, ars, client.InNamespace(brokerAccessNamespace), client.MatchingLabels{code.LabelCodeInstance: nsName}); err != nil || len(ars.Items) != 0 {
		t.Errorf("AccessRequests left behind: %d (%v)", len(ars.Items), err)
	}
	mcps := &corev2alpha1.ManagedControlPlaneList{}
	if err := c.l.Onboarding.Client.List(ctx, mcps, client.MatchingLabels{code.LabelCodeInstance: nsName}); err != nil || len(mcps.Items) != 0 {
		t.Errorf("ManagedControlPlanes left behind: %d (%v)", len(mcps.Items), err)
	}
	samples := &unstructured.UnstructuredList{}
	samples.SetAPIVersion("sample.services.openmcp.cloud/v1alpha1")
	samples.SetKind("SampleList")
	if err := c.l.Onboarding.Client.List(ctx, samples, client.InNamespace(nsName)); err != nil || len(samples.Items) != 0 {
		t.Errorf("Samples left behind: %d (%v)", len(samples.Items), err)
	}
}

// assertNoNamespace fails the test when the namespace exists: callers
// expect it never created, or gone.
func assertNoNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	err := c.Get(t.Context(), client.ObjectKey{Name: name}, &corev1.Namespace{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s: %v, want NotFound", name, err)
	}
}

// awaitCond waits for cond, or fails the test with what.
func awaitCond(t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, codeTimeout, true, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// failedProvision provisions a version the provider does not offer: the
// operation fails with the provider's message (not while the broker's MCP
// is still coming up), and deprovision still removes everything.
func failedProvision(t *testing.T, c *codeLandscape) {
	h := h2(t, c.base)
	const id = "unsupported-version"
	r := h.expect(h.do(call{method: http.MethodPut, path: instancePath(id), query: "accepts_incomplete=true", body: codeProvisionBody(obj{"version": "v9"})}),
		http.StatusAccepted, "provision of an unsupported version")
	r = poll(t, c.base, call{method: http.MethodGet, path: instancePath(id) + "/last_operation", query: "operation=" + r.str("operation")}, codeTimeout,
		"provision failed", func(r reply) bool {
			if r.status != http.StatusOK || r.str("state") == "succeeded" {
				t.Fatalf("last_operation: %s", r)
			}
			return r.str("state") == "failed"
		})
	if d := r.str("description"); !strings.Contains(d, `"v9" is not offered`) {
		t.Errorf("failed description %q does not carry the provider's message", d)
	}
	h.expect(h.do(call{method: http.MethodPut, path: bindingPath(id, "b"), body: obj{"service_id": catalog.OfferingServiceID(sampleOffering), "plan_id": samplePlanID}}),
		http.StatusUnprocessableEntity, "bind of a failed instance")
	// OSB: a fetch is 404 unless the provision succeeded; an update of an
	// instance that could not be provisioned is refused.
	h.expect(h.do(call{method: http.MethodGet, path: instancePath(id)}), http.StatusNotFound, "fetch of a failed instance")
	h.expect(h.do(call{method: http.MethodPatch, path: instancePath(id), query: "accepts_incomplete=true",
		body: obj{"service_id": catalog.OfferingServiceID(sampleOffering), "parameters": obj{"version": "v1"}}}),
		http.StatusUnprocessableEntity, "update of a failed instance")
	r = h.expect(h.do(call{method: http.MethodDelete, path: instancePath(id), query: codeDeleteQuery()}), http.StatusAccepted, "deprovision")
	poll(t, c.base, call{method: http.MethodGet, path: instancePath(id) + "/last_operation", query: "operation=" + r.str("operation")}, codeTimeout,
		"deprovision finished", func(r reply) bool { return r.status == http.StatusGone })
	assertNoNamespace(t, c.l.Onboarding.Client, code.Namespace(id))
}

// whileProvisioning checks the answers to fetch and update while the
// provision of id (operation op) may still run: a fetch is 404 and an
// update 422 ConcurrencyError (OSB), unless the provision succeeded in
// between, which last_operation then says.
func whileProvisioning(t *testing.T, c *codeLandscape, id, op string) {
	h := h2(t, c.base)
	succeeded := func() bool {
		r := h.do(call{method: http.MethodGet, path: instancePath(id) + "/last_operation", query: "operation=" + op})
		return r.status == http.StatusOK && r.str("state") == "succeeded"
	}
	if r := h.do(call{method: http.MethodGet, path: instancePath(id)}); r.status != http.StatusNotFound && (r.status != http.StatusOK || !succeeded()) {
		t.Errorf("fetch while provisioning: %s, want 404", r)
	}
	r := h.do(call{method: http.MethodPatch, path: instancePath(id), query: "accepts_incomplete=true",
		body: obj{"service_id": catalog.OfferingServiceID(sampleOffering), "parameters": obj{"version": "v1"}}})
	if (r.status != http.StatusUnprocessableEntity || r.str("error") != "ConcurrencyError") && (r.status != http.StatusOK || !succeeded()) {
		t.Errorf("update while provisioning: %s, want 422 ConcurrencyError", r)
	}
}

// fetchBinding fetches binding bid of instance id (its kubeconfig), and
// the same binding id through another code-based instance, which must not
// reveal it.
func fetchBinding(t *testing.T, c *codeLandscape, id, bid, kubeconfig string) {
	h := h2(t, c.base)
	r := h.expect(h.do(call{method: http.MethodGet, path: bindingPath(id, bid)}), http.StatusOK, "fetch binding")
	if field(r.body, "credentials", "kubeconfig") != kubeconfig {
		t.Error("the fetched binding holds other credentials than the bind returned")
	}
	h.expect(h.do(call{method: http.MethodGet, path: bindingPath(id, bid+"-never-bound")}), http.StatusNotFound, "fetch of a binding that does not exist")

	// Another tenant's instance: its record is all the broker reads
	// before it looks for the binding, so the record alone stands for an
	// instance (it need not be provisioned, which would hold an MCP
	// cluster). Its owner knows the binding id and asks through it.
	const otherID = "other-tenant-instance"
	ref := fmt.Sprintf(`{"apiVersion":"sample.services.openmcp.cloud/v1alpha1","kind":"Sample","namespace":%q,"name":%q}`,
		code.Namespace(otherID), sf.ObjectName(otherID))
	record := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   code.Namespace(otherID),
		Labels: map[string]string{sf.LabelManagedBy: sf.ManagedByBroker, code.LabelCodeInstance: code.Namespace(otherID)},
		Annotations: map[string]string{sf.AnnotationInstanceID: otherID, code.AnnotationServiceID: catalog.OfferingServiceID(sampleOffering),
			code.AnnotationPlanID: samplePlanID, code.AnnotationObject: ref, code.AnnotationOwnsControlPlane: "true"},
	}}
	if err := c.l.Onboarding.Client.Create(t.Context(), record); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.l.Onboarding.Client.Delete(context.Background(), record) })
	r = h.expect(h.do(call{method: http.MethodGet, path: bindingPath(otherID, bid)}), http.StatusNotFound, "fetch of another instance's binding")
	if strings.Contains(string(r.raw), "kubeconfig") {
		t.Errorf("the answer to another instance's binding holds credentials")
	}
}

// updateParameters updates the parameters of instance id (provisioned
// with version v1 and Ready): the requests the broker must refuse change
// nothing; a valid one changes the Sample's spec, last_operation follows
// it to succeeded, and the fetched instance shows it.
func updateParameters(t *testing.T, c *codeLandscape, id string) {
	ctx := t.Context()
	h := h2(t, c.base)
	serviceID := catalog.OfferingServiceID(sampleOffering)
	key := client.ObjectKey{Namespace: code.Namespace(id), Name: sf.ObjectName(id)}
	sample := func() *unstructured.Unstructured {
		t.Helper()
		s := &unstructured.Unstructured{}
		s.SetAPIVersion("sample.services.openmcp.cloud/v1alpha1")
		s.SetKind("Sample")
		if err := c.l.Onboarding.Client.Get(ctx, key, s); err != nil {
			t.Fatalf("the instance's Sample: %v", err)
		}
		return s
	}
	patch := func(query string, body obj) call {
		return call{method: http.MethodPatch, path: instancePath(id), query: query, body: body}
	}
	const async = "accepts_incomplete=true"

	r := h.expect(h.do(call{method: http.MethodGet, path: instancePath(id)}), http.StatusOK, "fetch the provisioned instance")
	if r.str("service_id") != serviceID || r.str("plan_id") != samplePlanID || field(r.body, "parameters", "version") != "v1" {
		t.Errorf("fetched instance: %s", r)
	}

	before := sample()
	refused := []struct {
		name   string
		c      call
		status int
		want   string
	}{
		{"SchemaRefuses", patch(async, obj{"service_id": serviceID, "parameters": obj{"version": 5}}), http.StatusBadRequest, "do not match the schema"},
		{"UnknownField", patch(async, obj{"service_id": serviceID, "parameters": obj{"flavour": "large"}}), http.StatusBadRequest, "do not match the schema"},
		{"PlanNotOfOffering", patch(async, obj{"service_id": serviceID, "plan_id": "not-a-plan", "parameters": obj{"version": "v2"}}), http.StatusBadRequest, "not a plan of service offering"},
		{"OtherService", patch(async, obj{"service_id": "other-service", "parameters": obj{"version": "v2"}}), http.StatusBadRequest, "not the service offering of the instance"},
		{"ControlPlaneChange", patch(async, obj{"service_id": serviceID, "parameters": obj{"version": "v2", catalog.ControlPlaneParameter: obj{"namespace": "tenant-b", "name": "prod"}}}),
			http.StatusUnprocessableEntity, "cannot change"},
		{"Synchronous", patch("", obj{"service_id": serviceID, "parameters": obj{"version": "v2"}}), http.StatusUnprocessableEntity, "asynchronous"},
	}
	for _, tc := range refused {
		r := h.expect(h.do(tc.c), tc.status, "update "+tc.name)
		if !strings.Contains(r.str("description"), tc.want) {
			t.Errorf("update %s: description %q does not say %q", tc.name, r.str("description"), tc.want)
		}
	}
	if after := sample(); after.GetGeneration() != before.GetGeneration() || field(after.Object, "spec", "version") != "v1" {
		t.Errorf("a refused update changed the Sample: generation %d → %d, spec %v", before.GetGeneration(), after.GetGeneration(), after.Object["spec"])
	}
	// The same parameters change nothing: 200 at once.
	h.expect(h.do(patch(async, obj{"service_id": serviceID, "plan_id": samplePlanID, "parameters": obj{"version": "v1"}})), http.StatusOK, "update to the same parameters")

	r = h.expect(h.do(patch(async, obj{"service_id": serviceID, "parameters": obj{"version": "v2"}})), http.StatusAccepted, "update")
	if r.str("operation") != "update" {
		t.Errorf("update operation %q, want update", r.str("operation"))
	}
	if got := field(sample().Object, "spec", "version"); got != "v2" {
		t.Errorf("the Sample's spec.version after the update: %v, want v2", got)
	}
	// Re-sent: the same operation while it runs, 200 once done.
	if r := h.do(patch(async, obj{"service_id": serviceID, "parameters": obj{"version": "v2"}})); (r.status != http.StatusAccepted || r.str("operation") != "update") && r.status != http.StatusOK {
		t.Errorf("re-sent update: %s, want 202 update or 200", r)
	}
	poll(t, c.base, call{method: http.MethodGet, path: instancePath(id) + "/last_operation", query: "operation=update"}, codeTimeout,
		"update succeeded", func(r reply) bool {
			if r.status != http.StatusOK || r.str("state") == "failed" {
				t.Fatalf("last_operation: %s", r)
			}
			return r.str("state") == "succeeded"
		})
	r = h.expect(h.do(call{method: http.MethodGet, path: instancePath(id), query: "service_id=" + serviceID}), http.StatusOK, "fetch the updated instance")
	if params, _ := r.body["parameters"].(map[string]any); len(params) != 1 || params["version"] != "v2" {
		t.Errorf("fetched parameters %v, want {version: v2}", r.body["parameters"])
	}
	// The instance's attributes are the updated ones now: the original
	// provision is another request (409), one with the current
	// parameters is the same (200).
	h.expect(h.do(call{method: http.MethodPut, path: instancePath(id), query: async, body: codeProvisionBody(obj{"version": "v1"})}),
		http.StatusConflict, "the original provision after the update")
	h.expect(h.do(call{method: http.MethodPut, path: instancePath(id), query: async, body: codeProvisionBody(obj{"version": "v2"})}),
		http.StatusOK, "a provision with the updated parameters")

	// An update the provider refuses fails with its message; the same
	// update sent again is its operation (202, not 200: it did not
	// succeed), and another update repairs the instance.
	awaitUpdate := func(state string) reply {
		t.Helper()
		return poll(t, c.base, call{method: http.MethodGet, path: instancePath(id) + "/last_operation", query: "operation=update"}, codeTimeout,
			"update "+state, func(r reply) bool {
				if r.status != http.StatusOK {
					t.Fatalf("last_operation: %s", r)
				}
				return r.str("state") == state
			})
	}
	h.expect(h.do(patch(async, obj{"service_id": serviceID, "parameters": obj{"version": "v9"}})), http.StatusAccepted, "update to a version the provider does not offer")
	if d := awaitUpdate("failed").str("description"); !strings.Contains(d, `"v9" is not offered`) {
		t.Errorf("failed update: description %q does not carry the provider's message", d)
	}
	r = h.expect(h.do(patch(async, obj{"service_id": serviceID, "parameters": obj{"version": "v9"}})), http.StatusAccepted, "the failed update sent again")
	if r.str("operation") != "update" {
		t.Errorf("the failed update sent again: operation %q, want update", r.str("operation"))
	}
	h.expect(h.do(patch(async, obj{"service_id": serviceID, "parameters": obj{"version": "v2"}})), http.StatusAccepted, "update that repairs the instance")
	awaitUpdate("succeeded")
}

// TestCodePlanChange: a plan change of a code-based instance to another
// plan of its offering is refused with 422 and update_repeatable false
// (OSB: "the requested change is not supported"), before anything is
// read or written but the record. The sample offers one kind, so the
// landscape of TestCodeOffering cannot send one: here an offering of two
// kinds is served on the shared API servers, with the record of an
// instance of the first kind.
func TestCodePlanChange(t *testing.T) {
	setup(t)
	ctx := t.Context()
	oc := env.onboarding.Client
	schema := &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"size":{"type":"integer"}}}`)}
	offering := marketplacev1alpha1.Offering{
		ObjectMeta: metav1.ObjectMeta{Name: "sp-two-kinds"},
		Spec: marketplacev1alpha1.OfferingSpec{
			Source: marketplacev1alpha1.Source{Kind: marketplacev1alpha1.SourceServiceProvider, Name: "two-kinds"},
			Ready:  true, Description: "two kinds", OSB: &marketplacev1alpha1.OSBSettings{Enabled: true},
			Kinds: []marketplacev1alpha1.OfferedKind{
				{Group: "example.org", Version: "v1", Kind: "Small", Plural: "smalls", Scope: "Namespaced", Schema: schema},
				{Group: "example.org", Version: "v1", Kind: "Large", Plural: "larges", Scope: "Namespaced", Schema: schema},
			},
		},
	}
	codeSnap := catalog.BuildCode([]marketplacev1alpha1.Offering{offering})
	serviceID := catalog.OfferingServiceID(offering.Name)
	small, large := catalog.OfferingPlanID(offering.Name, "example.org", "Small"), catalog.OfferingPlanID(offering.Name, "example.org", "Large")
	if codeSnap.Plan(small) == nil || codeSnap.Plan(large) == nil {
		t.Fatalf("the offering's plans are not served: %v", codeSnap.Problems)
	}
	empty := catalog.Empty()
	merged := broker.NewMergedCatalog(osb.CatalogFn(func() *catalog.Snapshot { return empty }), func() *catalog.CodeSnapshot { return codeSnap }, testenv.Logger())
	storeCache, err := cache.New(env.onboarding.Config, kubestore.CacheOptions(cache.Options{Scheme: env.onboarding.Scheme}))
	if err != nil {
		t.Fatal(err)
	}
	store := kubestore.New(storeCache, oc)
	go func() { _ = storeCache.Start(ctx) }()
	if err := store.Informers(ctx); err != nil {
		t.Fatal(err)
	}
	if !storeCache.WaitForCacheSync(ctx) {
		t.Fatal("store cache did not sync")
	}
	auth, err := osb.NewBasicAuth(testUser, testPassword)
	if err != nil {
		t.Fatal(err)
	}
	sfBackend, err := sf.New(merged, store)
	if err != nil {
		t.Fatal(err)
	}
	backend, err := code.New(merged, oc, env.platform.Client, brokerAccessNamespace)
	if err != nil {
		t.Fatal(err)
	}
	base := serveRouter(t, merged, sfBackend, backend, auth)

	// The record of an instance of plan Small, as a provision writes it.
	const id = "plan-change-1"
	ref := fmt.Sprintf(`{"apiVersion":"example.org/v1","kind":"Small","namespace":%q,"name":%q}`, code.Namespace(id), sf.ObjectName(id))
	record := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   code.Namespace(id),
		Labels: map[string]string{sf.LabelManagedBy: sf.ManagedByBroker, code.LabelCodeInstance: code.Namespace(id)},
		Annotations: map[string]string{sf.AnnotationInstanceID: id, code.AnnotationServiceID: serviceID,
			code.AnnotationPlanID: small, code.AnnotationObject: ref, code.AnnotationOwnsControlPlane: "true"},
	}}
	if err := oc.Create(ctx, record); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = oc.Delete(context.Background(), record) })

	h := h2(t, base)
	r := h.expect(h.do(call{method: http.MethodPatch, path: instancePath(id), query: "accepts_incomplete=true",
		body: obj{"service_id": serviceID, "plan_id": large, "parameters": obj{"size": 2}}}), http.StatusUnprocessableEntity, "plan change")
	repeatable, hasRepeatable := r.body["update_repeatable"].(bool)
	usable, _ := r.body["instance_usable"].(bool)
	if d := r.str("description"); !strings.Contains(d, "does not support plan changes") || !hasRepeatable || repeatable || !usable {
		t.Errorf("plan change: %s; want a description that says plan changes are not supported, update_repeatable false, instance_usable true", r)
	}
	h.expect(h.do(call{method: http.MethodPatch, path: instancePath(id), query: "accepts_incomplete=true",
		body: obj{"service_id": serviceID, "plan_id": samplePlanID}}), http.StatusBadRequest, "a plan_id of another offering")
}
