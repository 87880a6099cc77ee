package access_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
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
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// The API servers every test of the package shares, started on first use:
// the platform cluster, where Clusters and ClusterRequests live, and one
// target cluster the Clusters point at.
var (
	envOnce  sync.Once
	envErr   error
	platform *testenv.Cluster
	target   *testenv.Cluster
)

func TestMain(m *testing.M) {
	if os.Getenv("TEST_LOG") != "" {
		logf.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{Verbosity: 2}))
	} else {
		logf.SetLogger(logr.Discard())
	}
	code := m.Run()
	for _, c := range []*testenv.Cluster{platform, target} {
		if c != nil {
			_ = c.Stop()
		}
	}
	os.Exit(code)
}

// startEnv starts the shared API servers once.
func startEnv(t *testing.T) {
	t.Helper()
	envOnce.Do(func() {
		var wg sync.WaitGroup
		var errP, errT error
		wg.Go(func() { platform, errP = testenv.New(testenv.WithName("platform")) })
		wg.Go(func() { target, errT = testenv.New(testenv.WithName("target"), testenv.WithCRDs()) })
		wg.Wait()
		envErr = errors.Join(errP, errT)
	})
	if envErr != nil {
		t.Fatalf("testenv: %v", envErr)
	}
}

// newNamespace creates a namespace on the platform cluster for one test.
func newNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := platform.Client.Create(t.Context(), ns); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// startManager runs a manager whose cache sees only namespace, so that a
// test's controllers see only the test's objects, with the controllers setup
// registers. It stops when the test ends.
func startManager(t *testing.T, namespace string, setup func(mgr ctrl.Manager) error) {
	t.Helper()
	mgr, err := ctrl.NewManager(platform.Config, ctrl.Options{
		Scheme:                 platform.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
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

// registerCluster creates a Cluster and, unless kubeconfig is nil, its
// kubeconfig Secret "<name>-kubeconfig" (the annotation always names it).
func registerCluster(t *testing.T, namespace, name string, kubeconfig []byte, tenancy clustersv1alpha1.Tenancy, purposes ...string) *clustersv1alpha1.Cluster {
	t.Helper()
	ctx := t.Context()
	secretName := name + "-kubeconfig"
	if kubeconfig != nil {
		writeKubeconfigSecret(t, namespace, secretName, kubeconfig)
	}
	cl := &clustersv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   namespace,
			Annotations: map[string]string{clusters.KubeconfigSecretAnnotation: secretName},
		},
		Spec: clustersv1alpha1.ClusterSpec{Profile: "static", Purposes: purposes, Tenancy: tenancy},
	}
	if err := platform.Client.Create(ctx, cl); err != nil {
		t.Fatalf("create Cluster %s: %v", name, err)
	}
	return cl
}

// writeKubeconfigSecret creates or replaces a kubeconfig Secret.
func writeKubeconfigSecret(t *testing.T, namespace, name string, kubeconfig []byte) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	_, err := createOrUpdate(t.Context(), s, func() { s.Data = map[string][]byte{clusters.KubeconfigSecretKey: kubeconfig} })
	if err != nil {
		t.Fatalf("write Secret %s: %v", name, err)
	}
}

func createOrUpdate(ctx context.Context, obj client.Object, mutate func()) (bool, error) {
	err := platform.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	mutate()
	if err == nil {
		return false, platform.Client.Update(ctx, obj)
	}
	if client.IgnoreNotFound(err) != nil {
		return false, err
	}
	return true, platform.Client.Create(ctx, obj)
}

// unreachableKubeconfig returns the target's kubeconfig pointing at a port
// nothing listens on.
func unreachableKubeconfig(t *testing.T) []byte {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cfg, err := clientcmd.Load(target.Kubeconfig)
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

// eventually polls cond until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
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

// consistently checks cond for the whole duration and fails as soon as it
// does not hold.
func consistently(t *testing.T, d time.Duration, what string, cond func() error) {
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

// getCluster reads a Cluster from the API server.
func getCluster(ctx context.Context, namespace, name string) (*clustersv1alpha1.Cluster, error) {
	cl := &clustersv1alpha1.Cluster{}
	return cl, platform.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cl)
}

// readyReason returns the status and reason of the Ready condition.
func readyReason(conds []metav1.Condition) (metav1.ConditionStatus, string, string) {
	c := apimeta.FindStatusCondition(conds, common.ConditionTypeReady)
	if c == nil {
		return "", "", ""
	}
	return c.Status, c.Reason, c.Message
}

// waitClusterReason waits until the Cluster's Ready condition has status
// and reason.
func waitClusterReason(t *testing.T, namespace, name string, status metav1.ConditionStatus, reason clusters.Reason, timeout time.Duration) *clustersv1alpha1.Cluster {
	t.Helper()
	var cl *clustersv1alpha1.Cluster
	eventually(t, timeout, fmt.Sprintf("Cluster %s Ready=%s/%s", name, status, reason), func(ctx context.Context) (bool, error) {
		var err error
		if cl, err = getCluster(ctx, namespace, name); err != nil {
			return false, err
		}
		s, r, m := readyReason(cl.Status.Conditions)
		if s != status || r != string(reason) {
			return false, fmt.Errorf("Ready=%s/%s: %s", s, r, m)
		}
		return true, nil
	})
	return cl
}

// reconcileCount returns how often the controller called name has
// reconciled, from controller-runtime's metrics.
func reconcileCount(t *testing.T, name string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == name {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
