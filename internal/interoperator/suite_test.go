package interoperator_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator"
	"github.com/marketplane/marketplane/pkg/spruntime"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// Timeouts of the polls: generous, because the machine is shared, but far
// below the test timeout.
const (
	pollEvery   = 100 * time.Millisecond
	pollTimeout = 90 * time.Second
	// quietPeriod is how long a test watches that something does NOT
	// happen (no hot loop, no further writes).
	quietPeriod = 3 * time.Second
)

// The three API servers every test shares: platform (catalog, SFClusters,
// ProviderConfigs), onboarding (instances, bindings, bind Secrets) and the
// target cluster the SFClusters point to, with a kube-controller-manager
// for namespace deletion and service-account tokens.
var (
	platform, onboarding, target *testenv.Cluster
	scheme                       *runtime.Scheme
	logs                         testenv.SyncBuffer
	envCounter                   atomic.Int32
	// interoperatorBinary waits for the build TestMain started and
	// returns the path of the marketplane-interoperator binary.
	interoperatorBinary func() (string, error)
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if testenv.Short() {
		// The tests that need the API servers skip themselves.
		return m.Run()
	}
	ctrl.SetLogger(funcr.New(func(prefix, args string) {
		logs.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 2}))

	// The binary TestBinary runs builds while the API servers start.
	binDir, err := os.MkdirTemp("", "interoperator-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	interoperatorBinary = buildBinary(binDir)
	defer func() {
		_, _ = interoperatorBinary()
		_ = os.RemoveAll(binDir)
	}()

	clusters, err := testenv.NewMany(map[string][]testenv.Option{
		"platform":   nil,
		"onboarding": nil,
		"target":     {testenv.WithCRDs(), testenv.WithControllerManager()},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	platform, onboarding, target = clusters["platform"], clusters["onboarding"], clusters["target"]
	defer func() {
		for _, c := range clusters {
			_ = c.Stop()
		}
		for _, c := range workloadPool {
			_ = c.Stop()
		}
	}()
	scheme = platform.Scheme
	return m.Run()
}

// The workload API servers that tests needing plain clusters of their own
// share (each test in namespaces of its own), started on first use.
// Starting servers per test made the package's start a load spike that
// slowed other packages' API servers on a 2-core machine.
var (
	workloadsOnce sync.Once
	workloadPool  map[string]*testenv.Cluster
	workloadErr   error
)

// sharedWorkloads returns the shared workload API servers, named like
// workloadNames.
func sharedWorkloads(t *testing.T) map[string]*testenv.Cluster {
	t.Helper()
	workloadsOnce.Do(func() {
		specs := map[string][]testenv.Option{}
		for _, name := range workloadNames {
			specs[name] = nil
		}
		workloadPool, workloadErr = testenv.NewMany(specs)
	})
	if workloadErr != nil {
		t.Fatalf("start the shared workload API servers: %v", workloadErr)
	}
	return workloadPool
}

// needsClusters skips the test under -short, when TestMain started no API
// servers.
func needsClusters(t *testing.T) {
	t.Helper()
	testenv.SkipIfShort(t)
}

// buildBinary starts building cmd/marketplane-interoperator into dir and
// returns a function that waits for the build and returns the binary.
func buildBinary(dir string) func() (string, error) {
	bin := filepath.Join(dir, "marketplane-interoperator")
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = testenv.Build(dir, "github.com/marketplane/marketplane/cmd/marketplane-interoperator")
	}()
	return func() (string, error) {
		<-done
		if err != nil {
			return "", err
		}
		return bin, nil
	}
}

// env is one running inter-operator with a catalog namespace of its own on
// the platform cluster, an SFCluster "target" for the target cluster, and
// a namespace of its own on the onboarding cluster.
type env struct {
	// name is the provider name, also the ProviderConfig's name and the
	// prefix of the controllers' names.
	name string
	// catalog is the catalog namespace on the platform cluster.
	catalog string
	// ns is the namespace of instances and bindings on the onboarding
	// cluster.
	ns string
	io *interoperator.Interoperator
	// onb is the onboarding cluster the test brought (envOptions.onboarding);
	// nil means the package's (see onboarding).
	onb *testenv.Cluster
	// stop stops the inter-operator started last; start starts a new one.
	stop func() error
	// setup are further options of interoperator.Setup (envOptions.setup).
	setup []interoperator.Option
	// more are further onboarding namespaces the inter-operator serves
	// (envOptions.moreNamespaces and envOptions.namespaces).
	more []string
}

// envOptions configure newEnv.
type envOptions struct {
	catalog string
	// namespace, when set, is the onboarding namespace of the env's
	// instances and bindings, created by someone else (the broker).
	namespace string
	noCluster bool
	// onboarding, when set, replaces the package's onboarding cluster:
	// for a test that stops its API server.
	onboarding *testenv.Cluster
	configSpec func(*interoperatorv1alpha1.ProviderConfigSpec)
	// setup are further options of interoperator.Setup.
	setup []interoperator.Option
	// moreNamespaces are further onboarding namespaces, created for the
	// test, whose instances the inter-operator serves too: other tenants.
	moreNamespaces []string
	// namespaces are further onboarding namespaces the inter-operator
	// watches, created by someone else: the broker's, one per instance,
	// for a test that provisions several instances through it.
	namespaces []string
}

// onboarding returns the env's onboarding cluster.
func (e *env) onboarding() *testenv.Cluster { return cmp.Or(e.onb, onboarding) }

// tenant returns the env as seen from the onboarding namespace ns, one of
// its moreNamespaces: the helpers create and read instances and bindings
// there.
func (e *env) tenant(ns string) *env {
	other := *e
	other.ns = ns
	return &other
}

// newEnv starts an inter-operator for a test and stops it when the test
// ends.
func newEnv(t *testing.T, opts envOptions) *env {
	t.Helper()
	n := envCounter.Add(1)
	e := &env{name: fmt.Sprintf("io-%d", n), catalog: opts.catalog, ns: fmt.Sprintf("tenant-%d", n), onb: opts.onboarding}
	if e.catalog == "" {
		e.catalog = fmt.Sprintf("catalog-%d", n)
	}
	ctx := context.Background()
	if opts.namespace != "" {
		e.ns = opts.namespace
	} else {
		must(t, e.onboarding().Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}))
	}
	for _, ns := range opts.moreNamespaces {
		must(t, e.onboarding().Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	e.more = slices.Concat(opts.moreNamespaces, opts.namespaces)
	if err := platform.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.catalog}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	spec := interoperatorv1alpha1.ProviderConfigSpec{
		CatalogNamespace: e.catalog,
		Limits:           &interoperatorv1alpha1.Limits{MaxTransientErrors: 3},
	}
	if opts.configSpec != nil {
		opts.configSpec(&spec)
	}
	must(t, platform.Client.Create(ctx, &interoperatorv1alpha1.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: e.name}, Spec: spec}))
	if !opts.noCluster {
		e.createCluster(t, "target")
	}
	e.setup = opts.setup
	e.start(t)
	return e
}

