package controller_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	marketplanecrds "github.com/marketplane/marketplane/api/crds"
	"github.com/marketplane/marketplane/pkg/clusteraccess"
	"github.com/marketplane/marketplane/pkg/contract"
	"github.com/marketplane/marketplane/pkg/crdinstall"
	"github.com/marketplane/marketplane/pkg/providerapp"
	"github.com/marketplane/marketplane/pkg/providertest"
	"github.com/marketplane/marketplane/pkg/spruntime"
	"github.com/marketplane/marketplane/pkg/testenv"

	"github.com/marketplane/marketplane/providers/sample/api/crds"
	apiv1alpha1 "github.com/marketplane/marketplane/providers/sample/api/v1alpha1"
	"github.com/marketplane/marketplane/providers/sample/internal/controller"
)

// Limits of the waits (eventually), each within the test's budget
// (testContext): generous, because test machines are shared, but below the
// runtime's default poll interval (one minute minus jitter), so that only
// the watches, not the poll, can make a test pass.
const (
	pollEvery   = 200 * time.Millisecond
	pollTimeout = 45 * time.Second
	// cleanupTimeout bounds the removal of a test's DomainServiceAPI from
	// its MCP cluster before the cluster goes to another test, and the stop
	// of its provider.
	cleanupTimeout = 2 * time.Minute
	// quietPeriod is how long a test watches that something does NOT
	// happen (a reconcile of an ignored object, a hot loop).
	quietPeriod = 3 * time.Second
)

// maxMCPClusters bounds the MCP clusters the landscape starts: each is one
// more API server to start and keep in memory.
const maxMCPClusters = 4

