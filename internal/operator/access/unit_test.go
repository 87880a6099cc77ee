package access

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
)

func TestDesiredObjects(t *testing.T) {
	rule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}
	ar := &clustersv1alpha1.AccessRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "uid-1"},
		Spec: clustersv1alpha1.AccessRequestSpec{Token: &clustersv1alpha1.TokenConfig{
			Permissions: []clustersv1alpha1.PermissionsRequest{
				{Namespace: "a", Rules: []rbacv1.PolicyRule{rule}},
				{Name: "named", Rules: []rbacv1.PolicyRule{rule}},
				{Namespace: "b", DisableAutomaticNamespaceCreation: true, Rules: []rbacv1.PolicyRule{rule}},
				{Namespace: "a", DisableAutomaticNamespaceCreation: true, Rules: []rbacv1.PolicyRule{rule}},
			},
			RoleRefs: []common.RoleRef{
				{Kind: common.RoleKindClusterRole, Name: "view"},
				{Kind: common.RoleKindRole, Name: "leader", Namespace: "c"},
			},
		}},
	}
	sa := ServiceAccountNameFor(ar, "sp-x")
	got := desiredObjects(ar, "access", ownership{owner: "sp-x"})

	type ref struct{ Kind, Namespace, Name, RoleRef string }
	var refs []ref
	for _, r := range got.roles {
		refs = append(refs, ref{"Role", r.Namespace, r.Name, ""})
	}
	for _, r := range got.clusterRoles {
		refs = append(refs, ref{"ClusterRole", "", r.Name, ""})
	}
	for _, b := range got.roleBindings {
		refs = append(refs, ref{"RoleBinding", b.Namespace, b.Name, b.RoleRef.Kind + "/" + b.RoleRef.Name})
	}
	for _, b := range got.clusterRoleBindings {
		refs = append(refs, ref{"ClusterRoleBinding", "", b.Name, b.RoleRef.Kind + "/" + b.RoleRef.Name})
	}
	want := []ref{
		{"Role", "a", sa + "-p0", ""},
		{"Role", "b", sa + "-p2", ""},
		{"Role", "a", sa + "-p3", ""},
		{"ClusterRole", "", "named", ""},
		{"RoleBinding", "a", sa + "-p0", "Role/" + sa + "-p0"},
		{"RoleBinding", "b", sa + "-p2", "Role/" + sa + "-p2"},
		{"RoleBinding", "a", sa + "-p3", "Role/" + sa + "-p3"},
		{"RoleBinding", "c", sa + "-r1", "Role/leader"},
		{"ClusterRoleBinding", "", sa + "-p1", "ClusterRole/named"},
		{"ClusterRoleBinding", "", sa + "-r0", "ClusterRole/view"},
	}
	if diff := cmp.Diff(want, refs); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	// "a" is created for permissions[0], so permissions[3] need not wait
	// for it; "b" and the roleRef's "c" must exist.
	if diff := cmp.Diff([]string{"a"}, got.createNamespaces); diff != "" {
		t.Errorf("namespaces to create (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b", "c"}, got.requireNamespaces); diff != "" {
		t.Errorf("namespaces that must exist (-want +got):\n%s", diff)
	}
	wantSubject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: "access"}}
	for _, o := range got.all() {
		if o.GetLabels()[RequestUIDLabel] != "uid-1" {
			t.Errorf("%s %s lacks the request UID label", o.GetObjectKind(), o.GetName())
		}
	}
	for _, b := range got.clusterRoleBindings {
		if diff := cmp.Diff(wantSubject, b.Subjects); diff != "" {
			t.Errorf("ClusterRoleBinding %s subjects (-want +got):\n%s", b.Name, diff)
		}
	}
}