// start starts the env's inter-operator; it stops when the test ends, or
// at e.stop.
func (e *env) start(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	platformCluster, err := cluster.New(platform.Config, func(o *cluster.Options) { o.Scheme = scheme })
	must(t, err)
	namespaces := map[string]cache.Config{e.ns: {}}
	for _, ns := range e.more {
		namespaces[ns] = cache.Config{}
	}
	mgr, err := ctrl.NewManager(e.onboarding().Config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: namespaces},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	must(t, err)
	must(t, mgr.Add(platformCluster))
	e.io, err = interoperator.Setup(ctx, mgr, platformCluster, e.name, append([]interoperator.Option{
		interoperator.WithControllerNamePrefix(e.name + "-"),
		interoperator.WithProgressWait(100*time.Millisecond, time.Second),
		interoperator.WithBackoff(50*time.Millisecond, time.Second),
		interoperator.WithKubeconfigRefresh(time.Second),
		interoperator.WithRuntimeOptions(spruntime.WithWaitInterval(200 * time.Millisecond))}, e.setup...)...)
	must(t, err)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	var stopErr error
	e.stop = func() error {
		once.Do(func() {
			cancel()
			stopErr = <-done
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := e.stop(); err != nil {
			t.Errorf("manager: %v", err)
		}
		if t.Failed() {
			t.Logf("controller log of %s:\n%s", e.name, logs.LinesWith(e.name+"-"))
		}
	})
}

// createCluster registers the target cluster as the SFCluster name, with
// its kubeconfig in a Secret.
func (e *env) createCluster(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	must(t, platform.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: name + "-kubeconfig"},
		Data:       map[string][]byte{resourcev1alpha1.KubeconfigSecretKey: target.Kubeconfig},
	}))
	must(t, platform.Client.Create(ctx, &resourcev1alpha1.SFCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: name},
		Spec:       resourcev1alpha1.SFClusterSpec{SecretRef: name + "-kubeconfig"},
	}))
}

