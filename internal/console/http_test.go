package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/console"
)

// TestNoSessionGoesToLogin: without a session, pages redirect to the login
// page and state-changing requests are refused, before any API call.
func TestNoSessionGoesToLogin(t *testing.T) {
	e := setup(t)
	cs := startConsole(t, e, false, nil)
	u := &userClient{Client: cs.newClient(nil), base: cs.URL}
	for _, path := range []string{"/", "/offerings", "/offerings/" + sfOffering, "/instances?namespace=" + nsA, "/ns/" + nsA + "/sf/x", "/platform"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, cs.URL+path, nil)
		resp, err := u.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
			t.Errorf("GET %s without a session: %d to %q, want 303 to /login", path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	resp := u.postForm(t, "/ns/"+nsA+"/sf/x/delete", map[string]string{"csrf": "anything"})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST delete without a session: %d, want 401", resp.StatusCode)
	}
	// A session id the server never issued is no session either.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, cs.URL+"/offerings", nil)
	req.AddCookie(&http.Cookie{Name: console.CookieName, Value: "forged"})
	r2, err := u.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = r2.Body.Close()
	if r2.StatusCode != http.StatusSeeOther {
		t.Errorf("GET /offerings with a forged session id: %d, want 303", r2.StatusCode)
	}
}

// TestLogin: a bad token is refused without a session; a good one gets a
// cookie that is HttpOnly, SameSite=Strict, Secure over TLS only, with an
// expiry; logout ends the session on the server.
func TestLogin(t *testing.T) {
	e := setup(t)
	for _, tlsServer := range []bool{false, true} {
		cs := startConsole(t, e, tlsServer, nil)
		u := &userClient{Client: cs.newClient(nil), base: cs.URL}
		bad := u.postForm(t, "/login", map[string]string{"token": "not-a-token"})
		if bad.StatusCode != http.StatusUnauthorized || len(bad.Cookies()) != 0 {
			t.Errorf("bad token: status %d, cookies %v; want 401 and none", bad.StatusCode, bad.Cookies())
		}
		if !strings.Contains(bad.Body, "does not accept this token") {
			t.Errorf("bad token: the page does not say the token was refused")
		}
		good := u.postForm(t, "/login", map[string]string{"token": e.tokenA})
		if good.StatusCode != http.StatusSeeOther {
			t.Fatalf("good token: status %d, want 303", good.StatusCode)
		}
		var c *http.Cookie
		for _, ck := range good.Cookies() {
			if ck.Name == console.CookieName {
				c = ck
			}
		}
		if c == nil {
			t.Fatalf("good token: no session cookie")
		}
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure != tlsServer || c.MaxAge <= 0 || c.Expires.IsZero() {
			t.Errorf("cookie (TLS %v): HttpOnly %v, SameSite %v, Secure %v, MaxAge %d, Expires %v", tlsServer, c.HttpOnly, c.SameSite, c.Secure, c.MaxAge, c.Expires)
		}
		if strings.Contains(c.Value, e.tokenA) {
			t.Errorf("the cookie carries the token")
		}
		// Logout: the old cookie no longer opens a session.
		signed := signIn(t, cs, e.tokenA)
		cookies := signed.Jar.Cookies(mustURL(t, cs.URL))
		if r := signed.postForm(t, "/logout", map[string]string{"csrf": signed.csrf}); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/login" {
			t.Errorf("logout: %d to %q", r.StatusCode, r.Header.Get("Location"))
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, cs.URL+"/offerings", nil)
		for _, ck := range cookies {
			req.AddCookie(ck)
		}
		r, err := u.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = r.Body.Close()
		if r.StatusCode != http.StatusSeeOther {
			t.Errorf("the session cookie still works after logout: %d", r.StatusCode)
		}
		cs.assertNoSecrets(t, map[string]string{"tenant A's token": e.tokenA})
	}
}

// TestCSRF: a state-changing request without the session's CSRF token, with
// a wrong one, or from another origin is refused with 403 and changes
// nothing; with the token from the same origin it goes through.
func TestCSRF(t *testing.T) {
	e := setup(t)
	cs := startConsole(t, e, false, nil)
	u := signIn(t, cs, e.tokenA)
	ctx := t.Context()
	inst := &osbv1alpha1.SFServiceInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "csrf-victim", Namespace: nsA},
		Spec:       osbv1alpha1.SFServiceInstanceSpec{ServiceID: e.serviceID, PlanID: e.planID, Parameters: &runtime.RawExtension{Raw: []byte(`{}`)}},
	}
	if err := e.cluster.Client.Create(ctx, inst); err != nil {
		t.Fatal(err)
	}
	path := "/ns/" + nsA + "/sf/csrf-victim/delete"
	for name, c := range map[string]struct {
		form    map[string]string
		headers []string
	}{
		"no token":    {form: map[string]string{console.ConfirmField: "csrf-victim"}},
		"wrong token": {form: map[string]string{"csrf": "x" + u.csrf, console.ConfirmField: "csrf-victim"}},
		"cross-origin": {form: map[string]string{"csrf": u.csrf, console.ConfirmField: "csrf-victim"},
			headers: []string{"Origin", "http://attacker.example.invalid", "Sec-Fetch-Site", "cross-site"}},
	} {
		resp := u.postForm(t, path, c.form, c.headers...)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", name, resp.StatusCode)
		}
		if err := e.cluster.Client.Get(ctx, client.ObjectKeyFromObject(inst), &osbv1alpha1.SFServiceInstance{}); err != nil {
			t.Fatalf("%s: the instance is gone: %v", name, err)
		}
	}
	// A create without the token is refused too.
	if resp := u.postForm(t, "/offerings/"+sfOffering, map[string]string{"namespace": nsA, "name": "nocsrf", "p.maxmemory": "64"}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("create without token: %d, want 403", resp.StatusCode)
	}
	resp := u.postForm(t, path, map[string]string{"csrf": u.csrf, console.ConfirmField: "csrf-victim"}, "Origin", cs.URL, "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("same-origin delete with the token: %d, want 303: %s", resp.StatusCode, resp.Body)
	}
	waitFor(t, "the instance to be deleted", func(ctx context.Context) string {
		if err := e.cluster.Client.Get(ctx, client.ObjectKeyFromObject(inst), &osbv1alpha1.SFServiceInstance{}); err == nil {
			return "still there"
		}
		return ""
	})
	cs.assertNoSecrets(t, map[string]string{"tenant A's token": e.tokenA})
}

