package clusters_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/internal/operator/internal/optest"
	"github.com/marketplane/marketplane/pkg/providerrequests"
)

// holdFinalizer stands for the ClusterProvider's finalizer, which keeps a
// Cluster until the cluster behind it is deleted.
const holdFinalizer = "test.marketplane.io/cluster-provider"

// TestProfileProvisioner runs the ClusterRequest controller with a profile
// provisioner for purpose mcp and no fallback: an mcp request is Pending
// (ProvisioningFailed, naming the profile) while its ClusterProfile does
// not exist, and (naming the ClusterProvider and its namespace) while the
// namespace of the profile's ClusterProvider does not; then it gets a new
// Cluster of the profile in that namespace, never in the operator's, which
// it holds exclusively. Deleting the request deletes the Cluster, and the request
// goes only once the Cluster is gone, which waits for the provider's
// finalizer. An Exclusive request of another purpose is Denied, as without
// a provisioner.
func TestProfileProvisioner(t *testing.T) {
	t.Parallel()
	optest.StartEnv(t)
	ns := optest.NewNamespace(t, "cr-profile")
	profile := "profile-" + ns
	provider := "provider-" + ns
	providerNS, _ := providerrequests.Namespace("ClusterProvider", provider)
	optest.StartManagerFor(t, []string{ns, providerNS}, func(mgr ctrl.Manager) error {
		if err := clusters.NewClusterReconciler(mgr.GetClient(), clusters.WithClusterControllerName("cluster-"+ns)).SetupWithManager(mgr); err != nil {
			return err
		}
		byProfile := clusters.NewProfileProvisioner(mgr.GetClient(), map[string]string{clustersv1alpha1.PurposeMCP: profile})
		return clusters.NewRequestReconciler(mgr.GetClient(),
			clusters.WithRequestControllerName("clusterrequest-"+ns),
			clusters.WithTenancy(clustersv1alpha1.PurposeWorkload, clustersv1alpha1.TenancyExclusive),
			clusters.WithProvisioner(clusters.ByPurpose(nil, map[string]clusters.Provisioner{clustersv1alpha1.PurposeMCP: byProfile})),
			clusters.WithProvisionInterval(300*time.Millisecond),
		).SetupWithManager(mgr)
	})

	req := createRequest(t, ns, "tenant", clustersv1alpha1.PurposeMCP)
	cr := waitRequestPhase(t, ns, "tenant", clustersv1alpha1.RequestPending, clusters.ReasonProvisioningFailed)
	if _, _, msg := optest.ReadyReason(cr.Status.Conditions); !strings.Contains(msg, `ClusterProfile "`+profile+`"`) || !strings.Contains(msg, "does not exist") {
		t.Errorf("tenant: message %q does not say that ClusterProfile %s does not exist", msg, profile)
	}

	createProfile(t, profile, provider)
	optest.Eventually(t, 30*time.Second, "the request naming the missing namespace of the ClusterProvider", func(ctx context.Context) (bool, error) {
		cr := &clustersv1alpha1.ClusterRequest{}
		if err := optest.Platform.Client.Get(ctx, client.ObjectKeyFromObject(req), cr); err != nil {
			return false, err
		}
		_, reason, msg := optest.ReadyReason(cr.Status.Conditions)
		return cr.Status.Phase == clustersv1alpha1.RequestPending && reason == string(clusters.ReasonProvisioningFailed) &&
			strings.Contains(msg, providerNS) && strings.Contains(msg, `ClusterProvider "`+provider+`"`), nil
	})
	optest.NewNamespace(t, providerNS)
	cr = waitRequestPhase(t, ns, "tenant", clustersv1alpha1.RequestGranted, clusters.ReasonGranted)
	name := clusters.ProvisionedClusterName(req)
	if cr.Status.Cluster.Name != name || cr.Status.Cluster.Namespace != providerNS {
		t.Fatalf("tenant: granted %s, want the provisioned %s/%s in the ClusterProvider's namespace", cr.Status.Cluster.NamespacedName(), providerNS, name)
	}
	if _, err := optest.GetCluster(t.Context(), ns, name); !apierrors.IsNotFound(err) {
		t.Errorf("Cluster %s in the operator's namespace %s: %v, want NotFound", name, ns, err)
	}
	cl, err := optest.GetCluster(t.Context(), providerNS, name)
	if err != nil {
		t.Fatal(err)
	}
	want := clustersv1alpha1.ClusterSpec{Profile: profile, Purposes: []string{clustersv1alpha1.PurposeMCP}, Tenancy: clustersv1alpha1.TenancyExclusive}
	if diff := cmp.Diff(want, cl.Spec); diff != "" {
		t.Errorf("Cluster %s spec (-want +got):\n%s", name, diff)
	}
	if got := cl.Annotations[clusters.ProvisionedForAnnotation]; got != string(req.UID) {
		t.Errorf("annotation %s = %q, want the request UID %q", clusters.ProvisionedForAnnotation, got, req.UID)
	}
	if diff := cmp.Diff([]string{string(req.UID)}, tenants(t, providerNS, name)); diff != "" {
		t.Errorf("Cluster %s request finalizers (-want +got):\n%s", name, diff)
	}

	// Another purpose has no provisioner here.
	createRequest(t, ns, "workload", clustersv1alpha1.PurposeWorkload)
	waitRequestPhase(t, ns, "workload", clustersv1alpha1.RequestDenied, clusters.ReasonNoMatchingCluster)

	// The provider's finalizer keeps the Cluster, and the Cluster the
	// request.
	hold(t, cl, true)
	if err := optest.Platform.Client.Delete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, 30*time.Second, "Cluster "+name+" being deleted", func(ctx context.Context) (bool, error) {
		if err := optest.Platform.Client.Get(ctx, client.ObjectKeyFromObject(cl), cl); err != nil {
			return false, err
		}
		return !cl.DeletionTimestamp.IsZero(), nil
	})
	optest.Consistently(t, 2*time.Second, "request kept while its Cluster exists", func() error {
		return optest.Platform.Client.Get(t.Context(), client.ObjectKeyFromObject(req), &clustersv1alpha1.ClusterRequest{})
	})
	if got := tenants(t, providerNS, name); len(got) != 0 {
		t.Errorf("Cluster %s still has request finalizers %v after its request was deleted", name, got)
	}
	hold(t, cl, false)
	waitGone(t, cl)
	waitGone(t, req)
}

