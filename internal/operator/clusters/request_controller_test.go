package clusters_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/internal/operator/internal/optest"
)

// startSchedulers runs the Cluster controller (which makes the registered
// clusters Ready) and the ClusterRequest controller for one namespace.
func startSchedulers(t *testing.T, ns string, opts ...clusters.RequestOption) {
	t.Helper()
	optest.StartManager(t, ns, func(mgr ctrl.Manager) error {
		if err := clusters.NewClusterReconciler(mgr.GetClient(), clusters.WithClusterControllerName("cluster-"+ns)).SetupWithManager(mgr); err != nil {
			return err
		}
		opts = append([]clusters.RequestOption{clusters.WithRequestControllerName("clusterrequest-" + ns)}, opts...)
		return clusters.NewRequestReconciler(mgr.GetClient(), opts...).SetupWithManager(mgr)
	})
}

func createRequest(t *testing.T, ns, name, purpose string) *clustersv1alpha1.ClusterRequest {
	t.Helper()
	cr := &clustersv1alpha1.ClusterRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       clustersv1alpha1.ClusterRequestSpec{Purpose: purpose},
	}
	if err := optest.Platform.Client.Create(t.Context(), cr); err != nil {
		t.Fatalf("create ClusterRequest %s: %v", name, err)
	}
	return cr
}

// waitRequestPhase waits until the request has phase and Ready reason.
func waitRequestPhase(t *testing.T, ns, name, phase string, reason clusters.Reason) *clustersv1alpha1.ClusterRequest {
	t.Helper()
	cr := &clustersv1alpha1.ClusterRequest{}
	optest.Eventually(t, 30*time.Second, fmt.Sprintf("ClusterRequest %s %s/%s", name, phase, reason), func(ctx context.Context) (bool, error) {
		if err := optest.Platform.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cr); err != nil {
			return false, err
		}
		_, r, m := optest.ReadyReason(cr.Status.Conditions)
		if cr.Status.Phase != phase || r != string(reason) {
			return false, fmt.Errorf("phase %q reason %q: %s", cr.Status.Phase, r, m)
		}
		return true, nil
	})
	return cr
}

