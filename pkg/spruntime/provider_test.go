package spruntime_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/pkg/spruntime"
	"github.com/marketplane/marketplane/pkg/spruntime/internal/testapi"
)

// userLabel marks a ConfigMap in the MCP as a tenant's object of the domain
// service of the TestService it names: while one exists, deletion is
// blocked.
const userLabel = "test.services.openmcp.cloud/user-of"

// invalidValue is the spec.value the test provider rejects as invalid
// user input.
const invalidValue = "invalid"

// testProvider is the domain logic of a tiny provider: for each TestService
// it keeps a ConfigMap "<name>-managed" in the namespace of the same name in
// the MCP cluster, holding spec.value, the ProviderConfig's greeting and the
// key names of the Secret the ProviderConfig names.
type testProvider struct {
	// platform reads the Secret the ProviderConfig names.
	platform client.Client
	// secretNamespace is where that Secret lives.
	secretNamespace string

	mu       sync.Mutex
	creates  map[string]int
	deletes  map[string]int
	failNext map[string]int
	// slowDelete makes the first Delete call of an object report "not
	// done yet" and ask to be called again after a second.
	slowDelete bool
}

var (
	_ spruntime.Reconciler[*testapi.TestService, *testapi.ProviderConfig]          = &testProvider{}
	_ spruntime.Observer[*testapi.TestService, *testapi.ProviderConfig]            = &testProvider{}
	_ spruntime.UserResourceChecker[*testapi.TestService, *testapi.ProviderConfig] = &testProvider{}
)

func newTestProvider(platform client.Client, secretNamespace string) *testProvider {
	return &testProvider{
		platform:        platform,
		secretNamespace: secretNamespace,
		creates:         map[string]int{},
		deletes:         map[string]int{},
		failNext:        map[string]int{},
	}
}

// managedName is the name of the ConfigMap the provider keeps for obj.
func managedName(name string) string { return name + "-managed" }

// desired returns the data the managed ConfigMap of obj should hold.
func (p *testProvider) desired(ctx context.Context, obj *testapi.TestService, cfg *testapi.ProviderConfig) (map[string]string, error) {
	data := map[string]string{"value": obj.Spec.Value, "greeting": cfg.Spec.Greeting}
	if cfg.Spec.SecretName != "" {
		s := &corev1.Secret{}
		if err := p.platform.Get(ctx, client.ObjectKey{Namespace: p.secretNamespace, Name: cfg.Spec.SecretName}, s); err != nil {
			return nil, fmt.Errorf("get secret %s: %w", cfg.Spec.SecretName, err)
		}
		keys := make([]string, 0, len(s.Data))
		for k := range s.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		data["secretKeys"] = strings.Join(keys, ",")
	}
	return data, nil
}

// Observe implements spruntime.Observer.
func (p *testProvider) Observe(ctx context.Context, obj *testapi.TestService, cfg *testapi.ProviderConfig, clusters spruntime.ClusterContext) (spruntime.Observation, error) {
	if obj.Spec.Value == invalidValue {
		return spruntime.Observation{}, nil
	}
	cm := &corev1.ConfigMap{}
	err := clusters.MCPCluster.Client().Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: managedName(obj.Name)}, cm)
	if apierrors.IsNotFound(err) {
		return spruntime.Observation{Exists: false, Drift: "ConfigMap " + managedName(obj.Name) + " is missing"}, nil
	}
	if err != nil {
		return spruntime.Observation{}, err
	}
	want, err := p.desired(ctx, obj, cfg)
	if err != nil {
		return spruntime.Observation{}, err
	}
	for k, v := range want {
		if cm.Data[k] != v {
			return spruntime.Observation{Exists: true, Drift: fmt.Sprintf("ConfigMap %s: data[%s] is %q, want %q", cm.Name, k, cm.Data[k], v)}, nil
		}
	}
	return spruntime.Observation{Exists: true, UpToDate: true}, nil
}

