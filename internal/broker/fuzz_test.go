package broker

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/marketplane/marketplane/pkg/manifests"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/catalog"
	"github.com/marketplane/marketplane/internal/broker/osb"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// loadTestCatalog builds the snapshot of testdata/catalog.yaml.
func loadTestCatalog(t testing.TB) *catalog.Snapshot {
	t.Helper()
	data, err := os.ReadFile("testdata/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifests.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	var services []osbv1alpha1.SFService
	var plans []osbv1alpha1.SFPlan
	for _, u := range objs {
		switch u.GetKind() {
		case "SFService":
			var s osbv1alpha1.SFService
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &s); err != nil {
				t.Fatal(err)
			}
			services = append(services, s)
		case "SFPlan":
			var p osbv1alpha1.SFPlan
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
				t.Fatal(err)
			}
			plans = append(plans, p)
		}
	}
	snap := catalog.Build(services, plans)
	if len(snap.Problems) > 0 {
		t.Fatalf("test catalog has problems: %v", snap.Problems)
	}
	return snap
}

const (
	fuzzUser     = "broker"
	fuzzPassword = "secret"
)

// fuzzRequests are requests that put objects into the store, so that the
// fuzzer starts from existing instances and bindings.
var fuzzRequests = []struct{ method, path, body string }{
	{http.MethodPut, "/v2/service_instances/inst-1", `{"service_id":"svc-sync","plan_id":"plan-sync-small","organization_guid":"o","space_guid":"s","parameters":{"size":2}}`},
	{http.MethodPut, "/v2/service_instances/inst-1/service_bindings/bind-1", `{"service_id":"svc-sync","plan_id":"plan-sync-small","parameters":{"readOnly":true}}`},
	{http.MethodPut, "/v2/service_instances/inst-a?accepts_incomplete=true", `{"service_id":"svc-async","plan_id":"plan-async","organization_guid":"o","space_guid":"s"}`},
}

// fuzzServer is the broker's handler over a store that a test can swap.
type fuzzServer struct {
	http.Handler
	store *swapStore
}

// swapStore is a Store whose backing store a test can replace.
type swapStore struct{ sf.Store }