// The landscape every test shares: platform, onboarding, MCP clusters
// and a workload cluster, with the operator's cluster controllers running
// in-process.
var (
	landscape *providertest.Landscape
	// mcpSlots holds one token per MCP cluster. The tests run in parallel
	// and each may hold an MCP; MCP clusters are Exclusive, so a test
	// takes a token before it starts (startProvider) and returns it once
	// its MCP is gone: a test never waits for a cluster another test
	// holds.
	mcpSlots chan struct{}
	scheme   *runtime.Scheme
	// platformC and onboardingC are admin clients of the platform and
	// onboarding clusters that know the provider's types.
	platformC, onboardingC client.Client
	logs                   testenv.SyncBuffer
	providers              atomic.Int32
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if scheme, err = controller.NewScheme(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if testBudget, err = budgetFromEnv(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if testenv.Short() {
		// Only the unit tests run; the others skip themselves.
		return m.Run()
	}
	ctrl.SetLogger(funcr.New(func(prefix, args string) { logs.WriteString(prefix + " " + args + "\n") }, funcr.Options{Verbosity: 1}))
	// As many MCP clusters as tests run at once (go test -parallel,
	// GOMAXPROCS by default), so that no test waits for a cluster.
	clusters := min(parallelism(), maxMCPClusters)
	mcpSlots = make(chan struct{}, clusters)
	landscape, err = providertest.New(providertest.WithMCPClusters(clusters), providertest.WithWorkloadCluster())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := landscape.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	if platformC, err = client.New(landscape.Platform.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if onboardingC, err = client.New(landscape.Onboarding.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := installCRDs(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// parallelism is the value of go test's -parallel flag: how many parallel
// tests run at once.
func parallelism() int {
	if f := flag.Lookup("test.parallel"); f != nil {
		if n, err := strconv.Atoi(f.Value.String()); err == nil && n > 0 {
			return n
		}
	}
	return 1
}

// installCRDs installs the provider's CRDs as init does (TestInit runs
// init itself).
func installCRDs() error {
	list, err := crds.CRDs()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, crd := range list {
		c := onboardingC
		if crd.Labels[marketplanecrds.ClusterLabel] == marketplanecrds.ClusterPlatform {
			c = platformC
		}
		if err := crdinstall.Apply(ctx, c, "test", 0, crd); err != nil {
			return err
		}
	}
	return nil
}

// provider is one running instance of the provider, wired as `run` wires
// it: a manager on the onboarding cluster with the platform cluster added,
// cluster access through ClusterRequests and AccessRequests in the
// provider's own namespace with the provider's permissions, and Setup. Each
// test has its own provider (name, ProviderConfig, namespace) and tenant
// namespace on the onboarding cluster.
type provider struct {
	// name is the provider's name: its ProviderConfig, controller and
	// AccessRequests are named after it.
	name string
	// namespace is the provider's namespace on the platform cluster
	// (POD_NAMESPACE).
	namespace string
	// tenant is the namespace of the test's ManagedControlPlane and
	// Sample on the onboarding cluster.
	tenant string
}

// mcpName is the name of every test's ManagedControlPlane, and so of its
// Sample.
const mcpName = "cp"

// startProvider starts a provider for the test; it stops when the test
// ends. It skips the test under -short, starts the test's budget
// (testContext), and waits for an MCP cluster to be free (see mcpSlots)
// first.
func startProvider(t *testing.T) *provider {
	t.Helper()
	testenv.SkipIfShort(t)
	ctx := testContext(t)
	start := time.Now()
	select {
	case mcpSlots <- struct{}{}:
	case <-ctx.Done():
		t.Fatalf("%s: waited %s for a free MCP cluster (%v); all %d are held by other tests",
			t.Name(), time.Since(start).Round(100*time.Millisecond), context.Cause(ctx), cap(mcpSlots))
	}
	// Registered first, so it runs last: after the MCP is gone.
	t.Cleanup(func() { <-mcpSlots })
	n := providers.Add(1)
	p := &provider{name: fmt.Sprintf("provider-%d", n), tenant: fmt.Sprintf("tenant-%d", n)}
	p.namespace = landscape.ProviderNamespace(t, "sp-"+p.name)
	if err := onboardingC.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.tenant}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create tenant namespace: %v", err)
	}
	// Deleting a Sample needs its ProviderConfig, so it goes last.
	t.Cleanup(func() {
		cfg := &apiv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: p.name}}
		if err := platformC.Delete(context.Background(), cfg); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete ProviderConfig: %v", err)
		}
	})

	platform, err := cluster.New(landscape.Platform.Config, func(o *cluster.Options) { o.Scheme = scheme })
	if err != nil {
		t.Fatalf("platform cluster: %v", err)
	}
	access, err := clusteraccess.New(platform.GetClient(), p.name, p.namespace,
		append([]clusteraccess.Option{clusteraccess.WithAPIReader(platform.GetAPIReader())}, controller.AccessOptions()...)...)
	if err != nil {
		t.Fatalf("cluster access: %v", err)
	}
	mgr, err := ctrl.NewManager(landscape.Onboarding.Config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Only the test's tenant namespace: objects other tests left
		// behind are not this provider's business.
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{p.tenant: {}}},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	if err := mgr.Add(platform); err != nil {
		t.Fatalf("add platform cluster: %v", err)
	}
	env := providerapp.Env{
		Flags:    contract.Flags{Environment: "test", ProviderName: p.name, Verbosity: contract.VerbosityDebug},
		Pod:      contract.Pod{Namespace: p.namespace},
		Platform: platform,
		Access:   access,
	}
	if err := controller.Setup(ctx, mgr, env,
		spruntime.WithControllerName(p.name),
		spruntime.WithWaitInterval(200*time.Millisecond),
		spruntime.WithBackoff(100*time.Millisecond, 5*time.Second),
	); err != nil {
		t.Fatalf("setup: %v", err)
	}
	// The manager runs until the test ends, not until its budget is spent:
	// the cleanups need it.
	mgrCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		if t.Failed() {
			// Printed first: a cleanup below that runs out of time ends
			// the cleanups.
			t.Logf("log of %s:\n%s", p.name, logs.LinesWith(p.name))
		}
		cancel()
		eventually(t, cleanupTimeout, "the manager of "+p.name+" to stop", func(context.Context) (bool, string) {
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("manager: %v", err)
				}
				return true, ""
			default:
				return false, "still running"
			}
		})
	})
	return p
}

