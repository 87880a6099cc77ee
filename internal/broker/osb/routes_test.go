package osb

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/marketplane/marketplane/internal/broker/catalog"
)

// recorder is a Backend that records the method called and its request.
type recorder struct {
	method string
	call   Call
	req    any
}

func (r *recorder) record(method string, c *Call, req any) (int, any, error) {
	r.method, r.call, r.req = method, *c, req
	return http.StatusTeapot, EmptyObject, nil
}

func (r *recorder) Provision(_ context.Context, c *Call, req *ProvisionRequest) (int, any, error) {
	return r.record("Provision", c, req)
}

func (r *recorder) Update(_ context.Context, c *Call, req *UpdateRequest) (int, any, error) {
	return r.record("Update", c, req)
}

func (r *recorder) FetchInstance(_ context.Context, c *Call, req *FetchRequest) (int, any, error) {
	return r.record("FetchInstance", c, req)
}

func (r *recorder) Deprovision(_ context.Context, c *Call, req *DeleteRequest) (int, any, error) {
	return r.record("Deprovision", c, req)
}

func (r *recorder) InstanceLastOperation(_ context.Context, c *Call, req *LastOperationRequest) (int, any, error) {
	return r.record("InstanceLastOperation", c, req)
}

func (r *recorder) Bind(_ context.Context, c *Call, req *BindRequest) (int, any, error) {
	return r.record("Bind", c, req)
}

func (r *recorder) FetchBinding(_ context.Context, c *Call, req *FetchRequest) (int, any, error) {
	return r.record("FetchBinding", c, req)
}

func (r *recorder) Unbind(_ context.Context, c *Call, req *DeleteRequest) (int, any, error) {
	return r.record("Unbind", c, req)
}

func (r *recorder) BindingLastOperation(_ context.Context, c *Call, req *LastOperationRequest) (int, any, error) {
	return r.record("BindingLastOperation", c, req)
}

// TestEveryEndpointReachesTheBackend sends one valid request to each
// endpoint of the route table and checks that it reaches its Backend
// method once, with the ids, the query and the body decoded into the typed
// request, and that the table names each pattern and endpoint once.
func TestEveryEndpointReachesTheBackend(t *testing.T) {
	const inst, bind = "/v2/service_instances/i-1", "/v2/service_instances/i-1/service_bindings/b-1"
	cases := []struct {
		method, path, body string
		wantMethod         string
		wantReq            any
		async              bool
	}{
		{"PUT", inst + "?accepts_incomplete=true", `{"service_id":"s","plan_id":"p","organization_guid":"o","space_guid":"sp","parameters":{"a":1},"context":{"platform":"x"},"maintenance_info":{"version":"1"}}`,
			"Provision", &ProvisionRequest{InstanceID: "i-1", ServiceID: "s", PlanID: "p", OrganizationGUID: "o", SpaceGUID: "sp",
				Parameters: json.RawMessage(`{"a":1}`), Context: json.RawMessage(`{"platform":"x"}`), MaintenanceInfo: json.RawMessage(`{"version":"1"}`)}, true},
		{"PATCH", inst, `{"service_id":"s","plan_id":"p2","previous_values":{"plan_id":"p"}}`,
			"Update", &UpdateRequest{InstanceID: "i-1", ServiceID: "s", PlanID: "p2", PreviousValues: json.RawMessage(`{"plan_id":"p"}`)}, false},
		{"GET", inst, "", "FetchInstance", &FetchRequest{InstanceID: "i-1"}, false},
		{"DELETE", inst + "?service_id=s&plan_id=p&accepts_incomplete=true", "", "Deprovision", &DeleteRequest{InstanceID: "i-1", ServiceID: "s", PlanID: "p"}, true},
		{"GET", inst + "/last_operation?operation=create-1", "", "InstanceLastOperation", &LastOperationRequest{InstanceID: "i-1", Operation: "create-1"}, false},
		{"PUT", bind, `{"service_id":"s","plan_id":"p","app_guid":"a","bind_resource":{"app_guid":"a"}}`,
			"Bind", &BindRequest{InstanceID: "i-1", BindingID: "b-1", ServiceID: "s", PlanID: "p", AppGUID: "a", BindResource: json.RawMessage(`{"app_guid":"a"}`)}, false},
		{"GET", bind, "", "FetchBinding", &FetchRequest{InstanceID: "i-1", BindingID: "b-1"}, false},
		{"DELETE", bind + "?service_id=s&plan_id=p", "", "Unbind", &DeleteRequest{InstanceID: "i-1", BindingID: "b-1", ServiceID: "s", PlanID: "p"}, false},
		{"GET", bind + "/last_operation", "", "BindingLastOperation", &LastOperationRequest{InstanceID: "i-1", BindingID: "b-1"}, false},
	}
	auth, err := NewBasicAuth("u", "p")
	if err != nil {
		t.Fatal(err)
	}
	backend := &recorder{}
	h, err := New(CatalogFn(catalog.Empty), backend, auth)
	if err != nil {
		t.Fatal(err)
	}
	reached := map[string]bool{}
	for _, c := range cases {
		*backend = recorder{}
		r := httptest.NewRequestWithContext(context.Background(), c.method, c.path, strings.NewReader(c.body))
		r.SetBasicAuth("u", "p")
		r.Header.Set(HeaderAPIVersion, "2.17")
		r.Header.Set(HeaderRequestIdentity, "req-1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusTeapot || backend.method != c.wantMethod {
			t.Errorf("%s %s: %d %s, reached %q, want %s", c.method, c.path, w.Code, w.Body, backend.method, c.wantMethod)
			continue
		}
		reached[c.wantMethod] = true
		if diff := cmp.Diff(c.wantReq, backend.req); diff != "" {
			t.Errorf("%s %s: request (-want +got):\n%s", c.method, c.path, diff)
		}
		want := Call{Version: APIVersion{Major: 2, Minor: 17}, RequestID: "req-1", AcceptsIncomplete: c.async}
		if diff := cmp.Diff(want, backend.call); diff != "" {
			t.Errorf("%s %s: call (-want +got):\n%s", c.method, c.path, diff)
		}
	}
	patterns, endpoints := map[string]bool{}, map[string]bool{}
	for _, rt := range routes {
		if patterns[rt.pattern] || endpoints[rt.endpoint] {
			t.Errorf("route %s (%s) is in the table twice", rt.pattern, rt.endpoint)
		}
		patterns[rt.pattern], endpoints[rt.endpoint] = true, true
	}
	// Every endpoint but the catalog and unknown paths is a Backend method.
	if want := len(routes) - 2; len(reached) != want {
		t.Errorf("%d endpoints reached the backend, want %d (every route but the catalog and unknown paths)", len(reached), want)
	}
}

// TestOneRouteTable checks that routes is the only table of OSB endpoints
// in the broker: no other file of the broker's packages registers a
// pattern of the OSB API or builds a mux for it.
func TestOneRouteTable(t *testing.T) {
	pattern := regexp.MustCompile(`"(GET|PUT|PATCH|DELETE) /v2/|http\.NewServeMux\(`)
	root := ".."
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "app" {
			// The broker's process serves its health and metrics
			// endpoints on a mux of its own, on another port.
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if pattern.Match(data) && filepath.Clean(p) != filepath.Join("..", "osb", "routes.go") && filepath.Clean(p) != filepath.Join("..", "osb", "handler.go") {
			t.Errorf("%s registers OSB routes or builds a mux: the route table is osb's routes alone", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
