package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/mcp"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// Timeouts of the polls in these tests: generous, because the machine is
// shared, but far below the test timeout.
const (
	pollInterval = 100 * time.Millisecond
	pollTimeout  = 30 * time.Second
)

// The test plays the controllers the MCP controller relies on: the
// ClusterRequest scheduler and the AccessRequest controller. Like them, it
// puts these finalizers on what it grants.
const (
	fakeClusterRequestFinalizer = clustersv1alpha1.ClusterRequestFinalizer
	fakeAccessRequestFinalizer  = "clusters.openmcp.cloud/accessrequest"
)

// logs collects the log of every test's controller; each test prints the
// lines of its own when it fails. controller-runtime takes its logger once
// per process, so it is set once.
var (
	logs       testenv.SyncBuffer
	setLogger  sync.Once
	envCounter atomic.Int32
)

// env is the pair of clusters and the running controller the subtests share.
type env struct {
	platform, onboarding *testenv.Cluster
	controllerName       string
}

// startEnv starts the platform and onboarding API servers and a manager on
// the onboarding cluster, with the platform cluster added to it, running the
// ManagedControlPlane controller under a name of its own, so that tests
// with an env each can run in parallel.
func startEnv(t *testing.T) *env {
	t.Helper()
	clusters := testenv.StartMany(t, []string{"platform", "onboarding"})
	e := &env{platform: clusters["platform"], onboarding: clusters["onboarding"],
		controllerName: fmt.Sprintf("mcp-test-%d", envCounter.Add(1))}

	setLogger.Do(func() {
		ctrl.SetLogger(funcr.New(func(prefix, args string) {
			logs.WriteString(prefix + " " + args + "\n")
		}, funcr.Options{Verbosity: 2}))
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller log:\n%s", logs.LinesWith(`"`+e.controllerName+`"`))
		}
	})

	platform, err := cluster.New(e.platform.Config, func(o *cluster.Options) { o.Scheme = e.platform.Scheme })
	if err != nil {
		t.Fatalf("platform cluster: %v", err)
	}
	mgr, err := ctrl.NewManager(e.onboarding.Config, ctrl.Options{
		Scheme:                 e.onboarding.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	if err := mgr.Add(platform); err != nil {
		t.Fatalf("add platform cluster: %v", err)
	}
	r := mcp.NewReconciler(mgr, platform,
		mcp.WithControllerName(e.controllerName),
		mcp.WithServicePollInterval(500*time.Millisecond),
		mcp.WithControllerOptions(controller.Options{SkipNameValidation: ptr.To(true)}))
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatalf("setup controller: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return e
}

// reconciles returns how often the controller has reconciled so far.
func (e *env) reconciles(t *testing.T) float64 {
	t.Helper()
	return testenv.ReconcileCount(t, e.controllerName)
}

// eventually polls cond until it returns nil, failing the test with the last
// error when it does not within pollTimeout.
func eventually(t *testing.T, what string, cond func(ctx context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, pollTimeout, true, func(context.Context) (bool, error) {
		// Each check gets its own deadline, so that the last error says
		// what was missing rather than that the poll ran out of time.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		last = cond(ctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v (last: %v)", what, err, last)
	}
}

// get fetches key into obj, failing the test on any error.
func get(t *testing.T, c client.Client, key client.ObjectKey, obj client.Object) {
	t.Helper()
	if err := c.Get(context.Background(), key, obj); err != nil {
		t.Fatalf("get %T %s: %v", obj, key, err)
	}
}

// create creates obj, failing the test on any error.
func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
	}
}

// mutate gets obj (which names what to get), applies fn and updates it,
// retrying on conflicts; with status it updates the status subresource.
func mutate[T client.Object](t *testing.T, c client.Client, obj T, status bool, fn func(T)) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, pollTimeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, obj); err != nil {
			return false, err
		}
		fn(obj)
		var err error
		if status {
			err = c.Status().Update(ctx, obj)
		} else {
			err = c.Update(ctx, obj)
		}
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("update %T %s: %v", obj, key, err)
	}
}

// gone returns nil when the object named by obj does not exist.
func gone(ctx context.Context, c client.Client, obj client.Object) error {
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	return fmt.Errorf("%T %s still exists (deletionTimestamp %v, finalizers %v)", obj, client.ObjectKeyFromObject(obj), obj.GetDeletionTimestamp(), obj.GetFinalizers())
}

// deleting returns nil when the object named by obj has a deletionTimestamp.
func deleting(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return err
	}
	if obj.GetDeletionTimestamp() == nil {
		return errors.New("no deletionTimestamp yet")
	}
	return nil
}

// removeFinalizer removes finalizer f from obj, as the controller that owns
// it would when its clean-up is done.
func removeFinalizer[T client.Object](t *testing.T, c client.Client, obj T, f string) {
	t.Helper()
	mutate(t, c, obj, false, func(o T) { controllerutil.RemoveFinalizer(o, f) })
}

