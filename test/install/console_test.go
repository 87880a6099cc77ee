package install

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/charts"
	"github.com/marketplane/marketplane/internal/console"
	"github.com/marketplane/marketplane/internal/marketplace"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// cliPackage is the main package of the marketplane CLI, whose image
// (Dockerfile target marketplane) the chart's console Deployment runs.
const cliPackage = "github.com/marketplane/marketplane/cmd/marketplane"

// Where the chart's console Deployment mounts the files it names in its
// args, and the in-cluster address of the API server it uses when the
// install cluster is the onboarding cluster.
const (
	consoleCAFile          = "/etc/marketplane/onboarding-ca/ca.crt"
	consoleKubeconfigDir   = "/etc/marketplane/onboarding/"
	inClusterServer        = "https://kubernetes.default.svc"
	consoleOffering        = "install-console-cache"
	consoleServiceID       = "5f0c6a2e-8d7c-4f43-9a57-1d4c0a5e6b01"
	consolePlanID          = "5f0c6a2e-8d7c-4f43-9a57-1d4c0a5e6b02"
	consoleTenantNamespace = "console-tenant-a"
	consoleOtherNamespace  = "console-tenant-b"
)

// TestConsoleInCluster runs `marketplane console` with the arguments of the
// chart's console Deployment, as its pod would run it (no ServiceAccount
// token: the pod mounts none), against a real API server, for the default
// values (the install cluster is the onboarding cluster) and for
// onboarding.kubeconfigSecret. A tenant, a ServiceAccount bound to `view`
// in its namespace, signs in with a token of its own (TokenRequest) and
// sees the offerings and its namespace's instances, and is refused another
// namespace's; a bad token gets no session.
//
// What differs from a pod, and only that: the listen port is a free one
// (the chart's is the pod's own); the files the pod mounts (the ConfigMap
// kube-root-ca.crt's ca.crt, the onboarding kubeconfig Secret's key) are
// temporary files with the same content the cluster would put there (the
// API server's CA; a kubeconfig of the API server, here the admin's, whose
// credentials the console must ignore); and --server's in-cluster address
// (the kubernetes Service) is the API server's address as this machine
// reaches it.
func TestConsoleInCluster(t *testing.T) {
	testenv.SkipIfShort(t)
	dir := t.TempDir()
	testenv.BuildBinaries(t, dir, cliPackage)
	binary := filepath.Join(dir, "marketplane")
	// The aggregation controller fills `view` with the tenant kinds, as in
	// a real cluster.
	c := testenv.Start(t, testenv.WithName("install-console"), testenv.WithControllerManager("clusterrole-aggregation"))
	tenantToken := setupConsoleTenant(t, c)

	for _, tc := range []struct {
		name   string
		values map[string]any
		files  func(t *testing.T, args []string) []string
	}{
		{
			name: "InstallClusterIsOnboarding", values: nil,
			files: func(t *testing.T, args []string) []string {
				t.Helper()
				if !slices.Contains(args, "--server="+inClusterServer) || !slices.Contains(args, "--certificate-authority="+consoleCAFile) {
					t.Fatalf("the console's args %q do not name the in-cluster API server and the kube-root-ca.crt mount", args)
				}
				ca := filepath.Join(t.TempDir(), "ca.crt")
				if err := os.WriteFile(ca, c.Config.CAData, 0o600); err != nil {
					t.Fatal(err)
				}
				return replaceArgs(t, args, map[string]string{
					"--server=" + inClusterServer:              "--server=" + c.Config.Host,
					"--certificate-authority=" + consoleCAFile: "--certificate-authority=" + ca,
				})
			},
		},
		{
			name:   "OnboardingKubeconfigSecret",
			values: map[string]any{"onboarding": map[string]any{"kubeconfigSecret": map[string]any{"name": "onboarding", "key": "kubeconfig"}}},
			files: func(t *testing.T, args []string) []string {
				t.Helper()
				want := "--kubeconfig=" + consoleKubeconfigDir + "kubeconfig"
				if !slices.Contains(args, want) {
					t.Fatalf("the console's args %q lack %s", args, want)
				}
				admin, err := c.KubeconfigPath()
				if err != nil {
					t.Fatal(err)
				}
				data, err := os.ReadFile(admin)
				if err != nil {
					t.Fatal(err)
				}
				kc := filepath.Join(t.TempDir(), "kubeconfig")
				if err := os.WriteFile(kc, data, 0o600); err != nil {
					t.Fatal(err)
				}
				return replaceArgs(t, args, map[string]string{want: "--kubeconfig=" + kc})
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := charts.Render(charts.WithExampleRegistry(tc.values))
			if err != nil {
				t.Fatalf("render the chart: %v", err)
			}
			dep, container := consoleDeployment(t, objs)
			if a := dep.Spec.Template.Spec.AutomountServiceAccountToken; a == nil || *a {
				t.Fatalf("the console pod does not refuse a ServiceAccount token itself (automountServiceAccountToken %v, want false)", a)
			}
			args := tc.files(t, container.Args)
			args, port := consoleListenPort(t, args)
			for _, a := range args {
				if strings.Contains(a, "/etc/") {
					t.Fatalf("arg %q names a file of the pod the test does not provide", a)
				}
			}
			out := &testenv.SyncBuffer{}
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("console output ends:\n%s", tail(out.String(), 8000))
				}
			})
			env := podEnvOf(t, c, container, dep.Namespace, dep.Name+"-pod", dep.Spec.Template.Spec.ServiceAccountName, "console")
			// No token and no CA file: the pod has none (automount false).
			proc := startPodProcess(t, binary, args, env, podCredentials{Namespace: dep.Namespace}, out)
			base := "http://127.0.0.1:" + port
			consoleSignIn(t, base, container.ReadinessProbe, tenantToken, func(t *testing.T) {
				t.Helper()
				if done, err := proc.exited(); done {
					t.Fatalf("the console exited: %v", err)
				}
			})
		})
	}
}