func newFuzzServer(t testing.TB, store *fakeStore) *fuzzServer {
	t.Helper()
	snap := loadTestCatalog(t)
	auth, err := osb.NewBasicAuth(fuzzUser, fuzzPassword)
	if err != nil {
		t.Fatal(err)
	}
	cat := osb.CatalogFn(func() *catalog.Snapshot { return snap })
	swap := &swapStore{Store: store}
	backend, err := sf.New(cat, swap, sf.WithSyncTimeout(2*time.Second), sf.WithPollInterval(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(cat, backend, nil, auth, osb.WithMaxBodyBytes(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	s := &fuzzServer{Handler: h, store: swap}
	for _, r := range fuzzRequests {
		if code := serve(s, r.method, r.path, "", "", []byte(r.body)).Code; code >= 300 {
			t.Fatalf("%s %s: %d", r.method, r.path, code)
		}
	}
	return s
}

func serve(s http.Handler, method, path, rawQuery, identity string, body []byte) *httptest.ResponseRecorder {
	u, err := url.Parse(path)
	if err != nil {
		u = &url.URL{Path: path}
	}
	if rawQuery != "" {
		u.RawQuery = rawQuery
	}
	r := httptest.NewRequestWithContext(context.Background(), method, "/", strings.NewReader(string(body)))
	r.URL = u
	r.RequestURI = u.RequestURI()
	r.ContentLength = int64(len(body))
	r.SetBasicAuth(fuzzUser, fuzzPassword)
	r.Header.Set(osb.HeaderAPIVersion, "2.17")
	r.Header.Set("Content-Type", "application/json")
	if identity != "" {
		r.Header.Set(osb.HeaderOriginatingIdentity, identity)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

var fuzzMethods = []string{http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodDelete}

// fuzzPath builds the path of one of the OSB endpoints (shape) for fuzzed
// ids, escaped as a platform would.
func fuzzPath(shape uint8, instance, binding string) string {
	i, b := url.PathEscape(instance), url.PathEscape(binding)
	switch shape % 6 {
	case 0:
		return "/v2/catalog"
	case 1:
		return "/v2/service_instances/" + i
	case 2:
		return "/v2/service_instances/" + i + "/last_operation"
	case 3:
		return "/v2/service_instances/" + i + "/service_bindings/" + b
	case 4:
		return "/v2/service_instances/" + i + "/service_bindings/" + b + "/last_operation"
	default:
		return "/v2/" + i
	}
}

// FuzzBroker sends fuzzed bodies, query strings, ids and identities to
// every endpoint of a broker backed by an in-memory store with an instant
// provisioner. Whatever the input, the broker must not panic (a panic would
// surface as a 500) and must not answer 5xx: malformed input is the
// platform's error (4xx); well-formed input succeeds.
//
// go test ./internal/broker -run '^$' -fuzz FuzzBroker -fuzztime 60s
func FuzzBroker(f *testing.F) {
	seeds := []struct {
		method   uint8
		shape    uint8
		instance string
		binding  string
		query    string
		identity string
		body     string
	}{
		{0, 0, "", "", "", "", ""},
		{1, 1, "inst-2", "", "accepts_incomplete=true", "", `{"service_id":"svc-async","plan_id":"plan-async","organization_guid":"o","space_guid":"s","parameters":{"a":1}}`},
		{1, 1, "inst-1", "", "", "", `{"service_id":"svc-sync","plan_id":"plan-sync-small","organization_guid":"o","space_guid":"s","parameters":{"size":2}}`},
		{1, 1, "inst-1", "", "", "", `{"service_id":"svc-sync","plan_id":"plan-sync-small","organization_guid":"o","space_guid":"s","parameters":{"size":"big"}}`},
		{1, 1, "inst-3", "", "", "", `{"service_id":"svc-sync","plan_id":"plan-sync-small","organization_guid":"o","space_guid":"s","maintenance_info":{"version":"0.9"}}`},
		{2, 1, "inst-1", "", "accepts_incomplete=true", "", `{"service_id":"svc-sync","plan_id":"plan-sync-large","parameters":{"size":null}}`},
		{2, 1, "inst-a", "", "", "cloudfoundry eyJ1c2VyX2lkIjoiYSJ9", `{"service_id":"svc-async","context":{"platform":"kubernetes"}}`},
		{0, 1, "inst-1", "", "service_id=svc-sync&plan_id=", "", ""},
		{0, 2, "inst-a", "", "operation=create-1", "", ""},
		{0, 2, "inst-a", "", "operation=%zz", "", ""},
		{3, 1, "inst-1", "", "service_id=svc-sync&plan_id=plan-sync-small", "", ""},
		{3, 1, "inst-a", "", "service_id=svc-async&plan_id=plan-async&accepts_incomplete=yes", "", ""},
		{1, 3, "inst-1", "bind-2", "", "", `{"service_id":"svc-sync","plan_id":"plan-sync-small","bind_resource":{"app_guid":"app"},"parameters":{"readOnly":false}}`},
		{1, 3, "inst-1", "bind-3", "", "", `{"service_id":"svc-sync","plan_id":"plan-sync-small","bind_resource":{"app_guid":7}}`},
		{0, 3, "inst-1", "bind-1", "", "", ""},
		{0, 4, "inst-1", "bind-1", "operation=delete-9", "", ""},
		{3, 3, "inst-1", "bind-1", "service_id=svc-sync&plan_id=plan-sync-small", "", ""},
		{1, 1, "ÄÖ/../x y", "", "", "", `{"service_id":1}`},
		{1, 1, "inst-4", "", "", "", `{"service_id":"svc-sync","plan_id":"plan-sync-small","organization_guid":"o","space_guid":"s","parameters":` + strings.Repeat("[", 200) + `}`},
		{1, 1, "inst-5", "", "", "", `{"service_id":"svc-sync","plan_id":"plan-sync-small","organization_guid":"o","space_guid":"s","parameters":{"n":1e999}}`},
		{1, 1, "inst-6", "", "", "x", `null`},
	}
	for _, s := range seeds {
		f.Add(s.method, s.shape, s.instance, s.binding, s.query, s.identity, []byte(s.body))
	}
	store := newFakeStore(true)
	s := newFuzzServer(f, store)
	f.Fuzz(func(t *testing.T, method, shape uint8, instance, binding, query, identity string, body []byte) {
		store.mu.Lock()
		if len(store.objects) > 2000 {
			store.objects = map[string]client.Object{}
		}
		store.mu.Unlock()
		m := fuzzMethods[int(method)%len(fuzzMethods)]
		w := serve(s, m, fuzzPath(shape, instance, binding), query, identity, body)
		if w.Code >= 500 {
			t.Fatalf("%s %s?%s body %q: %d %s", m, fuzzPath(shape, instance, binding), query, body, w.Code, w.Body.String())
		}
		if w.Code == http.StatusNotModified {
			return
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s: Content-Type %q, want application/json", m, ct)
		}
		if !json.Valid(w.Body.Bytes()) {
			t.Fatalf("%s: %d with a body that is not JSON: %q", m, w.Code, w.Body.String())
		}
	})
}