// grantClusterRequest plays the scheduler: it grants the ClusterRequest
// key the Cluster cluster.
func (e *env) grantClusterRequest(t *testing.T, key client.ObjectKey, cl *clustersv1alpha1.Cluster) {
	t.Helper()
	cr := &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
	mutate(t, e.platform.Client, cr, false, func(o *clustersv1alpha1.ClusterRequest) { controllerutil.AddFinalizer(o, fakeClusterRequestFinalizer) })
	mutate(t, e.platform.Client, cl, false, func(c *clustersv1alpha1.Cluster) { controllerutil.AddFinalizer(c, cr.FinalizerForCluster()) })
	mutate(t, e.platform.Client, cr, true, func(o *clustersv1alpha1.ClusterRequest) {
		o.Status.Phase = clustersv1alpha1.RequestGranted
		o.Status.Cluster = &common.ObjectReference{Name: cl.Name, Namespace: cl.Namespace}
		o.Status.ObservedGeneration = o.Generation
	})
}

// grantAccessRequest plays the AccessRequest controller: it writes the
// kubeconfig Secret <name>.kubeconfig and grants the AccessRequest key.
func (e *env) grantAccessRequest(t *testing.T, key client.ObjectKey, kubeconfig string) *corev1.Secret {
	t.Helper()
	ar := &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
	mutate(t, e.platform.Client, ar, false, func(o *clustersv1alpha1.AccessRequest) { controllerutil.AddFinalizer(o, fakeAccessRequestFinalizer) })
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name + ".kubeconfig", Namespace: key.Namespace},
		Data: map[string][]byte{
			clustersv1alpha1.SecretKeyKubeconfig: []byte(kubeconfig),
			clustersv1alpha1.SecretKeyToken:      []byte("token-of-" + key.Name),
		},
	}
	create(t, e.platform.Client, s)
	mutate(t, e.platform.Client, ar, true, func(o *clustersv1alpha1.AccessRequest) {
		o.Status.Phase = clustersv1alpha1.RequestGranted
		o.Status.SecretRef = &common.ObjectReference{Name: s.Name, Namespace: s.Namespace}
		o.Status.ObservedGeneration = o.Generation
	})
	return s
}

// newCluster registers a Cluster on the platform cluster, with endpoints and
// a Ready condition as the Cluster controller would report them.
func (e *env) newCluster(t *testing.T, name string) *clustersv1alpha1.Cluster {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "clusters"}}
	if err := e.platform.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace: %v", err)
	}
	cl := &clustersv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name},
		Spec: clustersv1alpha1.ClusterSpec{
			Profile:  "static",
			Purposes: []string{clustersv1alpha1.PurposeMCP},
			Tenancy:  clustersv1alpha1.TenancyExclusive,
		},
	}
	create(t, e.platform.Client, cl)
	mutate(t, e.platform.Client, cl, true, func(c *clustersv1alpha1.Cluster) {
		c.Status.Phase = common.StatusPhaseReady
		c.Status.Endpoints = []clustersv1alpha1.Endpoint{{Name: clustersv1alpha1.EndpointAPIServerExternal, URL: "https://" + name + ".example:6443"}}
		c.Status.Conditions = []metav1.Condition{{Type: common.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Reachable", Message: "ok", LastTransitionTime: metav1.Now()}}
	})
	return cl
}

// ensureNamespace creates a namespace on c if it does not exist.
func ensureNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// installFooCRD installs the test service kind Foo
// (foo.services.openmcp.cloud/v1alpha1, namespaced) on c and waits until it
// is served.
func installFooCRD(t *testing.T, c client.Client) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "foos." + fooGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: fooGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Foo", ListKind: "FooList", Plural: "foos", Singular: "foo"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
	create(t, c, crd)
	eventually(t, "Foo CRD established", func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return errors.New("not established")
	})
}

// serviceProvider creates a ServiceProvider on the platform cluster whose
// spec.accessPolicy lists apiGroups and which registers kinds in
// status.resources.
func (e *env) serviceProvider(t *testing.T, name string, apiGroups []string, kinds ...metav1.GroupVersionKind) {
	t.Helper()
	sp := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: name}}
	sp.Spec.Image = "example.com/" + name + ":v1"
	if apiGroups != nil {
		sp.Spec.AccessPolicy = &providerv1alpha1.AccessPolicy{APIGroups: apiGroups}
	}
	create(t, e.platform.Client, sp)
	if len(kinds) > 0 {
		mutate(t, e.platform.Client, sp, true, func(sp *providerv1alpha1.ServiceProvider) { sp.Status.Resources = kinds })
	}
}

// ensureFooCRD installs Foo unless an earlier subtest did.
func ensureFooCRD(t *testing.T, c client.Client) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "foos." + fooGroup}, crd); err == nil {
		return
	}
	installFooCRD(t, c)
}

const fooGroup = "foo.services.openmcp.cloud"
