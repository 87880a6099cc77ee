package kcpprovider_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	"github.com/marketplane/marketplane/internal/freeport"
	"github.com/marketplane/marketplane/internal/kcpprovider"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/pkg/kubeconfig"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// startProvider runs the provider named provider and the operator's
// Cluster controller in one manager for namespace.
func startProvider(t *testing.T, namespace, provider string, opts ...kcpprovider.Option) {
	t.Helper()
	startManager(t, namespace, func(mgr ctrl.Manager) error {
		opts = append([]kcpprovider.Option{kcpprovider.WithControllerName(provider)}, opts...)
		if err := kcpprovider.New(mgr.GetClient(), kcp.Config, provider, opts...).SetupWithManager(mgr); err != nil {
			return err
		}
		return clusters.NewClusterReconciler(mgr.GetClient(), clusters.WithClusterControllerName(provider+"-cluster")).SetupWithManager(mgr)
	})
}

// waitReady waits until the Cluster is Ready=True and returns it.
func waitReady(t *testing.T, namespace, name string) *clustersv1alpha1.Cluster {
	t.Helper()
	cl := &clustersv1alpha1.Cluster{}
	eventually(t, fmt.Sprintf("Cluster %s/%s Ready", namespace, name), 90*time.Second, func(ctx context.Context) (bool, string) {
		if err := platform.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cl); err != nil {
			return false, err.Error()
		}
		c := apimeta.FindStatusCondition(cl.Status.Conditions, common.ConditionTypeReady)
		if c == nil {
			return false, "no Ready condition"
		}
		return c.Status == metav1.ConditionTrue, fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
	})
	return cl
}

// adminConfig returns the REST config of the Cluster's kubeconfig Secret.
func adminConfig(t *testing.T, cl *clustersv1alpha1.Cluster) *rest.Config {
	t.Helper()
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: cl.Namespace, Name: cl.Annotations[clusters.KubeconfigSecretAnnotation]}
	if err := platform.Client.Get(t.Context(), key, secret); err != nil {
		t.Fatalf("get kubeconfig Secret %s: %v", key, err)
	}
	cfg, err := kubeconfig.Parse(secret.Data[clustersv1alpha1.SecretKeyKubeconfig])
	if err != nil {
		t.Fatalf("kubeconfig of Secret %s: %v", key, err)
	}
	return cfg
}

