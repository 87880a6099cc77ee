package access_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/access"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/internal/operator/internal/optest"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// startControllers runs the Cluster and AccessRequest controllers for one
// namespace; the AccessRequest controller is named name.
func startControllers(t *testing.T, ns, name string, opts ...access.Option) {
	t.Helper()
	optest.StartManager(t, ns, func(mgr ctrl.Manager) error {
		if err := clusters.NewClusterReconciler(mgr.GetClient(), clusters.WithClusterControllerName("cluster-"+ns)).SetupWithManager(mgr); err != nil {
			return err
		}
		return access.NewReconciler(mgr.GetClient(), append([]access.Option{access.WithName(name)}, opts...)...).SetupWithManager(mgr)
	})
}

func createAccessRequest(t *testing.T, ar *clustersv1alpha1.AccessRequest) *clustersv1alpha1.AccessRequest {
	t.Helper()
	if err := optest.Platform.Client.Create(t.Context(), ar); err != nil {
		t.Fatalf("create AccessRequest %s: %v", ar.Name, err)
	}
	return ar
}

// waitAccess waits until the request has phase and Ready reason.
func waitAccess(t *testing.T, ns, name, phase string, reason access.Reason) *clustersv1alpha1.AccessRequest {
	t.Helper()
	ar := &clustersv1alpha1.AccessRequest{}
	optest.Eventually(t, 30*time.Second, fmt.Sprintf("AccessRequest %s %s/%s", name, phase, reason), func(ctx context.Context) (bool, error) {
		if err := optest.Platform.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ar); err != nil {
			return false, err
		}
		_, r, m := optest.ReadyReason(ar.Status.Conditions)
		if ar.Status.Phase != phase || r != string(reason) {
			return false, fmt.Errorf("phase %q reason %q: %s", ar.Status.Phase, r, m)
		}
		return true, nil
	})
	return ar
}

