package console_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/api/crds"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/console"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestPlatformSignIn: with a platform cluster of its own (its own token
// issuer, as on the landscape), the platform view takes a second sign-in
// with a token the platform cluster accepts. A tenant's onboarding token
// is refused there, a platform token is refused as a console sign-in, and
// the platform token, with a narrow read role, shows the platform view
// under its own identity, never the onboarding user's. No token leaves the
// console.
func TestPlatformSignIn(t *testing.T) {
	e := setup(t)
	plat, platToken := startPlatformCluster(t)
	ctx := t.Context()

	cs := startConsole(t, e, false, func(o *console.Options) {
		o.Platform = console.Cluster{Server: plat.Config.Host, CAData: plat.Config.CAData}
	})
	alice := signIn(t, cs, e.tokenA)

	// Before the platform sign-in: the form, and no providers.
	code, body := alice.get(t, "/platform")
	if code != http.StatusOK || !strings.Contains(body, `id="platform-login"`) || strings.Contains(body, `data-name="on-the-platform"`) {
		t.Fatalf("platform view before the platform sign-in: status %d, form shown %v, providers shown %v", code, strings.Contains(body, `id="platform-login"`), strings.Contains(body, `data-name="on-the-platform"`))
	}

	// A platform token is no console (onboarding) sign-in.
	jarless := cs.newClient(nil)
	u := &userClient{Client: jarless, base: cs.URL}
	if resp := u.postForm(t, "/login", map[string]string{"token": platToken}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("console sign-in with the platform token: status %d, want 401", resp.StatusCode)
	}

	// The tenant's onboarding token is no platform sign-in.
	resp := alice.postForm(t, "/platform/login", map[string]string{"csrf": alice.csrf, console.PlatformTokenField: e.tokenA})
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Body, "does not accept this token") {
		t.Errorf("platform sign-in with the onboarding token: status %d, want 401 saying the platform cluster does not accept it", resp.StatusCode)
	}
	if strings.Contains(resp.Body, `id="platform-user"`) {
		t.Error("the onboarding token was taken as a platform identity")
	}
	// Without the CSRF token the sign-in is refused before it is checked.
	if resp := alice.postForm(t, "/platform/login", map[string]string{console.PlatformTokenField: platToken}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("platform sign-in without the CSRF token: status %d, want 403", resp.StatusCode)
	}

	// The platform token: the view as the platform identity.
	resp = alice.postForm(t, "/platform/login", map[string]string{"csrf": alice.csrf, console.PlatformTokenField: platToken})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("platform sign-in with the platform token: status %d: %s", resp.StatusCode, resp.Body)
	}
	code, body = alice.get(t, "/platform")
	if code != http.StatusOK || !strings.Contains(body, `data-name="on-the-platform"`) {
		t.Errorf("platform view after the platform sign-in: status %d, provider shown %v", code, strings.Contains(body, `data-name="on-the-platform"`))
	}
	if !strings.Contains(body, `<strong id="platform-user">system:serviceaccount:ops:viewer</strong>`) || !strings.Contains(body, `<span id="user">system:serviceaccount:tenant-a:alice</span>`) {
		t.Error("the platform view does not show the two identities apart (platform: ops:viewer, console: tenant-a:alice)")
	}
	// The console's own pages stay the onboarding user's.
	if code, body := alice.get(t, "/instances?namespace="+nsA); code != http.StatusOK || strings.Contains(body, "ops:viewer") {
		t.Errorf("the instances page after the platform sign-in: status %d, platform identity shown %v", code, strings.Contains(body, "ops:viewer"))
	}

	// Signing out of the platform cluster ends that view only.
	if resp := alice.postForm(t, "/platform/logout", map[string]string{"csrf": alice.csrf}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("platform sign-out: status %d", resp.StatusCode)
	}
	if code, body := alice.get(t, "/platform"); code != http.StatusOK || strings.Contains(body, `data-name="on-the-platform"`) || !strings.Contains(body, `id="platform-login"`) {
		t.Errorf("platform view after the platform sign-out: status %d, provider still shown %v", code, strings.Contains(body, `data-name="on-the-platform"`))
	}

	// The same in the browser: the platform sign-in form, then the view.
	bctx := newBrowser(t)
	signInBrowser(bctx, t, cs.URL, e.tokenA, "tenant A")
	pageCheck(bctx, t, "platform-sign-in", http.StatusOK, []string{"own sign-in", "Sign in to the platform cluster"}, chromedp.Navigate(cs.URL+"/platform"))
	step(bctx, t, "fill in the platform token", chromedp.SetValue("#platform-token", platToken, chromedp.ByQuery))
	pageCheck(bctx, t, "platform-admin", http.StatusOK, []string{"system:serviceaccount:ops:viewer", "on-the-platform"}, chromedp.Click("#platform-sign-in-button", chromedp.ByQuery))

	// A revoked platform token (its ServiceAccount deleted) ends the
	// platform sign-in: the form comes back.
	if err := plat.Client.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "viewer"}}); err != nil {
		t.Fatal(err)
	}
	// The API server caches a token's authentication for a few seconds:
	// the view is loaded until it refuses the token.
	var providers string
	waitFor(t, "the platform view to refuse the revoked platform token", func(ctx context.Context) string {
		var form bool
		c, cancel := context.WithTimeout(bctx, stepTimeout)
		defer cancel()
		if err := chromedp.Run(c, chromedp.Navigate(cs.URL+"/platform"),
			chromedp.Evaluate(`document.getElementById("platform-login") !== null`, &form),
			chromedp.Text("#providers", &providers, chromedp.ByQuery)); err != nil {
			return err.Error()
		}
		if !form {
			return "the page still shows the platform sign-in; providers: " + providers
		}
		return ""
	})
	if !strings.Contains(providers, "does not accept your token") {
		t.Errorf("the providers section after the platform token was revoked: %q", providers)
	}
	cs.assertNoSecrets(t, map[string]string{"the platform token": platToken, "tenant A's token": e.tokenA})
}