// TestClusterLifecycle: a Cluster of the provider's profile gets a
// Workspace labelled with its UID, a kubeconfig Secret and, through the
// operator's Cluster controller, Ready=True; a Cluster of another profile is
// left alone; deleting the Cluster removes the Workspace before the
// Secret and the Cluster go.
func TestClusterLifecycle(t *testing.T) {
	t.Parallel()
	startEnv(t)
	ns := newNamespace(t, "kcp-life")
	const provider = "kcp-life"
	createProfile(t, "kcp-life", provider)
	createProfile(t, "other-life", "someone-else")
	startProvider(t, ns, provider)
	other := createCluster(t, ns, "other", "other-life")
	cl := createCluster(t, ns, "mcp", "kcp-life")

	cl = waitReady(t, ns, cl.Name)
	wsName := kcpprovider.WorkspaceName(string(cl.UID))
	for key, want := range map[string]string{
		kcpprovider.BackendAnnotation:       kcpprovider.Backend,
		kcpprovider.WorkloadsAnnotation:     "none",
		kcpprovider.WorkspaceAnnotation:     "root:" + wsName,
		clusters.KubeconfigSecretAnnotation: "mcp-kubeconfig",
	} {
		if got := cl.Annotations[key]; got != want {
			t.Errorf("Cluster annotation %s = %q, want %q", key, got, want)
		}
	}
	if got := cl.Labels[clustersv1alpha1.ProviderLabel]; got != provider {
		t.Errorf("Cluster label %s = %q, want %q", clustersv1alpha1.ProviderLabel, got, provider)
	}
	ws, err := getWorkspace(t.Context(), t, wsName)
	if err != nil || ws == nil {
		t.Fatalf("Workspace %s: %v, %v", wsName, ws, err)
	}
	if got := ws.GetLabels()[kcpprovider.ClusterUIDLabel]; got != string(cl.UID) {
		t.Errorf("Workspace label %s = %q, want the Cluster's UID %q", kcpprovider.ClusterUIDLabel, got, cl.UID)
	}
	cfg := adminConfig(t, cl)
	if want := kcp.URL + "/clusters/root:" + wsName; cfg.Host != want {
		t.Errorf("kubeconfig server = %q, want %q", cfg.Host, want)
	}

	// The Cluster of another profile: the provider has been through its
	// own Cluster, and the other one got nothing of it.
	if err := platform.Client.Get(t.Context(), client.ObjectKeyFromObject(other), other); err != nil {
		t.Fatal(err)
	}
	if len(other.Finalizers) > 0 || other.Annotations[kcpprovider.BackendAnnotation] != "" {
		t.Errorf("Cluster of another profile was touched: finalizers %q, annotations %v", other.Finalizers, other.Annotations)
	}
	if ws, err := getWorkspace(t.Context(), t, kcpprovider.WorkspaceName(string(other.UID))); ws != nil || err != nil {
		t.Errorf("Cluster of another profile has a Workspace (%v, %v)", ws != nil, err)
	}

	if err := platform.Client.Delete(t.Context(), cl); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Cluster gone", 90*time.Second, func(ctx context.Context) (bool, string) {
		err := platform.Client.Get(ctx, client.ObjectKeyFromObject(cl), &clustersv1alpha1.Cluster{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		ws, _ := getWorkspace(ctx, t, wsName)
		return false, fmt.Sprintf("Cluster: %v; Workspace exists: %v", err, ws != nil)
	})
	// The finalizer goes last: by now the Workspace and the Secret are gone.
	if ws, err := getWorkspace(t.Context(), t, wsName); ws != nil || err != nil {
		t.Errorf("Workspace %s after the Cluster went: exists %v, %v", wsName, ws != nil, err)
	}
	err = platform.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "mcp-kubeconfig"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("kubeconfig Secret after the Cluster went: want NotFound, got %v", err)
	}
}

// TestWorkspaceIsolation: a Cluster's kubeconfig administers its own
// workspace (creates a namespace there) and is refused in another
// Cluster's workspace.
func TestWorkspaceIsolation(t *testing.T) {
	t.Parallel()
	startEnv(t)
	ns := newNamespace(t, "kcp-iso")
	const provider = "kcp-iso"
	createProfile(t, "kcp-iso", provider)
	startProvider(t, ns, provider)
	a := createCluster(t, ns, "a", "kcp-iso")
	b := createCluster(t, ns, "b", "kcp-iso")
	a, b = waitReady(t, ns, a.Name), waitReady(t, ns, b.Name)
	cfgA, cfgB := adminConfig(t, a), adminConfig(t, b)

	own := kubernetes.NewForConfigOrDie(cfgA)
	if _, err := own.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create a namespace in its own workspace with Cluster a's kubeconfig: %v", err)
	}
	// a's credentials at b's workspace.
	cross := rest.CopyConfig(cfgA)
	cross.Host = cfgB.Host
	_, err := kubernetes.NewForConfigOrDie(cross).CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("create a namespace in Cluster b's workspace with a's kubeconfig: want 403 Forbidden, got %v", err)
	}
	// And b's own credentials work there, so the 403 is a's identity.
	if _, err := kubernetes.NewForConfigOrDie(cfgB).CoreV1().Namespaces().Get(t.Context(), kcpprovider.AdminNamespace, metav1.GetOptions{}); err != nil {
		t.Errorf("get namespace %s with b's kubeconfig: %v", kcpprovider.AdminNamespace, err)
	}
}

