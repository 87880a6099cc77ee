package clusters_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/internal/operator/internal/optest"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestClusterReachable registers the target cluster and expects Ready with
// its endpoint, phase, observed generation and Kubernetes version.
func TestClusterReachable(t *testing.T) {
	t.Parallel()
	optest.StartEnv(t)
	ns := optest.NewNamespace(t, "cl-ready")
	optest.StartManager(t, ns, func(mgr ctrl.Manager) error {
		return clusters.NewClusterReconciler(mgr.GetClient(), clusters.WithClusterControllerName("cluster-ready")).SetupWithManager(mgr)
	})
	optest.RegisterCluster(t, ns, "target", optest.Target.Kubeconfig, clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeWorkload)

	cl := optest.WaitClusterReason(t, ns, "target", metav1.ConditionTrue, clusters.ReasonReachable, 30*time.Second)

	info, err := discovery.NewDiscoveryClientForConfigOrDie(optest.Target.Config).ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	wantVersion := strings.TrimPrefix(info.GitVersion, "v")
	host := strings.TrimSuffix(optest.Target.Config.Host, "/") // the kubeconfig's server
	want := clustersv1alpha1.ClusterStatus{
		Status:    common.Status{ObservedGeneration: cl.Generation, Phase: common.StatusPhaseReady},
		APIServer: host, //nolint:staticcheck // the controller still fills the deprecated field for its readers
		Endpoints: []clustersv1alpha1.Endpoint{{Name: clustersv1alpha1.EndpointAPIServerExternal, URL: host}},
	}
	got := cl.Status
	got.Conditions = nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if got := cl.Labels[clustersv1alpha1.K8sVersionLabel]; got != wantVersion {
		t.Errorf("label %s = %q, want %q", clustersv1alpha1.K8sVersionLabel, got, wantVersion)
	}
}

// TestClusterNotReadyBacksOff registers clusters that cannot be used and
// expects the reason of each, and that they are retried only a few times
// over ten seconds (a hot loop would reconcile thousands of times, the
// default error backoff a dozen).
func TestClusterNotReadyBacksOff(t *testing.T) {
	t.Parallel()
	optest.StartEnv(t)
	ns := optest.NewNamespace(t, "cl-bad")
	const name = "cluster-bad"
	optest.StartManager(t, ns, func(mgr ctrl.Manager) error {
		return clusters.NewClusterReconciler(mgr.GetClient(), clusters.WithClusterControllerName(name)).SetupWithManager(mgr)
	})
	optest.RegisterCluster(t, ns, "missing", nil, clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeWorkload)
	optest.RegisterCluster(t, ns, "unreachable", optest.UnreachableKubeconfig(t), clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeWorkload)
	optest.RegisterCluster(t, ns, "invalid", []byte("sensitive-garbage: [x"), clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeWorkload)

	for name, reason := range map[string]clusters.Reason{
		"missing":     clusters.ReasonKubeconfigMissing,
		"unreachable": clusters.ReasonUnreachable,
		"invalid":     clusters.ReasonKubeconfigInvalid,
	} {
		cl := optest.WaitClusterReason(t, ns, name, metav1.ConditionFalse, reason, 30*time.Second)
		if cl.Status.Phase != common.StatusPhaseProgressing {
			t.Errorf("Cluster %s: phase %q, want %q", name, cl.Status.Phase, common.StatusPhaseProgressing)
		}
		if _, _, msg := optest.ReadyReason(cl.Status.Conditions); strings.Contains(msg, "sensitive-garbage") {
			t.Errorf("Cluster %s: the message quotes the Secret's content: %q", name, msg)
		}
	}

	// Three clusters retried at 5 s, 10 s, 20 s, …: at most two retries
	// each in ten seconds, three with slack.
	const window, limit = 10 * time.Second, 9
	start := testenv.ReconcileCount(t, name)
	optest.Consistently(t, window, "reconciles of not-ready clusters", func() error {
		if n := testenv.ReconcileCount(t, name) - start; n > limit {
			return fmt.Errorf("%v reconciles in less than %s, want at most %d", n, window, limit)
		}
		return nil
	})
	t.Logf("%v reconciles of 3 not-ready clusters in %s", testenv.ReconcileCount(t, name)-start, window)
}

// TestClusterFixedSecret shows that creating or fixing a kubeconfig Secret
// checks the Cluster at once: the retry backoff is an hour, so only the
// Secret watch can make the Cluster Ready within the test.
func TestClusterFixedSecret(t *testing.T) {
	t.Parallel()
	optest.StartEnv(t)
	ns := optest.NewNamespace(t, "cl-fix")
	optest.StartManager(t, ns, func(mgr ctrl.Manager) error {
		return clusters.NewClusterReconciler(mgr.GetClient(),
			clusters.WithClusterControllerName("cluster-fix"),
			clusters.WithRetryBackoff(clusters.Backoff{Min: time.Hour, Max: time.Hour}),
		).SetupWithManager(mgr)
	})
	optest.RegisterCluster(t, ns, "missing", nil, clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeWorkload)
	optest.RegisterCluster(t, ns, "unreachable", optest.UnreachableKubeconfig(t), clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeWorkload)
	optest.WaitClusterReason(t, ns, "missing", metav1.ConditionFalse, clusters.ReasonKubeconfigMissing, 30*time.Second)
	optest.WaitClusterReason(t, ns, "unreachable", metav1.ConditionFalse, clusters.ReasonUnreachable, 30*time.Second)

	optest.WriteKubeconfigSecret(t, ns, "missing-kubeconfig", optest.Target.Kubeconfig)
	optest.WriteKubeconfigSecret(t, ns, "unreachable-kubeconfig", optest.Target.Kubeconfig)
	for _, name := range []string{"missing", "unreachable"} {
		cl := optest.WaitClusterReason(t, ns, name, metav1.ConditionTrue, clusters.ReasonReachable, 30*time.Second)
		if cl.Status.Phase != common.StatusPhaseReady {
			t.Errorf("Cluster %s: phase %q, want Ready", name, cl.Status.Phase)
		}
	}
}