// setupConsoleTenant creates what the marketplace and a platform give
// tenants on the onboarding cluster: the Offering viewer RBAC, tenant kinds
// aggregated to `view`, one Offering; two tenant namespaces with an
// SFServiceInstance each; and a ServiceAccount bound to `view` in the first.
// It returns that ServiceAccount's token.
func setupConsoleTenant(t *testing.T, c *testenv.Cluster) string {
	t.Helper()
	ctx := t.Context()
	objs := []client.Object{
		marketplace.ViewerRole(), marketplace.ViewerBinding(),
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "install-console:tenant-kinds", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
			Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{osbv1alpha1.GroupVersion.Group}, Resources: []string{"sfserviceinstances", "sfservicebindings"},
				Verbs: []string{"get", "list", "watch"},
			}},
		},
		&marketplacev1alpha1.Offering{
			ObjectMeta: metav1.ObjectMeta{Name: consoleOffering},
			Spec: marketplacev1alpha1.OfferingSpec{
				Source:      marketplacev1alpha1.Source{Kind: marketplacev1alpha1.SourceSFService, Name: "cache", Namespace: "interoperator"},
				DisplayName: "Install test cache", Description: "The offering of test/install's console test", Ready: true,
				ServiceID: consoleServiceID, Bindable: true,
				Plans: []marketplacev1alpha1.Plan{{ID: consolePlanID, Name: "small", Free: true, Bindable: true}},
			},
		},
	}
	for _, ns := range []string{consoleTenantNamespace, consoleOtherNamespace} {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&osbv1alpha1.SFServiceInstance{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ns + "-cache"},
				Spec:       osbv1alpha1.SFServiceInstanceSpec{ServiceID: consoleServiceID, PlanID: consolePlanID, Parameters: &runtime.RawExtension{Raw: []byte(`{}`)}},
			})
	}
	objs = append(objs, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: consoleTenantNamespace, Name: "alice-view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: consoleTenantNamespace, Name: "alice"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
	})
	for _, o := range objs {
		if err := c.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, client.ObjectKeyFromObject(o), err)
		}
	}
	eventually(t, "`view` to aggregate the tenant kinds", func(ctx context.Context) (bool, string, error) {
		view := &rbacv1.ClusterRole{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: "view"}, view); err != nil {
			return false, err.Error(), nil
		}
		for _, r := range view.Rules {
			if slices.Contains(r.Resources, "sfserviceinstances") {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d rules without sfserviceinstances", len(view.Rules)), nil
	})
	return c.ServiceAccountToken(t, consoleTenantNamespace, "alice")
}

// consoleDeployment returns the chart's console Deployment and container.
func consoleDeployment(t *testing.T, objs []*unstructured.Unstructured) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() != "Deployment" || u.GetLabels()["app.kubernetes.io/component"] != "console" {
			continue
		}
		dep := &appsv1.Deployment{}
		fromUnstructured(t, u, dep)
		for _, c := range dep.Spec.Template.Spec.Containers {
			if c.Name == "console" {
				return dep, c
			}
		}
		t.Fatalf("the console Deployment %s has no container console", dep.Name)
	}
	t.Fatal("the chart renders no console Deployment")
	return nil, corev1.Container{}
}

// replaceArgs returns args with each arg that is a key of with replaced by
// its value; every key must occur.
func replaceArgs(t *testing.T, args []string, with map[string]string) []string {
	t.Helper()
	out := make([]string, 0, len(args))
	used := 0
	for _, a := range args {
		if r, ok := with[a]; ok {
			a = r
			used++
		}
		out = append(out, a)
	}
	if used != len(with) {
		t.Fatalf("args %q lack some of %v", args, with)
	}
	return out
}