// createService registers an SFService with id in the catalog.
func (e *env) createService(t *testing.T, id string) *osbv1alpha1.SFService {
	t.Helper()
	svc := &osbv1alpha1.SFService{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: id},
		Spec:       osbv1alpha1.SFServiceSpec{ID: id, Name: id, Description: "test service", Bindable: true},
	}
	must(t, platform.Client.Create(context.Background(), svc))
	return svc
}

// createPlan registers an SFPlan with id for the service serviceID and
// the given templates.
func (e *env) createPlan(t *testing.T, id, serviceID string, templates []osbv1alpha1.TemplateSpec, mutate ...func(*osbv1alpha1.SFPlan)) *osbv1alpha1.SFPlan {
	t.Helper()
	plan := &osbv1alpha1.SFPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.catalog, Name: id},
		Spec: osbv1alpha1.SFPlanSpec{ID: id, Name: id, ServiceID: serviceID, Description: "test plan",
			Free: true, Bindable: true, Templates: templates},
	}
	for _, m := range mutate {
		m(plan)
	}
	must(t, platform.Client.Create(context.Background(), plan))
	return plan
}

// createInstance records a provision request as the broker does: an
// SFServiceInstance named like the instance id, with the parameters.
func (e *env) createInstance(t *testing.T, id, serviceID, planID string, params map[string]any, mutate ...func(*osbv1alpha1.SFServiceInstance)) *osbv1alpha1.SFServiceInstance {
	t.Helper()
	inst := &osbv1alpha1.SFServiceInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: id},
		Spec: osbv1alpha1.SFServiceInstanceSpec{InstanceID: id, ServiceID: serviceID, PlanID: planID,
			OrganizationGUID: "org", SpaceGUID: "space", Parameters: rawJSON(t, params)},
	}
	for _, m := range mutate {
		m(inst)
	}
	must(t, e.onboarding().Client.Create(context.Background(), inst))
	return inst
}

// createBinding records a bind request.
func (e *env) createBinding(t *testing.T, id string, inst *osbv1alpha1.SFServiceInstance) {
	t.Helper()
	b := &osbv1alpha1.SFServiceBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: id},
		Spec: osbv1alpha1.SFServiceBindingSpec{ID: id, InstanceID: inst.Spec.InstanceID,
			PlanID: inst.Spec.PlanID, ServiceID: inst.Spec.ServiceID},
	}
	must(t, e.onboarding().Client.Create(context.Background(), b))
}

// instance returns the instance, or nil when it is gone.
func (e *env) instance(t *testing.T, name string) *osbv1alpha1.SFServiceInstance {
	t.Helper()
	inst := &osbv1alpha1.SFServiceInstance{}
	if err := e.onboarding().Client.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, inst); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatalf("get instance %s: %v", name, err)
	}
	return inst
}

// binding returns the binding, or nil when it is gone.
func (e *env) binding(t *testing.T, name string) *osbv1alpha1.SFServiceBinding {
	t.Helper()
	b := &osbv1alpha1.SFServiceBinding{}
	if err := e.onboarding().Client.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, b); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatalf("get binding %s: %v", name, err)
	}
	return b
}

