package spruntime_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
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
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/marketplane/marketplane/pkg/spruntime"
	"github.com/marketplane/marketplane/pkg/spruntime/internal/testapi"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// Timeouts of the polls: generous, because the machine is shared, but far
// below the test timeout.
const (
	pollEvery   = 100 * time.Millisecond
	pollTimeout = 30 * time.Second
	// quietPeriod is how long a test watches that something does NOT
	// happen (no reconcile of an ignored object, no hot loop).
	quietPeriod = 3 * time.Second
)

// The three API servers every test shares: platform (ProviderConfigs,
// Secrets), onboarding (TestServices) and the MCP cluster the test
// provider acts on.
var (
	scheme                    = runtime.NewScheme()
	platform, onboarding, mcp *testenv.Cluster
	platformC, onboardingC    client.Client
	mcpC                      client.Client
	logs                      testenv.SyncBuffer
	providerCounter           atomic.Int32
	errMissingTestEnvironment = errors.New("test environment not started")
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if testenv.Short() {
		// The tests that need the API servers skip themselves.
		return m.Run()
	}
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := testapi.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	crds, err := testapi.CRDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctrl.SetLogger(funcr.New(func(prefix, args string) {
		logs.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 1}))

	clusters, err := testenv.NewMany(map[string][]testenv.Option{
		"platform":   {testenv.WithCRDs(crds...)},
		"onboarding": {testenv.WithCRDs(crds...)},
		"mcp":        {testenv.WithCRDs()},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	platform, onboarding, mcp = clusters["platform"], clusters["onboarding"], clusters["mcp"]
	defer func() {
		for _, c := range clusters {
			_ = c.Stop()
		}
	}()
	for _, c := range []struct {
		env *testenv.Cluster
		dst *client.Client
	}{{platform, &platformC}, {onboarding, &onboardingC}, {mcp, &mcpC}} {
		cl, err := client.New(c.env.Config, client.Options{Scheme: scheme})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		*c.dst = cl
	}
	return m.Run()
}

// provider is one running instance of the test provider: a manager on the
// onboarding cluster (its cache limited to the test's namespace, so that
// tests running in parallel do not see each other's objects) with the
// platform cluster added, running the APIReconciler.
type provider struct {
	// name is the provider name, also the name of its ProviderConfig and
	// of its controller.
	name string
	// ns is the namespace of the test's objects on the onboarding cluster,
	// of its Secrets on the platform cluster and of the managed
	// ConfigMaps in the MCP.
	ns     string
	domain *testProvider
	access *testAccess
}

// startProvider creates a namespace and starts a provider serving it. The
// options come after the defaults of the tests (short wait and backoff).
func startProvider(t *testing.T, opts ...spruntime.Option) *provider {
	t.Helper()
	return startProviderWith(t, func(string) []spruntime.Option { return opts })
}

// startProviderWith is startProvider with options that depend on the
// provider's namespace.
func startProviderWith(t *testing.T, optsFor func(ns string) []spruntime.Option) *provider {
	t.Helper()
	if onboarding == nil {
		t.Fatal(errMissingTestEnvironment)
	}
	p := &provider{name: fmt.Sprintf("test-%d", providerCounter.Add(1))}
	p.ns = p.name
	ctx := context.Background()
	for _, c := range []client.Client{onboardingC, platformC} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ns}}); err != nil {
			t.Fatalf("create namespace: %v", err)
		}
	}

	platformCluster, err := cluster.New(platform.Config, func(o *cluster.Options) {
		o.Scheme = scheme
		o.Cache.ByObject = map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{p.ns: {}}},
		}
	})
	if err != nil {
		t.Fatalf("platform cluster: %v", err)
	}
	mgr, err := ctrl.NewManager(onboarding.Config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{p.ns: {}}},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	if err := mgr.Add(platformCluster); err != nil {
		t.Fatalf("add platform cluster: %v", err)
	}

	mcpCluster := spruntime.NewCluster("mcp", mcp.Config, mcpC)
	p.domain = newTestProvider(platformC, p.ns)
	p.access = newTestAccess(spruntime.ClusterContext{MCPCluster: mcpCluster})
	all := append([]spruntime.Option{
		spruntime.WithControllerName(p.name),
		spruntime.WithWaitInterval(200 * time.Millisecond),
		spruntime.WithBackoff(50*time.Millisecond, 2*time.Second),
	}, optsFor(p.ns)...)
	r, err := spruntime.NewAPIReconciler(p.name,
		func() *testapi.TestService { return &testapi.TestService{} },
		func() *testapi.ProviderConfig { return &testapi.ProviderConfig{} },
		p.domain, p.access, platformCluster, all...)
	if err != nil {
		t.Fatalf("new reconciler: %v", err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatalf("setup: %v", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
		if t.Failed() {
			t.Logf("controller log of %s:\n%s", p.name, logs.LinesWith(`"`+p.name+`"`))
		}
	})
	return p
}

// createConfig creates the provider's ProviderConfig.
func (p *provider) createConfig(t *testing.T, spec testapi.ProviderConfigSpec) *testapi.ProviderConfig {
	t.Helper()
	cfg := &testapi.ProviderConfig{ObjectMeta: metav1.ObjectMeta{Name: p.name}, Spec: spec}
	if err := platformC.Create(context.Background(), cfg); err != nil {
		t.Fatalf("create ProviderConfig: %v", err)
	}
	return cfg
}