// TestProfileProvisionerIsIdempotent: asked twice for one request, the
// provisioner returns the same Cluster; a Cluster of that name not made for
// the request is an error rather than taken over; released, the Cluster is
// deleted and release reports done only once it is gone.
func TestProfileProvisionerIsIdempotent(t *testing.T) {
	t.Parallel()
	optest.StartEnv(t)
	ns := optest.NewNamespace(t, "cr-profile-idem")
	profile := "profile-" + ns
	provider := "provider-" + ns
	createProfile(t, profile, provider)
	providerNS, _ := providerrequests.Namespace("ClusterProvider", provider)
	optest.NewNamespace(t, providerNS)
	c := optest.Platform.Client
	p := clusters.NewProfileProvisioner(c, map[string]string{clustersv1alpha1.PurposeMCP: profile})
	ctx := t.Context()

	req := createRequest(t, ns, "tenant", clustersv1alpha1.PurposeMCP)
	first, err := p.Provision(ctx, req)
	if err != nil || first == nil {
		t.Fatalf("Provision: %v, %v", first, err)
	}
	again, err := p.Provision(ctx, req)
	if err != nil || again == nil || again.UID != first.UID {
		t.Fatalf("Provision again: %v, %v; want Cluster %s (uid %s)", again, err, first.Name, first.UID)
	}

	// A request of another UID whose name is taken: refused.
	other := &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns, UID: "other-uid"},
		Spec: clustersv1alpha1.ClusterRequestSpec{Purpose: clustersv1alpha1.PurposeMCP}}
	taken := &clustersv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: clusters.ProvisionedClusterName(other), Namespace: providerNS},
		Spec:       clustersv1alpha1.ClusterSpec{Profile: profile, Purposes: []string{"mcp"}, Tenancy: clustersv1alpha1.TenancyExclusive},
	}
	if err := c.Create(ctx, taken); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Provision(ctx, other); err == nil || !strings.Contains(err.Error(), "taken") {
		t.Errorf("Provision of a taken name: got %v, %v; want an error saying it is taken", got, err)
	}
	if done, err := p.Release(ctx, other, nil); err != nil || !done {
		t.Errorf("Release of a Cluster not provisioned for the request: %v, %v; want done without touching it", done, err)
	}
	if _, err := optest.GetCluster(ctx, providerNS, taken.Name); err != nil {
		t.Errorf("the Cluster not provisioned for the request: %v", err)
	}

	hold(t, first, true)
	done, err := p.Release(ctx, req, nil)
	if err != nil || done {
		t.Fatalf("Release while the provider's finalizer holds the Cluster: %v, %v; want not done", done, err)
	}
	if first.Namespace != providerNS {
		t.Errorf("Provision: Cluster in namespace %s, want the ClusterProvider's %s", first.Namespace, providerNS)
	}
	cl, err := optest.GetCluster(ctx, providerNS, first.Name)
	if err != nil {
		t.Fatal(err)
	}
	if cl.DeletionTimestamp.IsZero() || controllerutil.ContainsFinalizer(cl, req.FinalizerForCluster()) {
		t.Errorf("released Cluster: deletion %v, finalizers %v; want deleted and without the request's finalizer", cl.DeletionTimestamp, cl.Finalizers)
	}
	hold(t, cl, false)
	waitGone(t, cl)
	if done, err := p.Release(ctx, req, nil); err != nil || !done {
		t.Errorf("Release once the Cluster is gone: %v, %v; want done", done, err)
	}
}

