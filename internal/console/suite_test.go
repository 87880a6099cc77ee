package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/marketplane/marketplane/pkg/manifests"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/crds"
	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	"github.com/marketplane/marketplane/examples/catalog"
	"github.com/marketplane/marketplane/internal/console"
	"github.com/marketplane/marketplane/internal/marketplace"
	"github.com/marketplane/marketplane/pkg/testenv"
	samplecrds "github.com/marketplane/marketplane/providers/sample/api/crds"
)

// Names of the shared environment.
const (
	nsA, nsB, nsPlatform = "tenant-a", "tenant-b", "platform"
	sfOffering           = "sf-interoperator-cache"
	sampleOffering       = "sp-sample"
	timeout              = 30 * time.Second
	interval             = 100 * time.Millisecond
)

// env is the API server all tests of the package share, with two tenants
// (a ServiceAccount with `edit` in its own namespace each) and a platform
// operator (cluster-admin), and the Offerings a marketplace controller
// would write for the sample catalog's cache service and the sample
// provider.
type env struct {
	cluster *testenv.Cluster
	tokenA  string
	tokenB  string
	tokenP  string
	// serviceID and planID of the cache offering.
	serviceID, planID string
}

var (
	shared     *env
	sharedErr  error
	sharedOnce sync.Once
)

func TestMain(m *testing.M) {
	// The controllers TestOrderFindsControlPlane runs log nowhere;
	// without a logger controller-runtime prints a stack trace instead.
	logf.SetLogger(logr.Discard())
	code := m.Run()
	if shared != nil {
		if err := shared.cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop the API server:", err)
		}
	}
	os.Exit(code)
}

// setup returns the shared environment, starting it on first use.
func setup(t *testing.T) *env {
	t.Helper()
	testenv.SkipIfShort(t)
	sharedOnce.Do(func() { shared, sharedErr = start(t) })
	if sharedErr != nil {
		t.Fatalf("start the environment: %v", sharedErr)
	}
	return shared
}