func TestServiceAccountName(t *testing.T) {
	a := &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{UID: "1"}}
	b := &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{UID: "2"}}
	if ServiceAccountName(a) == ServiceAccountName(b) {
		t.Error("two requests share a ServiceAccount name")
	}
	if n := ServiceAccountName(a); len(n) != 19 || !strings.HasPrefix(n, "ar-") {
		t.Errorf("ServiceAccountName() = %q, want ar- and 16 hex digits", n)
	}
	// A provider's ServiceAccount names the provider after the one "."
	// that the admission policies look for; others have none.
	if got, want := ServiceAccountNameFor(a, "sp-sample"), ServiceAccountName(a)+".sp-sample"; got != want {
		t.Errorf("ServiceAccountNameFor() = %q, want %q", got, want)
	}
	if got := ServiceAccountNameFor(a, ""); strings.Contains(got, ".") {
		t.Errorf("ServiceAccountNameFor(no provider) = %q, want no \".\"", got)
	}
	for _, kind := range []string{"ServiceProvider", "ClusterProvider", "PlatformService"} {
		long := ProviderID(kind, strings.Repeat("a.b", 40))
		if errs := validation.IsDNS1123Label(long); len(errs) != 0 {
			t.Errorf("ProviderID(%s, long name with dots) = %q: %v", kind, long, errs)
		}
	}
	if got := ProviderID("ServiceProvider", "sample"); got != "sp-sample" {
		t.Errorf("ProviderID(ServiceProvider, sample) = %q, want sp-sample", got)
	}
}

func TestSecretName(t *testing.T) {
	short := &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: "velero"}}
	if got := SecretName(short); got != "velero.kubeconfig" {
		t.Errorf("SecretName() = %q, want velero.kubeconfig", got)
	}
	long := &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("x", 250)}}
	if got := SecretName(long); len(got) > 253 || !strings.HasSuffix(got, ".kubeconfig") {
		t.Errorf("SecretName() of a long name = %q (%d characters)", got, len(got))
	}
}