// tenants returns the request UIDs a Cluster's finalizers name.
func tenants(t *testing.T, ns, name string) []string {
	t.Helper()
	cl, err := optest.GetCluster(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	uids := cl.RequestUIDs()
	slices.Sort(uids)
	return uids
}

func waitGone(t *testing.T, obj client.Object) {
	t.Helper()
	optest.Eventually(t, 30*time.Second, fmt.Sprintf("%T %s gone", obj, obj.GetName()), func(ctx context.Context) (bool, error) {
		err := optest.Platform.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// TestSharedRequestsAreBalanced grants three workload requests on two
// Shared workload clusters and expects two on one and one on the other,
// never on an Exclusive cluster or a cluster of another purpose; the
// Clusters' finalizers are exactly the requests' UIDs; deleting a request
// removes its finalizer.
func TestSharedRequestsAreBalanced(t *testing.T) {
	t.Parallel()
	optest.StartEnv(t)
	ns := optest.NewNamespace(t, "cr-shared")
	startSchedulers(t, ns)
	for _, c := range []struct {
		name    string
		tenancy clustersv1alpha1.Tenancy
		purpose string
	}{
		{"shared-a", clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeWorkload},
		{"shared-b", clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeWorkload},
		{"exclusive", clustersv1alpha1.TenancyExclusive, clustersv1alpha1.PurposeWorkload},
		{"onboarding", clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeOnboarding},
	} {
		optest.RegisterCluster(t, ns, c.name, optest.Target.Kubeconfig, c.tenancy, c.purpose)
		optest.WaitClusterReason(t, ns, c.name, metav1.ConditionTrue, clusters.ReasonReachable, 30*time.Second)
	}

	// Created at once: the scheduler must not count tenants from a stale
	// cache.
	var wg sync.WaitGroup
	uids := map[string]string{}
	var mu sync.Mutex
	for _, name := range []string{"req-1", "req-2", "req-3"} {
		wg.Go(func() {
			cr := createRequest(t, ns, name, clustersv1alpha1.PurposeWorkload)
			mu.Lock()
			uids[name] = string(cr.UID)
			mu.Unlock()
		})
	}
	wg.Wait()

	granted := map[string][]string{} // cluster → request UIDs
	for _, name := range []string{"req-1", "req-2", "req-3"} {
		cr := waitRequestPhase(t, ns, name, clustersv1alpha1.RequestGranted, clusters.ReasonGranted)
		if cr.Status.Cluster.Namespace != ns {
			t.Errorf("%s: granted Cluster in namespace %q, want %q", name, cr.Status.Cluster.Namespace, ns)
		}
		if !slices.Contains(cr.Finalizers, clustersv1alpha1.ClusterRequestFinalizer) {
			t.Errorf("%s: finalizers %v lack %s", name, cr.Finalizers, clustersv1alpha1.ClusterRequestFinalizer)
		}
		granted[cr.Status.Cluster.Name] = append(granted[cr.Status.Cluster.Name], string(cr.UID))
	}
	counts := []int{len(granted["shared-a"]), len(granted["shared-b"])}
	slices.Sort(counts)
	if diff := cmp.Diff([]int{1, 2}, counts); diff != "" || len(granted) != 2 {
		t.Fatalf("grants per cluster %v, want 1 and 2 on shared-a and shared-b only", granted)
	}
	for _, name := range []string{"shared-a", "shared-b", "exclusive", "onboarding"} {
		want := granted[name]
		slices.Sort(want)
		if diff := cmp.Diff(want, tenants(t, ns, name)); diff != "" {
			t.Errorf("Cluster %s: request finalizers (-want +got):\n%s", name, diff)
		}
	}

	// Delete a request of the cluster with two tenants.
	busy := "shared-a"
	if len(granted["shared-b"]) == 2 {
		busy = "shared-b"
	}
	var victim string
	for name, uid := range uids {
		if uid == granted[busy][0] {
			victim = name
		}
	}
	cr := &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Name: victim, Namespace: ns}}
	if err := optest.Platform.Client.Delete(t.Context(), cr); err != nil {
		t.Fatal(err)
	}
	waitGone(t, cr)
	if diff := cmp.Diff([]string{granted[busy][1]}, tenants(t, ns, busy)); diff != "" {
		t.Errorf("Cluster %s after deleting %s: request finalizers (-want +got):\n%s", busy, victim, diff)
	}
}

// TestRequestWaitsForUnreadyCluster: a request whose only fitting cluster
// is not Ready (its API server does not answer) is Pending, naming the
// cluster, rather than Denied (final for openMCP's library); it is granted
// once the cluster answers. A purpose no cluster serves is still Denied.
func TestRequestWaitsForUnreadyCluster(t *testing.T) {
	t.Parallel()
	optest.StartEnv(t)
	ns := optest.NewNamespace(t, "cr-unready")
	startSchedulers(t, ns)
	optest.RegisterCluster(t, ns, "slow", optest.UnreachableKubeconfig(t), clustersv1alpha1.TenancyShared, "onboarding")
	optest.WaitClusterReason(t, ns, "slow", metav1.ConditionFalse, clusters.ReasonUnreachable, 30*time.Second)

	createRequest(t, ns, "waits", "onboarding")
	cr := waitRequestPhase(t, ns, "waits", clustersv1alpha1.RequestPending, clusters.ReasonClusterNotReady)
	if _, _, msg := optest.ReadyReason(cr.Status.Conditions); !strings.Contains(msg, ns+"/slow") || !strings.Contains(msg, "Unreachable") {
		t.Errorf("waits: message %q does not name the cluster and why it is not Ready", msg)
	}
	createRequest(t, ns, "nothing", "no-such-purpose")
	waitRequestPhase(t, ns, "nothing", clustersv1alpha1.RequestDenied, clusters.ReasonNoMatchingCluster)

	optest.WriteKubeconfigSecret(t, ns, "slow-kubeconfig", optest.Target.Kubeconfig)
	cr = waitRequestPhase(t, ns, "waits", clustersv1alpha1.RequestGranted, clusters.ReasonGranted)
	if cr.Status.Cluster == nil || cr.Status.Cluster.Name != "slow" {
		t.Errorf("waits: granted %v, want Cluster slow", cr.Status.Cluster)
	}
}

// TestExclusiveRequests grants an mcp request a free Exclusive cluster,
// denies a second one with a reason naming purpose and tenancy, grants it
// once another Exclusive cluster is registered, and reuses a cluster its
// request released.
func TestExclusiveRequests(t *testing.T) {
	t.Parallel()
	optest.StartEnv(t)
	ns := optest.NewNamespace(t, "cr-exclusive")
	startSchedulers(t, ns)
	optest.RegisterCluster(t, ns, "mcp-1", optest.Target.Kubeconfig, clustersv1alpha1.TenancyExclusive, clustersv1alpha1.PurposeMCP)
	// A Shared cluster of the purpose does not serve an Exclusive request.
	optest.RegisterCluster(t, ns, "mcp-shared", optest.Target.Kubeconfig, clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeMCP)
	optest.WaitClusterReason(t, ns, "mcp-1", metav1.ConditionTrue, clusters.ReasonReachable, 30*time.Second)
	optest.WaitClusterReason(t, ns, "mcp-shared", metav1.ConditionTrue, clusters.ReasonReachable, 30*time.Second)

	first := createRequest(t, ns, "first", clustersv1alpha1.PurposeMCP)
	cr := waitRequestPhase(t, ns, "first", clustersv1alpha1.RequestGranted, clusters.ReasonGranted)
	if cr.Status.Cluster.Name != "mcp-1" {
		t.Fatalf("first: granted %s, want mcp-1", cr.Status.Cluster.Name)
	}
	if diff := cmp.Diff([]string{string(first.UID)}, tenants(t, ns, "mcp-1")); diff != "" {
		t.Errorf("mcp-1 request finalizers (-want +got):\n%s", diff)
	}

	createRequest(t, ns, "second", clustersv1alpha1.PurposeMCP)
	cr = waitRequestPhase(t, ns, "second", clustersv1alpha1.RequestDenied, clusters.ReasonNoMatchingCluster)
	if _, _, msg := optest.ReadyReason(cr.Status.Conditions); !strings.Contains(msg, `"mcp"`) || !strings.Contains(msg, "Exclusive") {
		t.Errorf("second: message %q does not name purpose and tenancy", msg)
	}
	if cr.Status.Cluster != nil {
		t.Errorf("second: denied but status.cluster = %v", cr.Status.Cluster)
	}

	optest.RegisterCluster(t, ns, "mcp-2", optest.Target.Kubeconfig, clustersv1alpha1.TenancyExclusive, clustersv1alpha1.PurposeMCP)
	cr = waitRequestPhase(t, ns, "second", clustersv1alpha1.RequestGranted, clusters.ReasonGranted)
	if cr.Status.Cluster.Name != "mcp-2" {
		t.Fatalf("second: granted %s, want mcp-2", cr.Status.Cluster.Name)
	}

	if err := optest.Platform.Client.Delete(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	waitGone(t, first)
	if got := tenants(t, ns, "mcp-1"); len(got) != 0 {
		t.Errorf("mcp-1 still has request finalizers %v after its request was deleted", got)
	}
	third := createRequest(t, ns, "third", clustersv1alpha1.PurposeMCP)
	cr = waitRequestPhase(t, ns, "third", clustersv1alpha1.RequestGranted, clusters.ReasonGranted)
	if cr.Status.Cluster.Name != "mcp-1" {
		t.Errorf("third: granted %s, want the released mcp-1", cr.Status.Cluster.Name)
	}
	if diff := cmp.Diff([]string{string(third.UID)}, tenants(t, ns, "mcp-1")); diff != "" {
		t.Errorf("mcp-1 request finalizers (-want +got):\n%s", diff)
	}
}

// fakeProvisioner creates a Cluster on the platform cluster after being
// asked pendingCalls times, and deletes it on release.
type fakeProvisioner struct {
	mu           sync.Mutex
	ns           string
	pendingCalls int
	provisions   int
	released     []string // names of released clusters ("" for none)
}

func (p *fakeProvisioner) provision(ctx context.Context, req *clustersv1alpha1.ClusterRequest) (*clustersv1alpha1.Cluster, error) {
	p.mu.Lock()
	p.provisions++
	n := p.provisions
	p.mu.Unlock()
	if n <= p.pendingCalls {
		return nil, nil
	}
	cl := &clustersv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "prov-" + req.Name, Namespace: p.ns},
		Spec: clustersv1alpha1.ClusterSpec{Profile: "fake", Purposes: []string{req.Spec.Purpose},
			Tenancy: clustersv1alpha1.TenancyExclusive},
	}
	if err := optest.Platform.Client.Create(ctx, cl); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if err := optest.Platform.Client.Get(ctx, client.ObjectKeyFromObject(cl), cl); err != nil {
		return nil, err
	}
	return cl, nil
}

func (p *fakeProvisioner) release(ctx context.Context, _ *clustersv1alpha1.ClusterRequest, cl *clustersv1alpha1.Cluster) (bool, error) {
	p.mu.Lock()
	name := ""
	if cl != nil {
		name = cl.Name
	}
	p.released = append(p.released, name)
	p.mu.Unlock()
	if cl == nil {
		return true, nil
	}
	if err := optest.Platform.Client.Delete(ctx, cl); client.IgnoreNotFound(err) != nil {
		return false, err
	}
	err := optest.Platform.Client.Get(ctx, client.ObjectKeyFromObject(cl), &clustersv1alpha1.Cluster{})
	return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
}

// TestProvisioner uses a Provisioner for Exclusive requests no registered
// cluster serves: the request is Pending while it provisions, then Granted
// the new cluster; deleting the request releases and waits for the cluster
// to go. The tenancy of "workload" is switched to Exclusive by option.
func TestProvisioner(t *testing.T) {
	t.Parallel()
	optest.StartEnv(t)
	ns := optest.NewNamespace(t, "cr-provision")
	fake := &fakeProvisioner{ns: ns, pendingCalls: 1}
	startSchedulers(t, ns,
		clusters.WithTenancy(clustersv1alpha1.PurposeWorkload, clustersv1alpha1.TenancyExclusive),
		clusters.WithProvisioner(clusters.ProvisionerFns{ProvisionFn: fake.provision, ReleaseFn: fake.release}),
		clusters.WithProvisionInterval(300*time.Millisecond),
	)
	// A Shared workload cluster exists but does not serve the (now
	// Exclusive) workload request.
	optest.RegisterCluster(t, ns, "shared", optest.Target.Kubeconfig, clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeWorkload)
	optest.WaitClusterReason(t, ns, "shared", metav1.ConditionTrue, clusters.ReasonReachable, 30*time.Second)

	req := createRequest(t, ns, "wl", clustersv1alpha1.PurposeWorkload)
	waitRequestPhase(t, ns, "wl", clustersv1alpha1.RequestPending, clusters.ReasonProvisioning)
	cr := waitRequestPhase(t, ns, "wl", clustersv1alpha1.RequestGranted, clusters.ReasonGranted)
	if cr.Status.Cluster.Name != "prov-wl" {
		t.Fatalf("granted %s, want the provisioned prov-wl", cr.Status.Cluster.Name)
	}
	cl, err := optest.GetCluster(t.Context(), ns, "prov-wl")
	if err != nil {
		t.Fatal(err)
	}
	if got := cl.Annotations[clusters.ProvisionedForAnnotation]; got != string(req.UID) {
		t.Errorf("annotation %s = %q, want the request UID %q", clusters.ProvisionedForAnnotation, got, req.UID)
	}
	if diff := cmp.Diff([]string{string(req.UID)}, tenants(t, ns, "prov-wl")); diff != "" {
		t.Errorf("prov-wl request finalizers (-want +got):\n%s", diff)
	}

	if err := optest.Platform.Client.Delete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	waitGone(t, req)
	if _, err := optest.GetCluster(t.Context(), ns, "prov-wl"); !apierrors.IsNotFound(err) {
		t.Errorf("the provisioned cluster still exists after its request was deleted (err %v)", err)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.released) == 0 || slices.ContainsFunc(fake.released, func(s string) bool { return s != "prov-wl" }) {
		t.Errorf("released %v, want only prov-wl", fake.released)
	}
	if len(tenants(t, ns, "shared")) != 0 {
		t.Errorf("the Shared cluster got a request finalizer")
	}
}