// kubeconfigClient returns a client that uses the kubeconfig in secret.
func kubeconfigClient(t *testing.T, secret *corev1.Secret) client.Client {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[clustersv1alpha1.SecretKeyKubeconfig])
	if err != nil {
		t.Fatalf("kubeconfig of Secret %s: %v", secret.Name, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func getSecret(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := optest.Platform.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatalf("get Secret %s: %v", name, err)
	}
	return s
}

// labelled returns the "<Kind> <namespace>/<name>" of every object of the
// target cluster labelled with the request's UID.
func labelled(t *testing.T, uid string) []string {
	t.Helper()
	var out []string
	lists := map[string]client.ObjectList{
		"ServiceAccount": &corev1.ServiceAccountList{}, "Role": &rbacv1.RoleList{}, "ClusterRole": &rbacv1.ClusterRoleList{},
		"RoleBinding": &rbacv1.RoleBindingList{}, "ClusterRoleBinding": &rbacv1.ClusterRoleBindingList{},
	}
	for kind, list := range lists {
		if err := optest.Target.Client.List(t.Context(), list, client.MatchingLabels{access.RequestUIDLabel: uid}); err != nil {
			t.Fatal(err)
		}
		items, _ := apimeta.ExtractList(list)
		for _, item := range items {
			o := item.(client.Object)
			out = append(out, fmt.Sprintf("%s %s/%s", kind, o.GetNamespace(), o.GetName()))
		}
	}
	slices.Sort(out)
	return out
}

// TestTokenAccessExactRules grants a token for get,list on configmaps in
// team-a, list on namespaces, and the existing ClusterRole pod-lister, and
// checks with the issued kubeconfig that exactly this is allowed. Then it
// refreshes a due token, drops the roleRef (its binding goes) and deletes
// the request: the old token is rejected and nothing is left behind.
func TestTokenAccessExactRules(t *testing.T) {
	t.Parallel()
	optest.StartEnv(t)
	ctx := t.Context()
	ns := optest.NewNamespace(t, "ar-exact")
	startControllers(t, ns, "ar-exact")
	optest.RegisterCluster(t, ns, "target", optest.Target.Kubeconfig, clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeWorkload)
	podLister := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-lister"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}},
	}
	if err := optest.Target.Client.Create(ctx, podLister); err != nil {
		t.Fatal(err)
	}

	ar := createAccessRequest(t, &clustersv1alpha1.AccessRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "exact", Namespace: ns},
		Spec: clustersv1alpha1.AccessRequestSpec{
			ClusterRef: &common.ObjectReference{Name: "target", Namespace: ns},
			TTL:        common.DurationOf(time.Hour),
			Token: &clustersv1alpha1.TokenConfig{
				Permissions: []clustersv1alpha1.PermissionsRequest{
					{Namespace: "team-a", Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}},
					{Name: "namespace-lister", Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}}},
				},
				RoleRefs: []common.RoleRef{{Kind: common.RoleKindClusterRole, Name: "pod-lister"}},
			},
		},
	})
	start := time.Now()
	got := waitAccess(t, ns, "exact", clustersv1alpha1.RequestGranted, access.ReasonGranted)
	if diff := cmp.Diff(&common.ObjectReference{Name: "exact.kubeconfig", Namespace: ns}, got.Status.SecretRef); diff != "" {
		t.Fatalf("status.secretRef (-want +got):\n%s", diff)
	}
	if got.Status.ObservedGeneration != got.Generation {
		t.Errorf("observedGeneration %d, want %d", got.Status.ObservedGeneration, got.Generation)
	}
	secret := getSecret(t, ns, "exact.kubeconfig")
	var keys []string
	for k := range secret.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if diff := cmp.Diff([]string{"ca.crt", "creationTimestamp", "expirationTimestamp", "host", "kubeconfig", "token"}, keys); diff != "" {
		t.Errorf("Secret keys (-want +got):\n%s", diff)
	}
	created, _ := strconv.ParseInt(string(secret.Data["creationTimestamp"]), 10, 64)
	expires, _ := strconv.ParseInt(string(secret.Data["expirationTimestamp"]), 10, 64)
	if d := time.Unix(expires, 0).Sub(start); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("token expires %s after the request, want about the TTL of 1h", d)
	}
	if c := time.Unix(created, 0); c.Before(start.Add(-2*time.Second)) || c.After(time.Now().Add(time.Second)) {
		t.Errorf("creationTimestamp %s is not the time of issue", c)
	}
	if string(secret.Data["host"]) != strings.TrimSuffix(optest.Target.Config.Host, "/") {
		t.Errorf("host %q, want %q", secret.Data["host"], optest.Target.Config.Host)
	}

	// Fixtures the admin creates once access exists (team-a was created by
	// the controller).
	if err := optest.Target.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "team-a"}}); err != nil {
		t.Fatalf("create configmap in team-a (the controller should have created the namespace): %v", err)
	}
	user := kubeconfigClient(t, secret)
	checks := map[string]struct {
		do      func(context.Context, client.Client) error
		allowed bool
	}{
		"ListConfigMapsTeamA": {func(ctx context.Context, c client.Client) error {
			return c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("team-a"))
		}, true},
		"GetConfigMapTeamA": {func(ctx context.Context, c client.Client) error {
			return c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "cm"}, &corev1.ConfigMap{})
		}, true},
		"ListNamespaces": {func(ctx context.Context, c client.Client) error { return c.List(ctx, &corev1.NamespaceList{}) }, true},
		"ListPodsViaRoleRef": {func(ctx context.Context, c client.Client) error {
			return c.List(ctx, &corev1.PodList{}, client.InNamespace("default"))
		}, true},
		"CreateConfigMapTeamA": {func(ctx context.Context, c client.Client) error {
			return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: "team-a"}})
		}, false},
		"GetSecretTeamA": {func(ctx context.Context, c client.Client) error {
			return c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "x"}, &corev1.Secret{})
		}, false},
		"ListConfigMapsDefault": {func(ctx context.Context, c client.Client) error {
			return c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("default"))
		}, false},
		"ListConfigMapsAll": {func(ctx context.Context, c client.Client) error { return c.List(ctx, &corev1.ConfigMapList{}) }, false},
		"GetNamespace": {func(ctx context.Context, c client.Client) error {
			return c.Get(ctx, client.ObjectKey{Name: "team-a"}, &corev1.Namespace{})
		}, false},
		"DeleteNamespace": {func(ctx context.Context, c client.Client) error {
			return c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}})
		}, false},
		"GetPod": {func(ctx context.Context, c client.Client) error {
			return c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "p"}, &corev1.Pod{})
		}, false},
		"ListClusterRoles": {func(ctx context.Context, c client.Client) error { return c.List(ctx, &rbacv1.ClusterRoleList{}) }, false},
	}
	for name, check := range checks {
		t.Run(name, func(t *testing.T) {
			err := check.do(ctx, user)
			switch {
			case check.allowed && err != nil:
				t.Errorf("allowed call failed: %v", err)
			case !check.allowed && !apierrors.IsForbidden(err):
				t.Errorf("got %v, want Forbidden", err)
			}
		})
	}

	// Least privilege: nothing the controller created binds cluster-admin
	// (the request did not ask for it), and everything carries the labels.
	// Other tests share the target, so only this request's bindings count.
	crbs := &rbacv1.ClusterRoleBindingList{}
	if err := optest.Target.Client.List(ctx, crbs, client.MatchingLabels{providerv1alpha1.ManagedByLabel: access.ManagedByValue, access.RequestUIDLabel: string(ar.UID)}); err != nil {
		t.Fatal(err)
	}
	if len(crbs.Items) != 2 {
		t.Errorf("%d managed ClusterRoleBindings, want 2 (namespace-lister, pod-lister)", len(crbs.Items))
	}
	for _, b := range crbs.Items {
		if b.RoleRef.Name == "cluster-admin" {
			t.Errorf("ClusterRoleBinding %s binds cluster-admin", b.Name)
		}
	}
	sa := access.ServiceAccountName(ar)
	wantObjects := []string{
		"ClusterRole /namespace-lister",
		"ClusterRoleBinding /" + sa + "-p1",
		"ClusterRoleBinding /" + sa + "-r0",
		"Role team-a/" + sa + "-p0",
		"RoleBinding team-a/" + sa + "-p0",
		"ServiceAccount " + access.AccessNamespace + "/" + sa,
	}
	if diff := cmp.Diff(wantObjects, labelled(t, string(ar.UID))); diff != "" {
		t.Errorf("objects on the target (-want +got):\n%s", diff)
	}

	t.Run("RefreshDueToken", func(t *testing.T) {
		// Make the token look 90 % through its life: the Secret watch
		// brings the request back and a new token is minted.
		s := getSecret(t, ns, "exact.kubeconfig")
		old := string(s.Data["token"])
		now := time.Now().Unix()
		s.Data["creationTimestamp"] = []byte(strconv.FormatInt(now-900, 10))
		s.Data["expirationTimestamp"] = []byte(strconv.FormatInt(now+100, 10))
		if err := optest.Platform.Client.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
		optest.Eventually(t, 30*time.Second, "a new token", func(ctx context.Context) (bool, error) {
			s := &corev1.Secret{}
			if err := optest.Platform.Client.Get(ctx, client.ObjectKeyFromObject(secret), s); err != nil {
				return false, err
			}
			exp, _ := strconv.ParseInt(string(s.Data["expirationTimestamp"]), 10, 64)
			return string(s.Data["token"]) != old && exp > now+50*60, nil
		})
		user = kubeconfigClient(t, getSecret(t, ns, "exact.kubeconfig"))
		if err := user.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("team-a")); err != nil {
			t.Errorf("the refreshed token does not work: %v", err)
		}
	})

	t.Run("DropRoleRef", func(t *testing.T) {
		cur := &clustersv1alpha1.AccessRequest{}
		if err := optest.Platform.Client.Get(ctx, client.ObjectKeyFromObject(ar), cur); err != nil {
			t.Fatal(err)
		}
		cur.Spec.Token.RoleRefs = nil
		if err := optest.Platform.Client.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
		optest.Eventually(t, 30*time.Second, "listing pods is forbidden", func(ctx context.Context) (bool, error) {
			return apierrors.IsForbidden(user.List(ctx, &corev1.PodList{}, client.InNamespace("default"))), nil
		})
		if slices.Contains(labelled(t, string(ar.UID)), "ClusterRoleBinding /"+sa+"-r0") {
			t.Errorf("the binding of the removed roleRef is still there")
		}
	})

	t.Run("DeleteRevokes", func(t *testing.T) {
		if err := optest.Platform.Client.Delete(ctx, ar); err != nil {
			t.Fatal(err)
		}
		optest.Eventually(t, 30*time.Second, "AccessRequest gone", func(ctx context.Context) (bool, error) {
			return apierrors.IsNotFound(optest.Platform.Client.Get(ctx, client.ObjectKeyFromObject(ar), &clustersv1alpha1.AccessRequest{})), nil
		})
		// The bindings are gone at once (Forbidden); the API server caches
		// successful token authentications for 10 s, after which the token
		// of the deleted ServiceAccount is rejected outright.
		optest.Eventually(t, 30*time.Second, "the revoked token is Unauthorized", func(ctx context.Context) (bool, error) {
			err := user.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("team-a"))
			if err == nil {
				return false, fmt.Errorf("the revoked token still lists configmaps")
			}
			if !apierrors.IsUnauthorized(err) {
				return false, err
			}
			return true, nil
		})
		if left := labelled(t, string(ar.UID)); len(left) != 0 {
			t.Errorf("left on the target: %v", left)
		}
		if err := optest.Platform.Client.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("kubeconfig Secret: got %v, want NotFound", err)
		}
		if err := optest.Target.Client.Get(ctx, client.ObjectKeyFromObject(podLister), &rbacv1.ClusterRole{}); err != nil {
			t.Errorf("the pre-existing ClusterRole named by a roleRef must stay: %v", err)
		}
	})
}