// createService creates a TestService in the provider's namespace; mutate
// may add labels and annotations.
func (p *provider) createService(t *testing.T, name, value string, mutate ...func(*testapi.TestService)) *testapi.TestService {
	t.Helper()
	obj := &testapi.TestService{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: name},
		Spec:       testapi.TestServiceSpec{Value: value},
	}
	for _, m := range mutate {
		m(obj)
	}
	if err := onboardingC.Create(context.Background(), obj); err != nil {
		t.Fatalf("create TestService: %v", err)
	}
	return obj
}

func (p *provider) key(name string) client.ObjectKey {
	return client.ObjectKey{Namespace: p.ns, Name: name}
}

// get returns the TestService, or nil when it does not exist.
func (p *provider) get(t *testing.T, name string) *testapi.TestService {
	t.Helper()
	obj := &testapi.TestService{}
	if err := onboardingC.Get(context.Background(), p.key(name), obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatalf("get TestService: %v", err)
	}
	return obj
}

// update re-reads the TestService, applies mutate and updates it, retrying
// on conflicts (the runtime writes the object too).
//
//nolint:unparam // the tests name the object they created, as for get and waitReady
func (p *provider) update(t *testing.T, name string, mutate func(*testapi.TestService)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, pollTimeout, true, func(ctx context.Context) (bool, error) {
		obj := &testapi.TestService{}
		if err := onboardingC.Get(ctx, p.key(name), obj); err != nil {
			return false, err
		}
		mutate(obj)
		err := onboardingC.Update(ctx, obj)
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("update TestService %s: %v", name, err)
	}
}

// managed returns the managed ConfigMap of the TestService in the MCP, or
// nil.
func (p *provider) managed(t *testing.T, name string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := mcpC.Get(context.Background(), client.ObjectKey{Namespace: p.ns, Name: managedName(name)}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatalf("get managed ConfigMap: %v", err)
	}
	return cm
}

// reconciles returns how often the provider's controller has reconciled,
// from controller-runtime's metrics.
func (p *provider) reconciles(t *testing.T) float64 {
	t.Helper()
	return testenv.ReconcileCount(t, p.name)
}

// settledReconciles waits until the provider's controller is idle and
// returns reconciles: the baseline of a check that nothing more happens,
// which then counts no reconcile that was already running.
func (p *provider) settledReconciles(t *testing.T) float64 {
	t.Helper()
	return testenv.SettledReconcileCount(t, p.name, pollTimeout)
}

// waitFor polls cond until it is true, failing the test with what after
// returns when it does not become true in time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, pollTimeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// stays checks that cond holds throughout quietPeriod.
func stays(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(quietPeriod)
	for time.Now().Before(deadline) {
		if !cond() {
			t.Fatalf("expected %s throughout %s, but it changed", what, quietPeriod)
		}
		time.Sleep(pollEvery)
	}
}

// cond returns the condition of the given type, or nil.
func cond(obj *testapi.TestService, condType string) *metav1.Condition {
	if obj == nil {
		return nil
	}
	return apimeta.FindStatusCondition(obj.Status.Conditions, condType)
}

// hasCond reports whether obj has the condition with status and reason.
func hasCond(obj *testapi.TestService, condType string, status metav1.ConditionStatus, reason string) bool {
	c := cond(obj, condType)
	return c != nil && c.Status == status && c.Reason == reason
}

// describe is a one-line summary of obj's status for failure messages.
func describe(obj *testapi.TestService) string {
	if obj == nil {
		return "<gone>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "gen=%d observed=%d phase=%s finalizers=%v", obj.Generation, obj.Status.ObservedGeneration, obj.Status.Phase, obj.Finalizers)
	for _, c := range obj.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s/%s(%q)", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

// waitReady waits until the TestService is Ready and Synced for its current
// generation, and returns it.
func (p *provider) waitReady(t *testing.T, name string) *testapi.TestService {
	t.Helper()
	var obj *testapi.TestService
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, pollTimeout, true, func(context.Context) (bool, error) {
		obj = p.get(t, name)
		return obj != nil && obj.Status.ObservedGeneration == obj.Generation &&
			hasCond(obj, spruntime.ConditionReady, metav1.ConditionTrue, spruntime.ReasonReconcileSuccess) &&
			hasCond(obj, spruntime.ConditionSynced, metav1.ConditionTrue, spruntime.ReasonReconcileSuccess), nil
	})
	if err != nil {
		t.Fatalf("TestService %s did not become Ready: %s", name, describe(obj))
	}
	return obj
}

// waitEvent waits for an event with reason (and type) on the TestService.
//
//nolint:unparam // the tests name the object they created, as for get and waitReady
func (p *provider) waitEvent(t *testing.T, name, eventType, reason string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	var seen []string
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, pollTimeout, true, func(ctx context.Context) (bool, error) {
		list := &eventsv1.EventList{}
		if err := onboardingC.List(ctx, list, client.InNamespace(p.ns)); err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, e := range list.Items {
			if e.Regarding.Name != name {
				continue
			}
			seen = append(seen, e.Type+"/"+e.Reason+": "+e.Note)
			if e.Reason == reason && e.Type == eventType {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event %s on %s; events: %v", eventType, reason, name, seen)
	}
	return found
}

// events returns "Type/Reason" of the events recorded so far on the
// TestService.
func (p *provider) events(t *testing.T, name string) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := onboardingC.List(context.Background(), list, client.InNamespace(p.ns)); err != nil {
		t.Fatalf("list events: %v", err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e.Type+"/"+e.Reason)
		}
	}
	return out
}