func start(t *testing.T) (*env, error) {
	all, err := crds.All()
	if err != nil {
		return nil, err
	}
	sample, err := samplecrds.CRDs()
	if err != nil {
		return nil, err
	}
	c, err := testenv.New(testenv.WithName("console"), testenv.WithCRDs(append(all, sample...)...),
		testenv.WithControllerManager("clusterrole-aggregation"))
	if err != nil {
		return nil, err
	}
	e := &env{cluster: c}
	ctx := context.Background()
	if err := marketplace.Init(ctx, c.Client, 0); err != nil {
		return e, fmt.Errorf("marketplace init: %w", err)
	}
	for _, ns := range []string{nsA, nsB, nsPlatform} {
		if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return e, err
		}
	}
	// Marketplane ships no aggregated role for the tenants' kinds; a
	// platform grants them to `edit` like this.
	if err := c.Client.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "console-test:tenant-kinds", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"osb.servicefabrik.io"}, Resources: []string{"sfserviceinstances", "sfservicebindings"}, Verbs: []string{"*"}},
			{APIGroups: []string{"sample.services.openmcp.cloud"}, Resources: []string{"samples"}, Verbs: []string{"*"}},
			{APIGroups: []string{"core.openmcp.cloud"}, Resources: []string{"managedcontrolplanes"}, Verbs: []string{"*"}},
		},
	}); err != nil {
		return e, err
	}
	for _, b := range []struct{ ns, sa, role, kind string }{
		{nsA, "alice", "edit", "RoleBinding"}, {nsB, "bob", "edit", "RoleBinding"}, {nsPlatform, "operator", "cluster-admin", "ClusterRoleBinding"},
	} {
		subj := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: b.ns, Name: b.sa}}
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role}
		var obj client.Object = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: b.sa}, Subjects: subj, RoleRef: ref}
		if b.kind == "ClusterRoleBinding" {
			obj = &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "console-test:" + b.sa}, Subjects: subj, RoleRef: ref}
		}
		if err := c.Client.Create(ctx, obj); err != nil {
			return e, err
		}
	}
	e.tokenA = c.ServiceAccountToken(t, nsA, "alice")
	e.tokenB = c.ServiceAccountToken(t, nsB, "bob")
	e.tokenP = c.ServiceAccountToken(t, nsPlatform, "operator")
	if err := e.writeOfferings(ctx, sample); err != nil {
		return e, err
	}
	// `edit` gets the tenant kinds once the aggregation controller has run.
	err = wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		edit := &rbacv1.ClusterRole{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: "edit"}, edit); err != nil {
			return false, nil //nolint:nilerr // not there yet
		}
		for _, r := range edit.Rules {
			for _, res := range r.Resources {
				if res == "sfserviceinstances" {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		return e, fmt.Errorf("wait for `edit` to aggregate the tenant kinds: %w", err)
	}
	return e, nil
}

// writeOfferings writes the two Offerings as the marketplace controller
// would: the cache service of the sample catalog with its plan's schema,
// and the sample provider's kind with its CRD's spec schema.
func (e *env) writeOfferings(ctx context.Context, sample []*apiextensionsv1.CustomResourceDefinition) error {
	svc, err := catalogObject("service-cache.yaml")
	if err != nil {
		return err
	}
	plan, err := catalogObject("plan-cache-dev.yaml")
	if err != nil {
		return err
	}
	e.serviceID, _, _ = unstructured.NestedString(svc.Object, "spec", "id")
	e.planID, _, _ = unstructured.NestedString(plan.Object, "spec", "id")
	desc, _, _ := unstructured.NestedString(svc.Object, "spec", "description")
	planDesc, _, _ := unstructured.NestedString(plan.Object, "spec", "description")
	params, ok, _ := unstructured.NestedMap(plan.Object, "spec", "schemas", "service_instance", "create", "parameters")
	if !ok {
		return fmt.Errorf("plan-cache-dev.yaml has no create parameters schema")
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	sf := &marketplacev1alpha1.Offering{
		ObjectMeta: metav1.ObjectMeta{Name: sfOffering},
		Spec: marketplacev1alpha1.OfferingSpec{
			Source:      marketplacev1alpha1.Source{Kind: marketplacev1alpha1.SourceSFService, Name: "cache", Namespace: "interoperator"},
			DisplayName: "cache", Description: desc, Ready: true, ServiceID: e.serviceID, Bindable: true, Tags: []string{"cache", "redis"},
			Plans: []marketplacev1alpha1.Plan{{ID: e.planID, Name: "dev", Description: planDesc, Free: true, Bindable: true,
				Schemas: &marketplacev1alpha1.PlanSchemas{InstanceCreate: &apiextensionsv1.JSON{Raw: raw}}}},
		},
	}
	var crd *apiextensionsv1.CustomResourceDefinition
	for _, c := range sample {
		if c.Spec.Names.Kind == "Sample" {
			crd = c
		}
	}
	if crd == nil {
		return fmt.Errorf("no Sample CRD")
	}
	v := crd.Spec.Versions[0]
	specSchema, err := json.Marshal(v.Schema.OpenAPIV3Schema.Properties["spec"])
	if err != nil {
		return err
	}
	sp := &marketplacev1alpha1.Offering{
		ObjectMeta: metav1.ObjectMeta{Name: sampleOffering},
		Spec: marketplacev1alpha1.OfferingSpec{
			Source:      marketplacev1alpha1.Source{Kind: marketplacev1alpha1.SourceServiceProvider, Name: "sample"},
			DisplayName: "Sample", Description: "The sample provider: a DomainService in your ManagedControlPlane", Version: "v0.1.0", Ready: true,
			Kinds: []marketplacev1alpha1.OfferedKind{{Group: crd.Spec.Group, Version: v.Name, Kind: "Sample", Plural: crd.Spec.Names.Plural, Scope: "Namespaced",
				Schema: &apiextensionsv1.JSON{Raw: specSchema}}},
		},
	}
	for _, o := range []*marketplacev1alpha1.Offering{sf, sp} {
		if err := e.cluster.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("create Offering %s: %w", o.Name, err)
		}
	}
	return nil
}

func catalogObject(file string) (*unstructured.Unstructured, error) {
	raw, err := catalog.Files.ReadFile(file)
	if err != nil {
		return nil, err
	}
	objs, err := manifests.Decode(raw)
	if err != nil || len(objs) != 1 {
		return nil, fmt.Errorf("decode %s: %d objects: %w", file, len(objs), err)
	}
	return objs[0], nil
}

// consoleServer is a console under test: its URL, its log, and every
// response body it sent, so that tests can check no token ever leaves it.
type consoleServer struct {
	*httptest.Server
	log    *testenv.SyncBuffer
	bodies *testenv.SyncBuffer
}

// options returns console options for the shared API server.
func (e *env) options(log *testenv.SyncBuffer) console.Options {
	return console.Options{
		Onboarding: console.Cluster{Server: e.cluster.Config.Host, CAData: e.cluster.Config.CAData},
		Logger: funcr.New(func(prefix, args string) { log.WriteString(prefix + " " + args + "\n") },
			funcr.Options{Verbosity: 2}),
	}
}

// startConsole serves the console for opts (modified by mod) on a free
// loopback port.
func startConsole(t *testing.T, e *env, tlsServer bool, mod func(*console.Options)) *consoleServer {
	t.Helper()
	cs := &consoleServer{log: &testenv.SyncBuffer{}, bodies: &testenv.SyncBuffer{}}
	opts := e.options(cs.log)
	if mod != nil {
		mod(&opts)
	}
	h, err := console.New(opts)
	if err != nil {
		t.Fatalf("console.New: %v", err)
	}
	rec := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&teeWriter{ResponseWriter: w, to: cs.bodies}, r)
	})
	if tlsServer {
		cs.Server = httptest.NewTLSServer(rec)
	} else {
		cs.Server = httptest.NewServer(rec)
	}
	t.Cleanup(cs.Close)
	return cs
}