// TestCreateValidatesAgainstSchema: the server checks the form against the
// offering's schema and shows each error next to its field; nothing is
// created until the values pass; then the SFServiceInstance carries the
// service, the plan and the parameters, created as the tenant.
func TestCreateValidatesAgainstSchema(t *testing.T) {
	e := setup(t)
	cs := startConsole(t, e, false, nil)
	u := signIn(t, cs, e.tokenA)
	resp := u.postForm(t, "/offerings/"+sfOffering, map[string]string{"csrf": u.csrf, "namespace": nsA, "name": "schema-check", "p.maxmemory": "999"})
	body := resp.Body
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("maxmemory 999: status %d, want 422", resp.StatusCode)
	}
	if !strings.Contains(body, `data-field="maxmemory"`) || !strings.Contains(body, "256") {
		t.Errorf("maxmemory 999: no error next to the maxmemory field naming the maximum 256:\n%s", body)
	}
	resp = u.postForm(t, "/offerings/"+sfOffering, map[string]string{"csrf": u.csrf, "namespace": nsA, "name": "Bad_Name", "p.maxmemory": "abc"})
	body = resp.Body
	if !strings.Contains(body, `data-field="name"`) || !strings.Contains(body, "must be a whole number") {
		t.Errorf("bad name and maxmemory abc: errors not shown next to the fields:\n%s", body)
	}
	ctx := t.Context()
	if err := e.cluster.Client.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "schema-check"}, &osbv1alpha1.SFServiceInstance{}); err == nil {
		t.Fatalf("an invalid form created the instance")
	}
	resp = u.postForm(t, "/offerings/"+sfOffering, map[string]string{"csrf": u.csrf, "namespace": nsA, "name": "schema-check", "p.maxmemory": "32"})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ns/"+nsA+"/sf/schema-check" {
		t.Fatalf("valid form: %d to %q: %s", resp.StatusCode, resp.Header.Get("Location"), resp.Body)
	}
	got := &osbv1alpha1.SFServiceInstance{}
	if err := e.cluster.Client.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "schema-check"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.ServiceID != e.serviceID || got.Spec.PlanID != e.planID || got.Spec.InstanceID != "schema-check" || string(got.Spec.Parameters.Raw) != `{"maxmemory":32}` {
		t.Errorf("instance spec: %+v parameters %s", got.Spec, got.Spec.Parameters.Raw)
	}
	if mf := got.ManagedFields; len(mf) == 0 || mf[0].Manager != "marketplane-console" {
		t.Errorf("managed fields %v: want the console's user agent as manager", mf)
	}
	// A tenant ordering into another tenant's namespace gets the API
	// server's 403 as a readable message, not an error page with a stack.
	resp = u.postForm(t, "/offerings/"+sfOffering, map[string]string{"csrf": u.csrf, "namespace": nsB, "name": "intruder", "p.maxmemory": "32"})
	body = resp.Body
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "You are not permitted to create intruder in namespace tenant-b") ||
		!strings.Contains(body, "system:serviceaccount:tenant-a:alice") {
		t.Errorf("create in tenant B's namespace: status %d:\n%s", resp.StatusCode, body)
	}
	cs.assertNoSecrets(t, map[string]string{"tenant A's token": e.tokenA})
}

// TestKubeconfigLogin: a pasted kubeconfig's token signs in; a kubeconfig
// with a client certificate is refused (the console can only forward
// bearer tokens).
func TestKubeconfigLogin(t *testing.T) {
	e := setup(t)
	cs := startConsole(t, e, false, nil)
	u := &userClient{Client: cs.newClient(nil), base: cs.URL}
	kc := "apiVersion: v1\nkind: Config\ncurrent-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: alice}\n" +
		"clusters:\n- name: c\n  cluster: {server: https://example.invalid}\nusers:\n- name: alice\n  user: {token: " + e.tokenA + "}\n"
	if r := u.postForm(t, "/login", map[string]string{"kubeconfig": kc}); r.StatusCode != http.StatusSeeOther {
		t.Errorf("kubeconfig with a token: %d, want 303", r.StatusCode)
	}
	r := u.postForm(t, "/login", map[string]string{"kubeconfig": string(e.cluster.Kubeconfig)})
	if r.StatusCode != http.StatusBadRequest || !strings.Contains(r.Body, "bearer tokens only") {
		t.Errorf("admin kubeconfig with a client certificate: %d, want 400 naming bearer tokens", r.StatusCode)
	}
	cs.assertNoSecrets(t, map[string]string{"tenant A's token": e.tokenA})
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
