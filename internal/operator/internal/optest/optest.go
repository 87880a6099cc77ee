// Package optest holds the test environment the operator's cluster and
// access controller tests share: a Platform and a Target API server started
// once per test binary, a manager per test, and polling helpers.
package optest

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/pkg/testenv"
)

var (
	envOnce sync.Once
	envErr  error
)

// The API servers every test of a package shares, started on first use by
// StartEnv: Platform, where Clusters and ClusterRequests live, and Target,
// the cluster the Clusters point at.
var (
	Platform *testenv.Cluster
	Target   *testenv.Cluster
)

// Main runs the tests of a package and stops the shared API servers; call
// it from TestMain.
func Main(m *testing.M) {
	logf.SetLogger(testenv.Logger())
	code := m.Run()
	for _, c := range []*testenv.Cluster{Platform, Target} {
		if c != nil {
			_ = c.Stop()
		}
	}
	os.Exit(code)
}

// StartEnv starts the shared API servers once. It skips the test under
// -short.
func StartEnv(t *testing.T) {
	t.Helper()
	testenv.SkipIfShort(t)
	envOnce.Do(func() {
		var clusters map[string]*testenv.Cluster
		clusters, envErr = testenv.NewMany(map[string][]testenv.Option{"platform": nil, "target": {testenv.WithCRDs()}})
		Platform, Target = clusters["platform"], clusters["target"]
	})
	if envErr != nil {
		t.Fatalf("testenv: %v", envErr)
	}
}

// NewNamespace creates a namespace on the Platform cluster for one test.
func NewNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := Platform.Client.Create(t.Context(), ns); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// NewProviderNamespace creates a provider namespace on the Platform cluster
// as the operator does for the provider obj of kind: labelled with the
// provider and owned by it, which makes the access policy apply to the
// requests in it.
func NewProviderNamespace(t *testing.T, name, kind string, obj client.Object) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name,
		Labels: map[string]string{
			providerv1alpha1.ManagedByLabel: "marketplane-operator",
			"openmcp.cloud/provider-kind":   kind,
			"openmcp.cloud/provider-name":   obj.GetName(),
		},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: providerv1alpha1.GroupVersion.String(), Kind: kind,
			Name: obj.GetName(), UID: obj.GetUID(), Controller: ptr.To(true),
		}},
	}}
	if err := Platform.Client.Create(t.Context(), ns); err != nil {
		t.Fatalf("create provider namespace %s: %v", name, err)
	}
	return name
}

// StartManager runs a manager whose cache sees only namespace, so that a
// test's controllers see only the test's objects, with the controllers setup
// registers. It stops when the test ends.
func StartManager(t *testing.T, namespace string, setup func(mgr ctrl.Manager) error) {
	t.Helper()
	StartManagerFor(t, []string{namespace}, setup)
}

// StartManagerFor is StartManager for a test whose objects live in several
// namespaces.
func StartManagerFor(t *testing.T, namespaces []string, setup func(mgr ctrl.Manager) error) {
	t.Helper()
	cached := map[string]cache.Config{}
	for _, ns := range namespaces {
		cached[ns] = cache.Config{}
	}
	mgr, err := ctrl.NewManager(Platform.Config, ctrl.Options{
		Scheme:                 Platform.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: cached},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	if err := setup(mgr); err != nil {
		t.Fatalf("setup controllers: %v", err)
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
}

// RegisterCluster creates a Cluster and, unless kubeconfig is nil, its
// kubeconfig Secret "<name>-kubeconfig" (the annotation always names it).
func RegisterCluster(t *testing.T, namespace, name string, kubeconfig []byte, tenancy clustersv1alpha1.Tenancy, purposes ...string) *clustersv1alpha1.Cluster {
	t.Helper()
	ctx := t.Context()
	secretName := name + "-kubeconfig"
	if kubeconfig != nil {
		WriteKubeconfigSecret(t, namespace, secretName, kubeconfig)
	}
	cl := &clustersv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   namespace,
			Annotations: map[string]string{clusters.KubeconfigSecretAnnotation: secretName},
		},
		Spec: clustersv1alpha1.ClusterSpec{Profile: "static", Purposes: purposes, Tenancy: tenancy},
	}
	if err := Platform.Client.Create(ctx, cl); err != nil {
		t.Fatalf("create Cluster %s: %v", name, err)
	}
	return cl
}

// WriteKubeconfigSecret creates or replaces a kubeconfig Secret.
func WriteKubeconfigSecret(t *testing.T, namespace, name string, kubeconfig []byte) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	_, err := CreateOrUpdate(t.Context(), s, func() { s.Data = map[string][]byte{clusters.KubeconfigSecretKey: kubeconfig} })
	if err != nil {
		t.Fatalf("write Secret %s: %v", name, err)
	}
}

// CreateOrUpdate reads obj from the platform cluster, applies mutate and
// creates or updates it; it reports whether it created it.
func CreateOrUpdate(ctx context.Context, obj client.Object, mutate func()) (bool, error) {
	err := Platform.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	mutate()
	if err == nil {
		return false, Platform.Client.Update(ctx, obj)
	}
	if client.IgnoreNotFound(err) != nil {
		return false, err
	}
	return true, Platform.Client.Create(ctx, obj)
}

// UnreachableKubeconfig returns the target's kubeconfig pointing at a port
// nothing listens on.
func UnreachableKubeconfig(t *testing.T) []byte {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cfg, err := clientcmd.Load(Target.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + addr
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Eventually polls cond until it holds or timeout passes.
func Eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			if ctx.Err() == nil { // keep the last meaningful error
				last = err
			}
			return false, nil
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, last)
	}
}

// Consistently checks cond for the whole duration and fails as soon as it
// does not hold.
func Consistently(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	var failed error
	_ = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, d, true, func(context.Context) (bool, error) {
		failed = cond()
		return failed != nil, nil
	})
	if failed != nil {
		t.Fatalf("%s: %v", what, failed)
	}
}

// GetCluster reads a Cluster from the API server.
func GetCluster(ctx context.Context, namespace, name string) (*clustersv1alpha1.Cluster, error) {
	cl := &clustersv1alpha1.Cluster{}
	return cl, Platform.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cl)
}

// ReadyReason returns the status and reason of the Ready condition.
func ReadyReason(conds []metav1.Condition) (metav1.ConditionStatus, string, string) {
	c := apimeta.FindStatusCondition(conds, common.ConditionTypeReady)
	if c == nil {
		return "", "", ""
	}
	return c.Status, c.Reason, c.Message
}

// WaitClusterReason waits until the Cluster's Ready condition has status
// and reason.
func WaitClusterReason(t *testing.T, namespace, name string, status metav1.ConditionStatus, reason clusters.Reason, timeout time.Duration) *clustersv1alpha1.Cluster {
	t.Helper()
	var cl *clustersv1alpha1.Cluster
	Eventually(t, timeout, fmt.Sprintf("Cluster %s Ready=%s/%s", name, status, reason), func(ctx context.Context) (bool, error) {
		var err error
		if cl, err = GetCluster(ctx, namespace, name); err != nil {
			return false, err
		}
		s, r, m := ReadyReason(cl.Status.Conditions)
		if s != status || r != string(reason) {
			return false, fmt.Errorf("the Cluster is Ready=%s/%s: %s", s, r, m)
		}
		return true, nil
	})
	return cl
}