// createConfig creates the provider's ProviderConfig; startProvider
// deletes it at the end.
func (p *provider) createConfig(t *testing.T, pollInterval time.Duration, versions ...string) {
	t.Helper()
	cfg := &apiv1alpha1.ProviderConfig{
		ObjectMeta: metav1.ObjectMeta{Name: p.name},
		Spec:       apiv1alpha1.ProviderConfigSpec{Versions: versions},
	}
	if pollInterval > 0 {
		cfg.Spec.PollInterval = common.DurationOf(pollInterval)
	}
	if err := platformC.Create(context.Background(), cfg); err != nil {
		t.Fatalf("create ProviderConfig: %v", err)
	}
}

// updateConfig changes the provider's ProviderConfig.
func (p *provider) updateConfig(t *testing.T, mutate func(*apiv1alpha1.ProviderConfig)) {
	t.Helper()
	update(t, platformC, client.ObjectKey{Name: p.name}, &apiv1alpha1.ProviderConfig{}, mutate)
}

// createMCP creates the test's ManagedControlPlane and waits until it is
// Ready. When the test ends, whatever the test left of the
// DomainServiceAPI in its cluster is removed, since a later test may get
// the same cluster.
func (p *provider) createMCP(t *testing.T) *providertest.MCP {
	t.Helper()
	mcp := landscape.CreateMCP(t, mcpName, p.tenant)
	t.Cleanup(func() {
		ctx := context.Background()
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: controller.DomainCRDName}}
		if err := mcp.Admin.Client.Delete(ctx, crd); client.IgnoreNotFound(err) != nil {
			t.Errorf("clean up CRD %s: %v", crd.Name, err)
			return
		}
		// The API server deletes the CRD's objects first; on a busy
		// machine that can take longer than a test's other waits. A read
		// that fails is tried again; the last one seen is reported.
		eventually(t, cleanupTimeout, "the CRD "+crd.Name+" to be gone from the MCP cluster (cleanup)", func(ctx context.Context) (bool, string) {
			err := mcp.Admin.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd)
			if apierrors.IsNotFound(err) {
				return true, ""
			}
			return false, fmt.Sprintf("deleting since %v, finalizers %v, conditions %+v; read: %v",
				crd.DeletionTimestamp, crd.Finalizers, crd.Status.Conditions, err)
		})
	})
	return mcp
}

// create creates the test's Sample (named like its ManagedControlPlane)
// with spec.version v. When the test ends, it is deleted and waited for
// while the provider still runs.
func (p *provider) create(t *testing.T, v string) {
	t.Helper()
	obj := &apiv1alpha1.Sample{
		ObjectMeta: metav1.ObjectMeta{Name: mcpName, Namespace: p.tenant},
		Spec:       apiv1alpha1.SampleSpec{Version: v},
	}
	if err := onboardingC.Create(context.Background(), obj); err != nil {
		t.Fatalf("create Sample: %v", err)
	}
	t.Cleanup(func() {
		if err := onboardingC.Delete(context.Background(), obj); client.IgnoreNotFound(err) != nil {
			t.Errorf("clean up Sample: %v", err)
			return
		}
		p.waitGone(t)
	})
}

// get returns the test's Sample, or nil when it does not exist.
func (p *provider) get(t *testing.T) *apiv1alpha1.Sample {
	t.Helper()
	obj := &apiv1alpha1.Sample{}
	if err := onboardingC.Get(context.Background(), client.ObjectKey{Namespace: p.tenant, Name: mcpName}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatalf("get Sample: %v", err)
	}
	return obj
}

// update changes the test's Sample.
func (p *provider) update(t *testing.T, mutate func(*apiv1alpha1.Sample)) {
	t.Helper()
	update(t, onboardingC, client.ObjectKey{Namespace: p.tenant, Name: mcpName}, &apiv1alpha1.Sample{}, mutate)
}

// delete deletes the test's Sample (the deletion then runs).
func (p *provider) delete(t *testing.T) {
	t.Helper()
	obj := &apiv1alpha1.Sample{ObjectMeta: metav1.ObjectMeta{Namespace: p.tenant, Name: mcpName}}
	if err := onboardingC.Delete(context.Background(), obj); err != nil {
		t.Fatalf("delete Sample: %v", err)
	}
}