// waitInstance waits until the instance is in state for its current
// generation and returns it.
func (e *env) waitInstance(t *testing.T, name string, state osbv1alpha1.State) *osbv1alpha1.SFServiceInstance {
	t.Helper()
	var inst *osbv1alpha1.SFServiceInstance
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, pollTimeout, true, func(context.Context) (bool, error) {
		inst = e.instance(t, name)
		return inst != nil && inst.Status.State == state && inst.Status.ObservedGeneration == inst.Generation, nil
	})
	if err != nil {
		t.Fatalf("instance %s did not reach state %q: %s", name, state, describeInstance(inst))
	}
	return inst
}

// waitBinding waits until the binding is in state and returns it.
func (e *env) waitBinding(t *testing.T, name string, state osbv1alpha1.State) *osbv1alpha1.SFServiceBinding {
	t.Helper()
	var b *osbv1alpha1.SFServiceBinding
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, pollTimeout, true, func(context.Context) (bool, error) {
		b = e.binding(t, name)
		return b != nil && b.Status.State == state, nil
	})
	if err != nil {
		t.Fatalf("binding %s did not reach state %q: %+v", name, state, b)
	}
	return b
}

// reconciles returns how often the env's instance controller reconciled.
func (e *env) reconciles(t *testing.T) float64 {
	t.Helper()
	return testenv.ReconcileCount(t, e.name+"-"+interoperator.InstanceControllerName)
}

// expectQuiet checks that the instance controller reconciles at most once
// more during quietPeriod (what says why it should be quiet): settled and
// failed operations are not retried in a loop. It counts from when the
// controller is idle: the reconcile whose status write the test saw may
// not have returned yet, and the one more allowed is for that write's own
// event. It stops at the first reconcile too many.
func (e *env) expectQuiet(t *testing.T, what string) {
	t.Helper()
	before := testenv.SettledReconcileCount(t, e.name+"-"+interoperator.InstanceControllerName, pollTimeout)
	deadline := time.Now().Add(quietPeriod)
	for time.Now().Before(deadline) {
		if n := e.reconciles(t) - before; n > 1 {
			t.Errorf("%v reconciles %s, want at most 1 within %s (no hot loop)", n, what, quietPeriod)
			return
		}
		time.Sleep(pollEvery)
	}
}

// events returns the notes of the events regarding the named object in the
// env's namespace on the onboarding cluster.
func (e *env) events(t *testing.T, name string) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	must(t, e.onboarding().Client.List(context.Background(), list, client.InNamespace(e.ns)))
	var out []string
	for _, ev := range list.Items {
		if ev.Regarding.Name == name {
			out = append(out, ev.Type+"/"+ev.Reason+": "+ev.Note)
		}
	}
	return out
}

// deleteAndWait deletes obj on c and waits until it is gone.
func deleteAndWait(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete %s: %v", obj.GetName(), err)
	}
	waitGone(t, c, obj)
}

// waitGone waits until obj no longer exists on c.
func waitGone(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, pollTimeout, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, key, obj)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("%T %s is not gone: %v", obj, key, err)
	}
}

// waitFor polls cond until it is true.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, pollTimeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// readyCondition returns the Ready condition of conditions, or nil.
func readyCondition(conditions []metav1.Condition) *metav1.Condition {
	return apimeta.FindStatusCondition(conditions, spruntime.ConditionReady)
}

func describeInstance(inst *osbv1alpha1.SFServiceInstance) string {
	if inst == nil {
		return "<gone>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "gen=%d observed=%d state=%q error=%q description=%q cluster=%q", inst.Generation, inst.Status.ObservedGeneration,
		inst.Status.State, inst.Status.Error, inst.Status.Description, inst.Spec.ClusterID)
	for _, c := range inst.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s/%s(%q)", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func rawJSON(t *testing.T, v map[string]any) *runtime.RawExtension {
	t.Helper()
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	must(t, err)
	return &runtime.RawExtension{Raw: b}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// edit reads obj afresh through c, lets change alter it and updates it,
// again on a conflict: the controllers write the objects the tests edit
// (finalizers, status), so an Update of an older copy may conflict.
func edit(t *testing.T, c client.Client, obj client.Object, change func()) {
	t.Helper()
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return fmt.Errorf("reading %s to edit it: %w", client.ObjectKeyFromObject(obj), err)
		}
		change()
		return c.Update(context.Background(), obj)
	}))
}
