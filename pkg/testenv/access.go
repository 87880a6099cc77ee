package testenv

import (
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ServiceAccountToken creates the ServiceAccount namespace/name and returns
// a token the API server issued for it (TokenRequest), for tests of what a
// caller with that identity may do.
func (c *Cluster) ServiceAccountToken(t testing.TB, namespace, name string) string {
	t.Helper()
	ctx := t.Context()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := c.Client.Create(ctx, sa); err != nil {
		t.Fatalf("testenv: create ServiceAccount %s/%s: %v", namespace, name, err)
	}
	tr := &authenticationv1.TokenRequest{}
	if err := c.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatalf("testenv: token for ServiceAccount %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}

// AllowNonResourceURL lets the ServiceAccount namespace/name use verb on
// the non-resource URL path (e.g. get /metrics) through a ClusterRole and
// a ClusterRoleBinding named after the ServiceAccount.
func (c *Cluster) AllowNonResourceURL(t testing.TB, namespace, name, verb, path string) {
	t.Helper()
	ctx := t.Context()
	role := namespace + ":" + name + ":nonresource"
	if err := c.Client.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{path}, Verbs: []string{verb}}},
	}); err != nil {
		t.Fatalf("testenv: create ClusterRole %s: %v", role, err)
	}
	if err := c.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}); err != nil {
		t.Fatalf("testenv: create ClusterRoleBinding %s: %v", role, err)
	}
}

// ActAs returns a client of the cluster that impersonates the
// ServiceAccount namespace/name with the groups the API server gives a
// ServiceAccount, for tests of what that identity may do without issuing
// it a token. The ServiceAccount need not exist: RBAC and admission see the
// same user either way.
func (c *Cluster) ActAs(t testing.TB, namespace, name string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: serviceaccount.MakeUsername(namespace, name),
		Groups:   serviceaccount.MakeGroupNames(namespace),
	}
	cfg.Impersonate.Groups = append(cfg.Impersonate.Groups, "system:authenticated")
	cl, err := client.New(cfg, client.Options{Scheme: c.Scheme})
	if err != nil {
		t.Fatalf("testenv: client acting as %s/%s: %v", namespace, name, err)
	}
	return cl
}