// startPlatformCluster starts a platform cluster of its own (its own token
// issuer) holding the ServiceProvider on-the-platform, and returns it with
// a token of ops/viewer, whose role reads ServiceProviders and SFClusters.
func startPlatformCluster(t *testing.T) (*testenv.Cluster, string) {
	t.Helper()
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	plat, err := testenv.New(testenv.WithName("console-platform"), testenv.WithCRDs(all...))
	if err != nil {
		t.Fatalf("start the platform cluster: %v", err)
	}
	t.Cleanup(func() { _ = plat.Stop() })
	ctx := t.Context()
	if err := plat.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ops"}}); err != nil {
		t.Fatal(err)
	}
	if err := plat.Client.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "console-test:platform-view"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{providerv1alpha1.GroupVersion.Group}, Resources: []string{"serviceproviders"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"resource.servicefabrik.io"}, Resources: []string{"sfclusters"}, Verbs: []string{"get", "list", "watch"}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	if err := plat.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "console-test:platform-view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "ops", Name: "viewer"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "console-test:platform-view"},
	}); err != nil {
		t.Fatal(err)
	}
	platToken := plat.ServiceAccountToken(t, "ops", "viewer")
	sp := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: "on-the-platform"}}
	sp.Spec.Image = "registry.example.com/marketplane/sample:v0.1.0"
	if err := plat.Client.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	return plat, platToken
}

// TestPlatformTokenRefusedMidPage: the API server caches a token's
// authentication, so after a revocation one list of the platform view may
// pass and the next be refused. A proxy in front of the platform cluster
// refuses the SFCluster list alone, as such a page load sees it: the view
// then shows the sign-in form and nothing read with the refused token.
func TestPlatformTokenRefusedMidPage(t *testing.T) {
	e := setup(t)
	plat, platToken := startPlatformCluster(t)
	var refuse atomic.Bool
	proxy := refusingProxy(t, plat, func(r *http.Request) bool {
		return refuse.Load() && strings.HasSuffix(r.URL.Path, "/sfclusters")
	})
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: proxy.Certificate().Raw})
	cs := startConsole(t, e, false, func(o *console.Options) {
		o.Platform = console.Cluster{Server: proxy.URL, CAData: caPEM}
	})
	alice := signIn(t, cs, e.tokenA)
	if resp := alice.postForm(t, "/platform/login", map[string]string{"csrf": alice.csrf, console.PlatformTokenField: platToken}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("platform sign-in through the proxy: status %d: %s", resp.StatusCode, resp.Body)
	}
	if code, body := alice.get(t, "/platform"); code != http.StatusOK || !strings.Contains(body, `data-name="on-the-platform"`) {
		t.Fatalf("platform view through the proxy: status %d, provider shown %v", code, strings.Contains(body, `data-name="on-the-platform"`))
	}

	refuse.Store(true)
	for _, load := range []string{"the load that sees the refusal", "the next load"} {
		code, body := alice.get(t, "/platform")
		if code != http.StatusOK || !strings.Contains(body, `id="platform-login"`) {
			t.Errorf("%s: status %d, sign-in form shown %v", load, code, strings.Contains(body, `id="platform-login"`))
		}
		if strings.Contains(body, `data-name="on-the-platform"`) || strings.Contains(body, `id="platform-user"`) {
			t.Errorf("%s shows what the refused token read (provider %v, platform identity %v)", load,
				strings.Contains(body, `data-name="on-the-platform"`), strings.Contains(body, `id="platform-user"`))
		}
		if !strings.Contains(body, "does not accept your token") {
			t.Errorf("%s does not say the platform cluster refuses the token", load)
		}
	}
}

// refusingProxy serves TLS in front of the cluster's API server and answers
// 401 Unauthorized, as the API server does, to the requests refuse picks.
func refusingProxy(t *testing.T, c *testenv.Cluster, refuse func(*http.Request) bool) *httptest.Server {
	t.Helper()
	target, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(c.Config.CAData) {
		t.Fatal("the platform cluster's CA does not parse")
	}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}},
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse(r) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}