// tokenRequest returns a token AccessRequest for list on configmaps in
// namespace team-b.
func tokenRequest(ns, name string) *clustersv1alpha1.AccessRequest {
	return &clustersv1alpha1.AccessRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: clustersv1alpha1.AccessRequestSpec{
			Token: &clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{
				{Namespace: "team-b", Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}}},
			}},
		},
	}
}

// TestRequestRef plays the scheduler: the AccessRequest waits while its
// ClusterRequest is missing or pending, is denied while it is denied, and
// proceeds as soon as it is granted.
func TestRequestRef(t *testing.T) {
	t.Parallel()
	optest.StartEnv(t)
	ctx := t.Context()
	ns := optest.NewNamespace(t, "ar-ref")
	startControllers(t, ns, "ar-ref")
	optest.RegisterCluster(t, ns, "mcp-cluster", optest.Target.Kubeconfig, clustersv1alpha1.TenancyExclusive, clustersv1alpha1.PurposeMCP)

	ar := tokenRequest(ns, "via-request")
	ar.Spec.RequestRef = &common.ObjectReference{Name: "mcp", Namespace: ns}
	createAccessRequest(t, ar)
	waitAccess(t, ns, "via-request", clustersv1alpha1.RequestPending, access.ReasonClusterRequestNotFound)

	cr := &clustersv1alpha1.ClusterRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "mcp", Namespace: ns},
		Spec:       clustersv1alpha1.ClusterRequestSpec{Purpose: clustersv1alpha1.PurposeMCP},
	}
	if err := optest.Platform.Client.Create(ctx, cr); err != nil {
		t.Fatal(err)
	}
	waitAccess(t, ns, "via-request", clustersv1alpha1.RequestPending, access.ReasonClusterRequestPending)
	if cur := getAccess(t, ns, "via-request"); slices.Contains(cur.Finalizers, access.Finalizer) {
		t.Errorf("a pending request got the finalizer before anything was created for it")
	}

	cr.Status.Phase = clustersv1alpha1.RequestDenied
	cr.Status.Conditions = []metav1.Condition{{Type: common.ConditionTypeReady, Status: metav1.ConditionFalse,
		Reason: "NoMatchingCluster", Message: "nothing free", LastTransitionTime: metav1.Now()}}
	if err := optest.Platform.Client.Status().Update(ctx, cr); err != nil {
		t.Fatal(err)
	}
	denied := waitAccess(t, ns, "via-request", clustersv1alpha1.RequestDenied, access.ReasonClusterRequestDenied)
	if _, _, msg := optest.ReadyReason(denied.Status.Conditions); !strings.Contains(msg, "nothing free") {
		t.Errorf("message %q does not pass on why the ClusterRequest was denied", msg)
	}

	cr.Status.Phase = clustersv1alpha1.RequestGranted
	cr.Status.Cluster = &common.ObjectReference{Name: "mcp-cluster", Namespace: ns}
	cr.Status.Conditions[0].Status, cr.Status.Conditions[0].Reason = metav1.ConditionTrue, "Granted"
	if err := optest.Platform.Client.Status().Update(ctx, cr); err != nil {
		t.Fatal(err)
	}
	granted := waitAccess(t, ns, "via-request", clustersv1alpha1.RequestGranted, access.ReasonGranted)
	if got := granted.Annotations[access.TargetClusterAnnotation]; got != ns+"/mcp-cluster" {
		t.Errorf("annotation %s = %q, want %s/mcp-cluster", access.TargetClusterAnnotation, got, ns)
	}
	user := kubeconfigClient(t, getSecret(t, ns, granted.Status.SecretRef.Name))
	if err := user.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("team-b")); err != nil {
		t.Errorf("the granted kubeconfig does not work: %v", err)
	}

	// The ClusterRequest goes first (as when a ManagedControlPlane is
	// deleted): the request still knows its cluster and revokes there.
	if err := optest.Platform.Client.Delete(ctx, cr); err != nil {
		t.Fatal(err)
	}
	if err := optest.Platform.Client.Delete(ctx, granted); err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, 30*time.Second, "AccessRequest gone", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(optest.Platform.Client.Get(ctx, client.ObjectKeyFromObject(granted), &clustersv1alpha1.AccessRequest{})), nil
	})
	if left := labelled(t, string(granted.UID)); len(left) != 0 {
		t.Errorf("left on the target: %v", left)
	}
}