// CreateOrUpdate implements spruntime.Reconciler.
func (p *testProvider) CreateOrUpdate(ctx context.Context, obj *testapi.TestService, cfg *testapi.ProviderConfig, clusters spruntime.ClusterContext) (ctrl.Result, error) {
	p.mu.Lock()
	p.creates[obj.Name]++
	fail := p.failNext[obj.Name] > 0
	if fail {
		p.failNext[obj.Name]--
	}
	p.mu.Unlock()
	if obj.Spec.Value == invalidValue {
		return ctrl.Result{}, spruntime.InvalidUserInput("InvalidValue", "spec.value %q is not allowed; use any other value", obj.Spec.Value)
	}
	if fail {
		return ctrl.Result{}, errors.New("the MCP cluster is not answering (simulated)")
	}
	spruntime.StatusProgressing(obj, "Installing", "Installing the ConfigMap")
	data, err := p.desired(ctx, obj, cfg)
	if err != nil {
		return ctrl.Result{}, err
	}
	c := clusters.MCPCluster.Client()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: obj.Namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, fmt.Errorf("create namespace: %w", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: managedName(obj.Name)}}
	if _, err := ctrl.CreateOrUpdate(ctx, c, cm, func() error {
		cm.Data = data
		return nil
	}); err != nil {
		return ctrl.Result{}, fmt.Errorf("apply ConfigMap: %w", err)
	}
	spruntime.StatusReady(obj)
	return ctrl.Result{}, nil
}

// UserResources implements spruntime.UserResourceChecker.
func (p *testProvider) UserResources(ctx context.Context, obj *testapi.TestService, _ *testapi.ProviderConfig, clusters spruntime.ClusterContext) ([]string, error) {
	list := &corev1.ConfigMapList{}
	if err := clusters.MCPCluster.Client().List(ctx, list, client.InNamespace(obj.Namespace), client.MatchingLabels{userLabel: obj.Name}); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list.Items))
	for _, cm := range list.Items {
		names = append(names, "ConfigMap "+cm.Namespace+"/"+cm.Name)
	}
	return names, nil
}

// Delete implements spruntime.Reconciler.
func (p *testProvider) Delete(ctx context.Context, obj *testapi.TestService, _ *testapi.ProviderConfig, clusters spruntime.ClusterContext) (ctrl.Result, error) {
	p.mu.Lock()
	p.deletes[obj.Name]++
	wait := p.slowDelete && p.deletes[obj.Name] == 1
	p.mu.Unlock()
	spruntime.StatusTerminating(obj)
	if wait {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	c := clusters.MCPCluster.Client()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: managedName(obj.Name)}}
	if err := c.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("delete ConfigMap: %w", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm); !apierrors.IsNotFound(err) {
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, nil
}

func (p *testProvider) count(m map[string]int, name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return m[name]
}

// createCalls and deleteCalls report how often CreateOrUpdate and Delete
// ran for the object name.
//
//nolint:unparam // the tests name the object they created, as for get and waitReady
func (p *testProvider) createCalls(name string) int { return p.count(p.creates, name) }
func (p *testProvider) deleteCalls(name string) int { return p.count(p.deletes, name) }

// failTimes makes the next n CreateOrUpdate calls for name fail with a
// transient error.
func (p *testProvider) failTimes(name string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failNext[name] = n
}

// testAccess is a ClusterAccess around fixed clusters that the test can
// hold back (not ready) or break (error), and that counts releases.
type testAccess struct {
	clusters spruntime.ClusterContext

	mu       sync.Mutex
	pending  bool
	err      error
	releases map[string]int
	// releaseRounds is how many Release calls report "not done yet".
	releaseRounds int
	// clustersAfterRelease counts Clusters calls for objects whose
	// access is already being released: asking again would re-request it.
	clustersAfterRelease int
}

var _ spruntime.ClusterAccess[*testapi.TestService] = &testAccess{}

func newTestAccess(clusters spruntime.ClusterContext) *testAccess {
	return &testAccess{clusters: clusters, releases: map[string]int{}}
}

// Clusters implements spruntime.ClusterAccess.
func (a *testAccess) Clusters(_ context.Context, obj *testapi.TestService) (spruntime.ClusterContext, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.releases[obj.Name] > 0 {
		a.clustersAfterRelease++
	}
	if a.err != nil {
		return spruntime.ClusterContext{}, false, a.err
	}
	return a.clusters, !a.pending, nil
}

// Release implements spruntime.ClusterAccess.
func (a *testAccess) Release(_ context.Context, obj *testapi.TestService) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.releases[obj.Name]++
	return a.releases[obj.Name] > a.releaseRounds, nil
}

func (a *testAccess) set(pending bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pending, a.err = pending, err
}

func (a *testAccess) releaseCalls(name string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.releases[name]
}