// TestForeignWorkspaceNotAdopted: a Workspace of the Cluster's name that is
// labelled for another UID is not adopted: the Cluster gets a Warning event
// and no kubeconfig, retries back off, another Cluster of the same provider
// is served meanwhile, and deleting the Cluster leaves that Workspace.
func TestForeignWorkspaceNotAdopted(t *testing.T) {
	t.Parallel()
	startEnv(t)
	ns := newNamespace(t, "kcp-foreign")
	const provider = "kcp-foreign"
	startProvider(t, ns, provider)
	// The profile comes after the Cluster, so that the foreign Workspace
	// can be made for the Cluster's UID before the provider looks.
	cl := createCluster(t, ns, "victim", "kcp-foreign")
	wsName := kcpprovider.WorkspaceName(string(cl.UID))
	foreign := &unstructured.Unstructured{}
	foreign.SetAPIVersion(kcpprovider.WorkspaceGVR.GroupVersion().String())
	foreign.SetKind("Workspace")
	foreign.SetName(wsName)
	foreign.SetLabels(map[string]string{kcpprovider.ClusterUIDLabel: "someone-elses-uid"})
	if _, err := workspaces(t).Create(t.Context(), foreign, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create foreign Workspace: %v", err)
	}
	t.Cleanup(func() { _ = workspaces(t).Delete(context.Background(), wsName, metav1.DeleteOptions{}) })
	createProfile(t, "kcp-foreign", provider)
	good := createCluster(t, ns, "good", "kcp-foreign")

	note := waitEvent(t, cl, corev1.EventTypeWarning, string(kcpprovider.ReasonWorkspaceConflict), 60*time.Second)
	if !strings.Contains(note, wsName) || !strings.Contains(note, "not adopted") {
		t.Errorf("conflict event note %q: want the workspace's name and that it is not adopted", note)
	}
	waitReady(t, ns, good.Name)

	// Backoff: from 1 s doubling, a few attempts in five seconds, not a
	// hot loop.
	before := testenv.ReconcileCount(t, provider)
	time.Sleep(5 * time.Second) // a window to count reconciles in, not ordering
	if n := testenv.ReconcileCount(t, provider) - before; n > 6 {
		t.Errorf("%v reconciles in 5 s with a conflicting Workspace: want backoff", n)
	}
	err := platform.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "victim-kubeconfig"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("kubeconfig Secret of the Cluster with a foreign Workspace: want NotFound, got %v", err)
	}

	if err := platform.Client.Delete(t.Context(), cl); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Cluster gone", 60*time.Second, func(ctx context.Context) (bool, string) {
		err := platform.Client.Get(ctx, client.ObjectKeyFromObject(cl), &clustersv1alpha1.Cluster{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	ws, err := getWorkspace(t.Context(), t, wsName)
	if err != nil || ws == nil || ws.GetDeletionTimestamp() != nil {
		t.Fatalf("foreign Workspace after the Cluster went: want it kept, got exists=%v, %v", ws != nil, err)
	}
	if got := ws.GetLabels()[kcpprovider.ClusterUIDLabel]; got != "someone-elses-uid" {
		t.Errorf("foreign Workspace label = %q, want it unchanged", got)
	}
}

// TestKCPUnreachable: with kcp not answering, a Cluster gets its finalizer
// and a Warning event, no kubeconfig, and is retried with backoff.
func TestKCPUnreachable(t *testing.T) {
	t.Parallel()
	startEnv(t)
	ns := newNamespace(t, "kcp-down")
	const provider = "kcp-down"
	port, err := freeport.Pick("127.0.0.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	down := rest.CopyConfig(kcp.Config)
	down.Host = fmt.Sprintf("https://127.0.0.1:%d/clusters/root", port)
	createProfile(t, provider, provider)
	startManager(t, ns, func(mgr ctrl.Manager) error {
		return kcpprovider.New(mgr.GetClient(), down, provider, kcpprovider.WithControllerName(provider)).SetupWithManager(mgr)
	})
	before, start := testenv.ReconcileCount(t, provider), time.Now()
	cl := createCluster(t, ns, "mcp", provider)

	note := waitEvent(t, cl, corev1.EventTypeWarning, string(kcpprovider.ReasonKCPError), 30*time.Second)
	if !strings.Contains(note, "Workspace") {
		t.Errorf("event note %q: want it to say what failed", note)
	}
	// Retries 1 s, 2 s, 4 s apart: a handful in the first 6 s, where
	// controller-runtime's default backoff (from 5 ms) makes a dozen.
	time.Sleep(time.Until(start.Add(6 * time.Second))) // a window to count reconciles in, not ordering
	n := testenv.ReconcileCount(t, provider) - before
	t.Logf("%v reconciles in the first 6 s with kcp down", n)
	if n > 6 {
		t.Errorf("%v reconciles in the first 6 s with kcp down: want backoff from 1 s", n)
	}
	if err := platform.Client.Get(t.Context(), client.ObjectKeyFromObject(cl), cl); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cl.Finalizers, kcpprovider.Finalizer) {
		t.Errorf("finalizers %q: want %s", cl.Finalizers, kcpprovider.Finalizer)
	}
	err = platform.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "mcp-kubeconfig"}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("kubeconfig Secret with kcp down: want NotFound, got %v", err)
	}
}