// consoleListenPort returns args with the port of --listen=:<port> (every
// interface of the pod) replaced by a free one, which it returns.
func consoleListenPort(t *testing.T, args []string) ([]string, string) {
	t.Helper()
	port := ""
	out := slices.Clone(args)
	for i, a := range out {
		if v, ok := strings.CutPrefix(a, "--listen="); ok {
			if !strings.HasPrefix(v, ":") {
				t.Fatalf("--listen=%s: want :<port> (every interface of the pod)", v)
			}
			port = freePort(t)
			out[i] = "--listen=:" + port
		}
	}
	if port == "" {
		t.Fatalf("the console's args %q lack --listen", args)
	}
	return out, port
}

// consoleUser is a browser of the console: a cookie jar, no redirects
// followed.
type consoleUser struct {
	hc   *http.Client
	base string
}

func newConsoleUser(t *testing.T, base string) *consoleUser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &consoleUser{base: base, hc: &http.Client{
		Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// do sends a request and returns the status, the Location header and the
// body.
func (u *consoleUser) do(ctx context.Context, method, path string, form url.Values) (int, string, string, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, u.base+path, body)
	if err != nil {
		return 0, "", "", fmt.Errorf("new request %s %s: %w", method, path, err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := u.hc.Do(req)
	if err != nil {
		return 0, "", "", fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", "", fmt.Errorf("read the answer to %s %s: %w", method, path, err)
	}
	return resp.StatusCode, resp.Header.Get("Location"), string(b), nil
}

func (u *consoleUser) must(t *testing.T, method, path string, form url.Values) (int, string, string) {
	t.Helper()
	code, loc, body, err := u.do(t.Context(), method, path, form)
	if err != nil {
		t.Fatal(err)
	}
	return code, loc, body
}

// hasSession reports whether the jar holds a session cookie.
func (u *consoleUser) hasSession(t *testing.T) bool {
	t.Helper()
	base, err := url.Parse(u.base)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(u.hc.Jar.Cookies(base), func(c *http.Cookie) bool { return c.Name == console.CookieName && c.Value != "" })
}

// consoleSignIn waits until the console answers its readiness probe, then
// checks that a bad token gets no session and that the tenant's token gets
// one that shows the offerings and the tenant's namespace, and not another
// namespace's.
func consoleSignIn(t *testing.T, base string, probe *corev1.Probe, token string, running func(*testing.T)) {
	t.Helper()
	if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Scheme != corev1.URISchemeHTTP {
		t.Fatalf("the console's readiness probe %+v is not an HTTP GET", probe)
	}
	probeUser := newConsoleUser(t, base)
	eventually(t, "the console to answer its readiness probe GET "+probe.HTTPGet.Path, func(ctx context.Context) (bool, string, error) {
		running(t)
		code, _, _, err := probeUser.do(ctx, http.MethodGet, probe.HTTPGet.Path, nil)
		if err != nil {
			return false, err.Error(), nil
		}
		return code == http.StatusOK, fmt.Sprintf("status %d", code), nil
	})

	bad := newConsoleUser(t, base)
	if code, _, body := bad.must(t, http.MethodPost, "/login", url.Values{"token": {"not-a-token"}}); code != http.StatusUnauthorized || !strings.Contains(body, "does not accept this token") {
		t.Errorf("sign-in with a bad token: status %d, want 401 and the refusal on the page", code)
	}
	if bad.hasSession(t) {
		t.Errorf("a bad token got a session cookie")
	}
	if code, loc, _ := bad.must(t, http.MethodGet, "/offerings", nil); code != http.StatusSeeOther || loc != "/login" {
		t.Errorf("GET /offerings after a refused sign-in: %d to %q, want 303 to /login", code, loc)
	}

	u := newConsoleUser(t, base)
	code, loc, _ := u.must(t, http.MethodPost, "/login", url.Values{"token": {token}})
	if code != http.StatusSeeOther || loc != "/offerings" || !u.hasSession(t) {
		t.Fatalf("sign-in with the tenant's token: status %d to %q, session %v; want 303 to /offerings with a session", code, loc, u.hasSession(t))
	}
	code, _, body := u.must(t, http.MethodGet, "/offerings", nil)
	if code != http.StatusOK || !strings.Contains(body, consoleOffering) {
		t.Errorf("GET /offerings as the tenant: status %d, offering %s shown %v; want 200 with it", code, consoleOffering, strings.Contains(body, consoleOffering))
	}
	code, _, body = u.must(t, http.MethodGet, "/instances?namespace="+consoleTenantNamespace, nil)
	if code != http.StatusOK || !strings.Contains(body, consoleTenantNamespace+"-cache") {
		t.Errorf("GET /instances in the tenant's namespace: status %d, its instance shown %v; want 200 with it", code, strings.Contains(body, consoleTenantNamespace+"-cache"))
	}
	// The console has no rights of its own: another namespace is the
	// tenant's to see no more than through its own token.
	code, _, body = u.must(t, http.MethodGet, "/instances?namespace="+consoleOtherNamespace, nil)
	if code != http.StatusForbidden || strings.Contains(body, consoleOtherNamespace+"-cache") {
		t.Errorf("GET /instances in another namespace: status %d, its instance shown %v; want 403 without it", code, strings.Contains(body, consoleOtherNamespace+"-cache"))
	}
	running(t)
}