// waitObj waits until the test's Sample satisfies cond and returns it;
// what completes "waited for the Sample <namespace>/<name> to …".
func (p *provider) waitObj(t *testing.T, what string, cond func(*apiv1alpha1.Sample) bool) *apiv1alpha1.Sample {
	t.Helper()
	var obj *apiv1alpha1.Sample
	eventually(t, pollTimeout, fmt.Sprintf("the Sample %s/%s to %s", p.tenant, mcpName, what), func(context.Context) (bool, string) {
		obj = p.get(t)
		return cond(obj), describe(obj)
	})
	return obj
}

// waitReady waits until the Sample is Ready and Synced for its current
// generation.
func (p *provider) waitReady(t *testing.T) *apiv1alpha1.Sample {
	t.Helper()
	return p.waitObj(t, "be Ready", func(obj *apiv1alpha1.Sample) bool {
		return obj != nil && obj.Status.ObservedGeneration == obj.Generation &&
			obj.Status.Phase == string(spruntime.PhaseReady) &&
			hasCondition(obj, spruntime.ConditionReady, metav1.ConditionTrue, spruntime.ReasonReconcileSuccess) &&
			hasCondition(obj, spruntime.ConditionSynced, metav1.ConditionTrue, spruntime.ReasonReconcileSuccess)
	})
}

// waitGone waits until the Sample no longer exists.
func (p *provider) waitGone(t *testing.T) {
	t.Helper()
	p.waitObj(t, "be gone", func(obj *apiv1alpha1.Sample) bool { return obj == nil })
}

// reconciles is how often the provider's controller has reconciled, from
// controller-runtime's metrics.
func (p *provider) reconciles(t *testing.T) float64 {
	t.Helper()
	return testenv.ReconcileCount(t, p.name)
}

// noHotLoop checks that the controller reconciles the object at most twice
// more during quietPeriod: an object that waits for a change of its own
// must not be retried in a loop.
func (p *provider) noHotLoop(t *testing.T) {
	t.Helper()
	before := p.reconciles(t)
	throughoutQuietPeriod(func() {
		if n := p.reconciles(t); n > before+2 {
			t.Fatalf("%v reconciles within %s of waiting for a change: a hot loop", n-before, quietPeriod)
		}
	})
}

// throughoutQuietPeriod runs check every pollEvery for quietPeriod: for
// what must not happen while nothing changes (check fails the test). It
// waits for no event, so a loaded machine only makes it look less often.
func throughoutQuietPeriod(check func()) {
	deadline := time.Now().Add(quietPeriod)
	for time.Now().Before(deadline) {
		check()
		time.Sleep(pollEvery)
	}
}

// events returns "Type/Reason" of the events on the test's Sample.
func (p *provider) events(t *testing.T) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := onboardingC.List(context.Background(), list, client.InNamespace(p.tenant)); err != nil {
		t.Fatalf("list events: %v", err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == mcpName && e.Regarding.Kind == "Sample" {
			out = append(out, e.Type+"/"+e.Reason)
		}
	}
	return out
}

// waitEvent waits for an event of type and reason on the test's Sample.
func (p *provider) waitEvent(t *testing.T, eventType, reason string) {
	t.Helper()
	want := eventType + "/" + reason
	eventually(t, pollTimeout, fmt.Sprintf("an event %s on the Sample %s/%s", want, p.tenant, mcpName), func(context.Context) (bool, string) {
		seen := p.events(t)
		return slices.Contains(seen, want), fmt.Sprintf("events %v", seen)
	})
}

// accessRequests returns the names of the provider's AccessRequests for the
// test's MCP (not its onboarding or workload access).
func (p *provider) accessRequests(t *testing.T) []string {
	t.Helper()
	list := &clustersv1alpha1.AccessRequestList{}
	if err := platformC.List(context.Background(), list, client.InNamespace(p.namespace)); err != nil {
		t.Fatalf("list AccessRequests: %v", err)
	}
	var names []string
	for _, ar := range list.Items {
		if ar.Spec.RequestRef != nil && ar.Spec.RequestRef.Name == mcpName {
			names = append(names, ar.Name)
		}
	}
	return names
}