// TestDeletionWaitsForRequests: a Cluster being deleted keeps its
// Workspace and Secret while a ClusterRequest's finalizer holds it, and
// loses them once the request lets go.
func TestDeletionWaitsForRequests(t *testing.T) {
	t.Parallel()
	startEnv(t)
	ns := newNamespace(t, "kcp-held")
	const provider = "kcp-held"
	createProfile(t, provider, provider)
	startManager(t, ns, func(mgr ctrl.Manager) error {
		return kcpprovider.New(mgr.GetClient(), kcp.Config, provider, kcpprovider.WithControllerName(provider)).SetupWithManager(mgr)
	})
	const requestFinalizer = clustersv1alpha1.RequestFinalizerOnClusterPrefix + "request-1"
	cl := &clustersv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: ns, Finalizers: []string{requestFinalizer}},
		Spec:       clustersv1alpha1.ClusterSpec{Profile: provider, Tenancy: clustersv1alpha1.TenancyExclusive},
	}
	if err := platform.Client.Create(t.Context(), cl); err != nil {
		t.Fatal(err)
	}
	secretKey := client.ObjectKey{Namespace: ns, Name: "held-kubeconfig"}
	eventually(t, "kubeconfig Secret", 90*time.Second, func(ctx context.Context) (bool, string) {
		err := platform.Client.Get(ctx, secretKey, &corev1.Secret{})
		return err == nil, fmt.Sprint(err)
	})
	wsName := kcpprovider.WorkspaceName(string(cl.UID))

	before := testenv.SettledReconcileCount(t, provider, 30*time.Second)
	if err := platform.Client.Delete(t.Context(), cl); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a reconcile of the deletion", 30*time.Second, func(context.Context) (bool, string) {
		n := testenv.ReconcileCount(t, provider)
		return n > before, fmt.Sprintf("%v reconciles, %v before the deletion", n, before)
	})
	testenv.SettledReconcileCount(t, provider, 30*time.Second)
	ws, err := getWorkspace(t.Context(), t, wsName)
	if err != nil || ws == nil || ws.GetDeletionTimestamp() != nil {
		t.Errorf("Workspace of a Cluster a request holds: want it kept, got exists=%v, %v", ws != nil, err)
	}
	if err := platform.Client.Get(t.Context(), secretKey, &corev1.Secret{}); err != nil {
		t.Errorf("kubeconfig Secret of a Cluster a request holds: %v", err)
	}

	if err := platform.Client.Get(t.Context(), client.ObjectKeyFromObject(cl), cl); err != nil {
		t.Fatal(err)
	}
	orig := cl.DeepCopy()
	cl.Finalizers = slices.DeleteFunc(cl.Finalizers, func(f string) bool { return f == requestFinalizer })
	if err := platform.Client.Patch(t.Context(), cl, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Cluster gone after the request let go", 90*time.Second, func(ctx context.Context) (bool, string) {
		err := platform.Client.Get(ctx, client.ObjectKeyFromObject(cl), &clustersv1alpha1.Cluster{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if ws, err := getWorkspace(t.Context(), t, wsName); ws != nil || err != nil {
		t.Errorf("Workspace after the Cluster went: exists %v, %v", ws != nil, err)
	}
}