func getAccess(t *testing.T, ns, name string) *clustersv1alpha1.AccessRequest {
	t.Helper()
	ar := &clustersv1alpha1.AccessRequest{}
	if err := optest.Platform.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, ar); err != nil {
		t.Fatal(err)
	}
	return ar
}

// TestUnusableRequestsDoNotLoop covers requests that cannot be granted: a
// Cluster whose kubeconfig Secret is missing, an unreachable Cluster, an
// OIDC request. Each gets its reason, none gets a finalizer, and over ten
// seconds they are reconciled only a few times. Creating the missing
// Secret then grants that request without further ado.
func TestUnusableRequestsDoNotLoop(t *testing.T) {
	t.Parallel()
	optest.StartEnv(t)
	ns := optest.NewNamespace(t, "ar-bad")
	const name = "ar-bad"
	startControllers(t, ns, name)
	optest.RegisterCluster(t, ns, "missing", nil, clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeWorkload)
	optest.RegisterCluster(t, ns, "unreachable", optest.UnreachableKubeconfig(t), clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeWorkload)

	for _, c := range []string{"missing", "unreachable"} {
		ar := tokenRequest(ns, c)
		ar.Spec.ClusterRef = &common.ObjectReference{Name: c, Namespace: ns}
		createAccessRequest(t, ar)
	}
	oidc := &clustersv1alpha1.AccessRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "oidc", Namespace: ns},
		Spec: clustersv1alpha1.AccessRequestSpec{
			ClusterRef: &common.ObjectReference{Name: "missing", Namespace: ns},
			OIDC: &clustersv1alpha1.OIDCConfig{OIDCProviderConfig: common.OIDCProviderConfig{
				Name: "idp", Issuer: "https://idp.example", ClientID: "marketplane",
				RoleBindings: []common.RoleBindings{{
					Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}},
					RoleRefs: []common.RoleRef{{Kind: common.RoleKindClusterRole, Name: "view"}},
				}},
			}},
		},
	}
	createAccessRequest(t, oidc)

	for _, w := range []struct {
		name, phase string
		reason      access.Reason
	}{
		{"missing", clustersv1alpha1.RequestPending, access.ReasonKubeconfigMissing},
		{"unreachable", clustersv1alpha1.RequestPending, access.ReasonUnreachable},
		{"oidc", clustersv1alpha1.RequestDenied, access.ReasonOIDCNotSupported},
	} {
		ar := waitAccessReason(t, ns, w.name, w.reason)
		if w.phase != "" && ar.Status.Phase != w.phase {
			t.Errorf("%s: phase %q, want %q", w.name, ar.Status.Phase, w.phase)
		}
		if slices.Contains(ar.Finalizers, access.Finalizer) {
			t.Errorf("%s: got the finalizer although nothing was created for it", w.name)
		}
	}

	// The unreachable one is retried at 5 s, 10 s, 20 s, …; the others only
	// when something they watch changes.
	const window, limit = 10 * time.Second, 6
	start := testenv.ReconcileCount(t, name)
	optest.Consistently(t, window, "reconciles of requests that cannot be granted", func() error {
		if n := testenv.ReconcileCount(t, name) - start; n > limit {
			return fmt.Errorf("%v reconciles in less than %s, want at most %d", n, window, limit)
		}
		return nil
	})
	t.Logf("%v reconciles of 3 requests in %s", testenv.ReconcileCount(t, name)-start, window)

	optest.WriteKubeconfigSecret(t, ns, "missing-kubeconfig", optest.Target.Kubeconfig)
	waitAccess(t, ns, "missing", clustersv1alpha1.RequestGranted, access.ReasonGranted)
	// OIDC stays refused whatever the cluster does.
	if _, reason, _ := optest.ReadyReason(getAccess(t, ns, "oidc").Status.Conditions); reason != string(access.ReasonOIDCNotSupported) {
		t.Errorf("oidc: reason %q, want %s", reason, access.ReasonOIDCNotSupported)
	}
}