// createProfile creates the ClusterProfile name of the ClusterProvider
// provider.
func createProfile(t *testing.T, name, provider string) {
	t.Helper()
	prof := &clustersv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: clustersv1alpha1.ClusterProfileSpec{
			ProviderRef:       common.LocalObjectReference{Name: provider},
			ProviderConfigRef: common.LocalObjectReference{Name: "default"},
			SupportedVersions: []clustersv1alpha1.SupportedK8sVersion{{Version: "1.36.0"}},
		},
	}
	if err := optest.Platform.Client.Create(t.Context(), prof); err != nil {
		t.Fatalf("create ClusterProfile %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := optest.Platform.Client.Delete(context.Background(), prof); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete ClusterProfile %s: %v", name, err)
		}
	})
}

// hold adds or removes holdFinalizer on the Cluster.
func hold(t *testing.T, cl *clustersv1alpha1.Cluster, on bool) {
	t.Helper()
	optest.Eventually(t, 10*time.Second, fmt.Sprintf("finalizer %s on Cluster %s set to %v", holdFinalizer, cl.Name, on), func(ctx context.Context) (bool, error) {
		cur := &clustersv1alpha1.Cluster{}
		if err := optest.Platform.Client.Get(ctx, client.ObjectKeyFromObject(cl), cur); err != nil {
			if apierrors.IsNotFound(err) && !on {
				return true, nil
			}
			return false, err
		}
		before := cur.DeepCopy()
		if on {
			controllerutil.AddFinalizer(cur, holdFinalizer)
		} else {
			controllerutil.RemoveFinalizer(cur, holdFinalizer)
		}
		if err := optest.Platform.Client.Patch(ctx, cur, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return false, err
		}
		return true, nil
	})
}