func TestRequestedTTL(t *testing.T) {
	cases := map[string]struct {
		ttl  *common.Duration
		want time.Duration
	}{
		"Unset":     {nil, DefaultTTL},
		"Given":     {common.DurationOf(2 * time.Hour), 2 * time.Hour},
		"BelowMin":  {common.DurationOf(time.Minute), MinTTL},
		"ZeroIsMin": {common.DurationOf(0), MinTTL},
		// Reconcile denies such a request before it asks for a token;
		// requestedTTL must still not invent a lifetime.
		"InvalidIsDefault": {ptr.To(common.Duration("1 fortnight")), DefaultTTL},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ar := &clustersv1alpha1.AccessRequest{Spec: clustersv1alpha1.AccessRequestSpec{TTL: tc.ttl}}
			if got := requestedTTL(ar); got != tc.want {
				t.Errorf("requestedTTL() = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestTokenReuse(t *testing.T) {
	issued := time.Unix(1_000_000, 0)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{UID: "sa-1"}}
	secret := func(mutate func(*corev1.Secret)) *corev1.Secret {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{ServiceAccountUIDAnnotation: "sa-1", TokenTTLAnnotation: "1h0m0s"}},
			Data: map[string][]byte{
				clustersv1alpha1.SecretKeyToken:               []byte("t"),
				clustersv1alpha1.SecretKeyCreationTimestamp:   []byte(strconv.FormatInt(issued.Unix(), 10)),
				clustersv1alpha1.SecretKeyExpirationTimestamp: []byte(strconv.FormatInt(issued.Add(time.Hour).Unix(), 10)),
			},
		}
		if mutate != nil {
			mutate(s)
		}
		return s
	}
	cases := map[string]struct {
		reason string
		secret *corev1.Secret
		now    time.Time
		want   bool
	}{
		"Fresh":        {"a token at 50 % of its life stays", secret(nil), issued.Add(30 * time.Minute), true},
		"Due":          {"a token past 80 % of its life is replaced", secret(nil), issued.Add(49 * time.Minute), false},
		"NewSA":        {"a token of a recreated ServiceAccount is replaced", secret(func(s *corev1.Secret) { s.Annotations[ServiceAccountUIDAnnotation] = "sa-0" }), issued, false},
		"NewTTL":       {"a token minted for another TTL is replaced", secret(func(s *corev1.Secret) { s.Annotations[TokenTTLAnnotation] = "24h0m0s" }), issued, false},
		"NoToken":      {"a Secret without a token gets one", secret(func(s *corev1.Secret) { delete(s.Data, clustersv1alpha1.SecretKeyToken) }), issued, false},
		"BadTimestamp": {"unreadable timestamps mint anew", secret(func(s *corev1.Secret) { s.Data[clustersv1alpha1.SecretKeyCreationTimestamp] = []byte("x") }), issued, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tok, ok := tokenFromSecret(tc.secret)
			if got := ok && tok.reusable(sa, time.Hour, tc.now); got != tc.want {
				t.Errorf("%s: reusable = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

func TestKubeconfig(t *testing.T) {
	ep := endpoint{clusterName: "target", host: "https://127.0.0.1:6443", ca: []byte("CA")}
	tok := token{value: "tkn", issued: time.Unix(100, 0), expires: time.Unix(200, 0)}
	data, err := secretData(ep, "ar-x", tok)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data[clustersv1alpha1.SecretKeyKubeconfig])
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != ep.host || cfg.BearerToken != "tkn" || string(cfg.CAData) != "CA" {
		t.Errorf("kubeconfig gives host %q token %q CA %q", cfg.Host, cfg.BearerToken, cfg.CAData)
	}
	if got := string(data[clustersv1alpha1.SecretKeyExpirationTimestamp]); got != "200" {
		t.Errorf("expirationTimestamp %q, want Unix seconds 200", got)
	}
	if got := string(data[clustersv1alpha1.SecretKeyCreationTimestamp]); got != "100" {
		t.Errorf("creationTimestamp %q, want Unix seconds 100", got)
	}
}

func TestNamedWorkloads(t *testing.T) {
	rule := func(groups []string, resources ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: []string{"get"}}
	}
	cases := map[string]struct {
		reason string
		rules  []rbacv1.PolicyRule
		want   []string
	}{
		"None":         {reason: "ConfigMaps and CRDs are no workloads", rules: []rbacv1.PolicyRule{rule([]string{""}, "configmaps"), rule([]string{"apiextensions.k8s.io"}, "customresourcedefinitions")}},
		"Star":         {reason: "a \"*\" resource names none", rules: []rbacv1.PolicyRule{rule([]string{"*"}, "*"), rule([]string{"apps"}, "*")}},
		"OtherGroup":   {reason: "deployments of another group are not apps'", rules: []rbacv1.PolicyRule{rule([]string{"example.org"}, "deployments")}},
		"Deployments":  {reason: "apps/deployments", rules: []rbacv1.PolicyRule{rule([]string{"apps"}, "deployments", "configmaps")}, want: []string{"deployments.apps"}},
		"Subresource":  {reason: "a subresource names its resource", rules: []rbacv1.PolicyRule{rule([]string{""}, "pods/exec")}, want: []string{"pods"}},
		"AnyGroup":     {reason: "group \"*\" matches every group", rules: []rbacv1.PolicyRule{rule([]string{"*"}, "jobs", "pods")}, want: []string{"jobs.batch", "pods"}},
		"Deduplicated": {reason: "each once, sorted", rules: []rbacv1.PolicyRule{rule([]string{"batch"}, "cronjobs"), rule([]string{"batch", "apps"}, "cronjobs", "statefulsets", "daemonsets", "replicasets")}, want: []string{"cronjobs.batch", "daemonsets.apps", "replicasets.apps", "statefulsets.apps"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := namedWorkloads(&clustersv1alpha1.TokenConfig{Permissions: []clustersv1alpha1.PermissionsRequest{{Rules: tc.rules}}})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
