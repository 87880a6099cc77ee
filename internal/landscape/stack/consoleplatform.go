package stack

import (
	"context"
	"fmt"
	"os"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
)

// The console's admin way into the platform view. The landscape's
// platform and onboarding clusters have separate token issuers, so no
// onboarding token is an identity on the platform cluster. The landscape
// makes a ServiceAccount on the platform cluster with a read-only role for
// what the platform view shows (not cluster-admin) and writes a token of
// it to ConsolePlatformTokenFile, which an admin pastes into the platform
// view's own sign-in (docs/console.md).
const (
	// ConsolePlatformTokenFile is the file in the state directory holding
	// the platform viewer's token (mode 0600), written anew at each start.
	ConsolePlatformTokenFile = "console-platform.token"
	// ConsolePlatformNamespace and ConsolePlatformAccount are the
	// ServiceAccount of that token on the platform cluster.
	ConsolePlatformNamespace = "marketplane-console"
	ConsolePlatformAccount   = "platform-viewer"
	// consolePlatformRole is its ClusterRole and ClusterRoleBinding.
	consolePlatformRole = "marketplane:console-platform-view"
	// consolePlatformTokenTTL is the token's lifetime; a start writes a
	// new one, `kubectl create token` makes another.
	consolePlatformTokenTTL = 24 * time.Hour
)

// ensureConsolePlatformViewer creates, on the platform cluster c, the
// platform viewer (namespace, ServiceAccount, a ClusterRole that reads
// ServiceProviders and SFClusters, its binding) and writes a token of it
// to path.
func ensureConsolePlatformViewer(ctx context.Context, c client.Client, path string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ConsolePlatformNamespace}}
	if err := ensure(ctx, c, ns, func() {}); err != nil {
		return fmt.Errorf("console platform viewer: %w", err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ConsolePlatformAccount, Namespace: ConsolePlatformNamespace}}
	if err := ensure(ctx, c, sa, func() {}); err != nil {
		return fmt.Errorf("console platform viewer: %w", err)
	}
	read := []string{"get", "list", "watch"}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: consolePlatformRole}}
	if err := ensure(ctx, c, role, func() {
		role.Rules = []rbacv1.PolicyRule{
			{APIGroups: []string{providerv1alpha1.GroupVersion.Group}, Resources: []string{"serviceproviders"}, Verbs: read},
			{APIGroups: []string{resourcev1alpha1.GroupVersion.Group}, Resources: []string{"sfclusters"}, Verbs: read},
		}
	}); err != nil {
		return fmt.Errorf("console platform viewer: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: consolePlatformRole}}
	if err := ensure(ctx, c, binding, func() {
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: consolePlatformRole}
		binding.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ConsolePlatformAccount, Namespace: ConsolePlatformNamespace}}
	}); err != nil {
		return fmt.Errorf("console platform viewer: %w", err)
	}
	ttl := int64(consolePlatformTokenTTL.Seconds())
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return fmt.Errorf("console platform viewer: token of ServiceAccount %s/%s: %w", ConsolePlatformNamespace, ConsolePlatformAccount, err)
	}
	if err := os.WriteFile(path, []byte(tr.Status.Token+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