// waitAccessReason waits until the request's Ready condition is False with
// reason.
func waitAccessReason(t *testing.T, ns, name string, reason access.Reason) *clustersv1alpha1.AccessRequest {
	t.Helper()
	ar := &clustersv1alpha1.AccessRequest{}
	optest.Eventually(t, 30*time.Second, fmt.Sprintf("AccessRequest %s Ready=False/%s", name, reason), func(ctx context.Context) (bool, error) {
		if err := optest.Platform.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ar); err != nil {
			return false, err
		}
		s, r, m := optest.ReadyReason(ar.Status.Conditions)
		if s != metav1.ConditionFalse || r != string(reason) {
			return false, fmt.Errorf("Ready=%s/%s: %s", s, r, m)
		}
		return true, nil
	})
	return ar
}

// TestNamespaceCreationDisabled: a permission in a namespace that does not
// exist, with disableAutomaticNamespaceCreation, waits with a reason until
// the namespace appears; a role name taken by someone else denies the
// request.
func TestNamespaceCreationDisabled(t *testing.T) {
	t.Parallel()
	optest.StartEnv(t)
	ctx := t.Context()
	ns := optest.NewNamespace(t, "ar-nsdisabled")
	startControllers(t, ns, "ar-nsdisabled", access.WithRetryBackoff(clusters.Backoff{Min: 500 * time.Millisecond, Max: time.Second}))
	optest.RegisterCluster(t, ns, "target", optest.Target.Kubeconfig, clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeWorkload)

	ar := tokenRequest(ns, "later")
	ar.Spec.ClusterRef = &common.ObjectReference{Name: "target", Namespace: ns}
	ar.Spec.Token.Permissions[0].Namespace = "created-later"
	ar.Spec.Token.Permissions[0].DisableAutomaticNamespaceCreation = true
	createAccessRequest(t, ar)
	waitAccessReason(t, ns, "later", access.ReasonNamespaceMissing)
	if err := optest.Target.Client.Get(ctx, client.ObjectKey{Name: "created-later"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace created-later: got %v, want NotFound (creation was disabled)", err)
	}
	if err := optest.Target.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "created-later"}}); err != nil {
		t.Fatal(err)
	}
	waitAccess(t, ns, "later", clustersv1alpha1.RequestGranted, access.ReasonGranted)

	// A ClusterRole of the requested name exists and is not ours.
	if err := optest.Target.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"}}); err != nil {
		t.Fatal(err)
	}
	taken := tokenRequest(ns, "taken")
	taken.Spec.ClusterRef = &common.ObjectReference{Name: "target", Namespace: ns}
	taken.Spec.Token.Permissions[0] = clustersv1alpha1.PermissionsRequest{Name: "someone-elses",
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"*"}}}}
	createAccessRequest(t, taken)
	waitAccess(t, ns, "taken", clustersv1alpha1.RequestDenied, access.ReasonRoleConflict)
	cr := &rbacv1.ClusterRole{}
	if err := optest.Target.Client.Get(ctx, client.ObjectKey{Name: "someone-elses"}, cr); err != nil {
		t.Fatal(err)
	}
	if len(cr.Rules) != 0 {
		t.Errorf("the foreign ClusterRole was changed: %v", cr.Rules)
	}
}