// mcpClientOfProvider returns a client with the provider's own credentials
// for the test's MCP cluster: the kubeconfig its AccessRequest yielded.
func (p *provider) mcpClientOfProvider(t *testing.T) client.Client {
	t.Helper()
	ctx := context.Background()
	list := &clustersv1alpha1.AccessRequestList{}
	if err := platformC.List(ctx, list, client.InNamespace(p.namespace)); err != nil {
		t.Fatalf("list AccessRequests: %v", err)
	}
	for _, ar := range list.Items {
		if ar.Spec.RequestRef == nil || ar.Spec.RequestRef.Name != mcpName || ar.Status.SecretRef == nil {
			continue
		}
		return p.clientOfAccessRequest(t, &ar)
	}
	t.Fatalf("the provider has no granted AccessRequest for the MCP %s", mcpName)
	return nil
}

// clientOfAccessRequest returns a client with the kubeconfig the granted
// AccessRequest ar yielded: the provider's own credentials.
func (p *provider) clientOfAccessRequest(t *testing.T, ar *clustersv1alpha1.AccessRequest) client.Client {
	t.Helper()
	secret := &corev1.Secret{}
	if err := platformC.Get(context.Background(), client.ObjectKey{Namespace: p.namespace, Name: ar.Status.SecretRef.Name}, secret); err != nil {
		t.Fatalf("kubeconfig Secret of AccessRequest %s: %v", ar.Name, err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[clustersv1alpha1.SecretKeyKubeconfig])
	if err != nil {
		t.Fatalf("kubeconfig of AccessRequest %s cannot be read", ar.Name)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c
}

// domainCRD returns the DomainServiceAPI's CRD in the MCP cluster, or nil.
func domainCRD(t *testing.T, mcp *providertest.MCP) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := mcp.Admin.Client.Get(context.Background(), client.ObjectKey{Name: controller.DomainCRDName}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatalf("get CRD %s: %v", controller.DomainCRDName, err)
	}
	return crd
}

// waitCRD waits until the DomainServiceAPI's CRD in the MCP cluster (nil
// when it does not exist) satisfies cond, and returns it; what completes
// "waited for the CRD … in the MCP cluster to …".
func waitCRD(t *testing.T, mcp *providertest.MCP, what string, cond func(*apiextensionsv1.CustomResourceDefinition) bool) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var crd *apiextensionsv1.CustomResourceDefinition
	eventually(t, pollTimeout, fmt.Sprintf("the CRD %s in the MCP cluster to %s", controller.DomainCRDName, what), func(context.Context) (bool, string) {
		crd = domainCRD(t, mcp)
		if crd == nil {
			return cond(crd), "missing"
		}
		return cond(crd), fmt.Sprintf("labels %v, annotations %v, deleting %v", crd.Labels, crd.Annotations, !crd.DeletionTimestamp.IsZero())
	})
	return crd
}

// update re-reads the object key, applies mutate and writes it, retrying on
// conflicts (the provider writes the object too).
func update[O client.Object](t *testing.T, c client.Client, key client.ObjectKey, obj O, mutate func(O)) {
	t.Helper()
	eventually(t, pollTimeout, fmt.Sprintf("an update of %T %s without a conflict", obj, key), func(ctx context.Context) (bool, string) {
		if err := c.Get(ctx, key, obj); err != nil {
			t.Fatalf("update %T %s: %v", obj, key, err)
		}
		mutate(obj)
		err := c.Update(ctx, obj)
		if apierrors.IsConflict(err) {
			return false, err.Error()
		}
		if err != nil {
			t.Fatalf("update %T %s: %v", obj, key, err)
		}
		return true, ""
	})
}

// hasCondition reports whether obj has the condition with status and
// reason.
func hasCondition(obj *apiv1alpha1.Sample, condType string, status metav1.ConditionStatus, reason string) bool {
	if obj == nil {
		return false
	}
	c := apimeta.FindStatusCondition(obj.Status.Conditions, condType)
	return c != nil && c.Status == status && c.Reason == reason
}

// describe summarises obj for failure messages.
func describe(obj *apiv1alpha1.Sample) string {
	if obj == nil {
		return "<gone>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "generation=%d observed=%d phase=%s finalizers=%v", obj.Generation, obj.Status.ObservedGeneration, obj.Status.Phase, obj.Finalizers)
	for _, c := range obj.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s/%s(%q)", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}
