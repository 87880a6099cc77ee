package stack

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/internal/landscape"
)

// ConsoleURLFile is the file in the state directory that holds the web
// console's URL.
const ConsoleURLFile = "console.url"

// The console's demo tenant on the onboarding cluster: a ServiceAccount
// with the edit ClusterRole in its own namespace, whose token a user pastes
// into the console's sign-in page.
const (
	ConsoleDemoNamespace = "console-demo"
	ConsoleDemoAccount   = "demo"
)

// startConsole starts `marketplane console` for the onboarding cluster on a
// loopback port (recorded in ConsoleURLFile; a new one when a resumed
// landscape finds it taken), creates the demo tenant, and waits until the
// console serves its sign-in page. The console holds no credentials: users
// sign in with their own tokens.
func startConsole(ctx context.Context, l *landscape.Landscape, timeout time.Duration) error {
	consoleURL, err := consoleAddress(l)
	if err != nil {
		return err
	}
	if err := ensureConsoleDemo(ctx, l); err != nil {
		return err
	}
	platformToken := l.Layout.Path(ConsolePlatformTokenFile)
	if err := ensureConsolePlatformViewer(ctx, l.Platform.Client, platformToken); err != nil {
		return err
	}
	u, err := url.Parse(consoleURL)
	if err != nil {
		return fmt.Errorf("console URL %q: %w", consoleURL, err)
	}
	proc, err := l.StartProcess("console", filepath.Join(l.Binaries.Dir, "marketplane"), []string{
		"console",
		"--listen=" + u.Host,
		"--kubeconfig=" + l.Onboarding.KubeconfigPath,
		// Where the platform cluster is, for the platform view; like
		// --kubeconfig, only its address and CA are used.
		"--platform-kubeconfig=" + l.Platform.KubeconfigPath,
	})
	if err != nil {
		return fmt.Errorf("start the console: %w", err)
	}
	if err := l.SetEndpoint("console", consoleURL); err != nil {
		return err
	}
	if err := waitServing(ctx, timeout, "the console's sign-in page", consoleURL+"/login", proc, nil); err != nil {
		return err
	}
	l.AddSummary(
		"Web console: "+consoleURL+" (sign in with a token, e.g. the demo tenant's, whose namespace is "+ConsoleDemoNamespace+")",
		"  kubectl --kubeconfig "+l.Onboarding.KubeconfigPath+" create token "+ConsoleDemoAccount+" -n "+ConsoleDemoNamespace,
		"  platform view: sign in there (Platform page) with the platform cluster's read-only token in "+platformToken,
	)
	return nil
}

// consoleAddress reads ConsoleURLFile, or picks a free port and writes it.
// A recorded port that another process took while the landscape was
// stopped is replaced (keepOrMove).
func consoleAddress(l *landscape.Landscape) (string, error) {
	path := l.Layout.Path(ConsoleURLFile)
	raw, err := os.ReadFile(path)
	var consoleURL string
	switch {
	case err == nil:
		recorded := strings.TrimSpace(string(raw))
		if consoleURL, err = keepOrMove(l, "console", recorded, path, ""); err != nil || consoleURL == recorded {
			return consoleURL, err
		}
	case errors.Is(err, os.ErrNotExist):
		if consoleURL, err = loopbackURL(); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if err := os.WriteFile(path, []byte(consoleURL+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return consoleURL, nil
}

// ensureConsoleDemo creates the demo tenant on the onboarding cluster: the
// namespace ConsoleDemoNamespace, the ServiceAccount ConsoleDemoAccount in
// it and a RoleBinding to the edit ClusterRole there. It may order and
// bind services in its namespace and read the catalog; nothing else.
func ensureConsoleDemo(ctx context.Context, l *landscape.Landscape) error {
	c := l.Onboarding.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ConsoleDemoNamespace}}
	if err := ensure(ctx, c, ns, func() {}); err != nil {
		return fmt.Errorf("console demo tenant: %w", err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ConsoleDemoAccount, Namespace: ConsoleDemoNamespace}}
	if err := ensure(ctx, c, sa, func() {}); err != nil {
		return fmt.Errorf("console demo tenant: %w", err)
	}
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: ConsoleDemoAccount, Namespace: ConsoleDemoNamespace}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ConsoleDemoAccount + "-edit", Namespace: ConsoleDemoNamespace}}
	if err := ensure(ctx, c, binding, func() {
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}
		binding.Subjects = []rbacv1.Subject{subject}
	}); err != nil {
		return fmt.Errorf("console demo tenant: %w", err)
	}
	// edit covers the built-in kinds only: the service kinds come with
	// their CRDs, and no provider aggregates them into edit.
	name := ConsoleDemoAccount + "-services"
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ConsoleDemoNamespace}}
	if err := ensure(ctx, c, role, func() {
		role.Rules = []rbacv1.PolicyRule{
			{APIGroups: []string{"osb.servicefabrik.io"}, Resources: []string{"sfserviceinstances", "sfservicebindings"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"core.openmcp.cloud"}, Resources: []string{"managedcontrolplanes"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"sample.services.openmcp.cloud"}, Resources: []string{"samples"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		}
	}); err != nil {
		return fmt.Errorf("console demo tenant: %w", err)
	}
	services := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ConsoleDemoNamespace}}
	if err := ensure(ctx, c, services, func() {
		services.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}
		services.Subjects = []rbacv1.Subject{subject}
	}); err != nil {
		return fmt.Errorf("console demo tenant: %w", err)
	}
	return nil
}