// teeWriter copies a response's headers and body into a buffer.
type teeWriter struct {
	http.ResponseWriter
	to      *testenv.SyncBuffer
	started bool
}

func (w *teeWriter) WriteHeader(code int) {
	w.headers()
	w.ResponseWriter.WriteHeader(code)
}

func (w *teeWriter) Write(p []byte) (int, error) {
	w.headers()
	_, _ = w.to.Write(p)
	return w.ResponseWriter.Write(p)
}

func (w *teeWriter) headers() {
	if w.started {
		return
	}
	w.started = true
	var b strings.Builder
	_ = w.Header().Write(&b)
	w.to.WriteString(b.String())
}

// assertNoSecrets fails when any of secrets appears in the console's
// responses or log.
func (cs *consoleServer) assertNoSecrets(t *testing.T, secrets map[string]string) {
	t.Helper()
	bodies, log := cs.bodies.String(), cs.log.String()
	if bodies == "" {
		t.Fatal("no response was recorded; the check would be empty")
	}
	for what, s := range secrets {
		if s == "" {
			t.Fatalf("%s is empty; the check would be empty", what)
		}
		if strings.Contains(bodies, s) {
			t.Errorf("%s appears in a response body of the console", what)
		}
		if strings.Contains(log, s) {
			t.Errorf("%s appears in the console's log", what)
		}
	}
}

// newClient returns an HTTP client of its own for the console (the
// server's Client() is one shared client), with jar (nil: no cookies),
// that does not follow redirects.
func (cs *consoleServer) newClient(jar http.CookieJar) *http.Client {
	return &http.Client{
		Transport:     cs.Client().Transport,
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// userClient is an HTTP client with a cookie jar, signed in as token.
type userClient struct {
	*http.Client
	base string
	csrf string
}

// signIn signs in through the login form and reads the CSRF token of the
// session from a page.
func signIn(t *testing.T, cs *consoleServer, token string) *userClient {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	u := &userClient{Client: cs.newClient(jar), base: cs.URL}
	resp := u.postForm(t, "/login", map[string]string{"token": token})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/offerings" {
		t.Fatalf("sign in: status %d, location %q, want 303 to /offerings", resp.StatusCode, resp.Header.Get("Location"))
	}
	code, body := u.get(t, "/offerings")
	if code != http.StatusOK {
		t.Fatalf("GET /offerings after sign-in: %d", code)
	}
	const marker = `<meta name="csrf" content="`
	i := strings.Index(body, marker)
	if i < 0 {
		t.Fatalf("no CSRF meta tag on /offerings")
	}
	u.csrf = body[i+len(marker):]
	u.csrf = u.csrf[:strings.IndexByte(u.csrf, '"')]
	return u
}

func (u *userClient) get(t *testing.T, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, u.base+path, nil)
	resp, err := u.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// answer is a response read to its end.
type answer struct {
	StatusCode int
	Header     http.Header
	Body       string
	cookies    []*http.Cookie
}

// Cookies are the cookies the answer sets.
func (a *answer) Cookies() []*http.Cookie { return a.cookies }

// postForm posts form values; headers in extra are set as given.
func (u *userClient) postForm(t *testing.T, path string, form map[string]string, extra ...string) *answer {
	t.Helper()
	values := url.Values{}
	for k, v := range form {
		values.Set(k, v)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, u.base+path, strings.NewReader(values.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	resp, err := u.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: read the answer: %v", path, err)
	}
	return &answer{StatusCode: resp.StatusCode, Header: resp.Header, Body: string(body), cookies: resp.Cookies()}
}

// waitFor polls cond (which says what it still misses) until it returns
// "" or the timeout ends.
func waitFor(t *testing.T, what string, cond func(ctx context.Context) string) {
	t.Helper()
	last := ""
	err := wait.PollUntilContextTimeout(t.Context(), interval, timeout, true, func(ctx context.Context) (bool, error) {
		last = cond(ctx)
		return last == "", nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last: %s", what, err, last)
	}
}
