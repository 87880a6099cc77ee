package broker_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/osb"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// endpoints lists one request per OSB endpoint, on ids that need not
// exist: the checks under test run before any lookup.
var endpoints = []struct {
	name         string
	method, path string
	query        string
	hasBody      bool
}{
	{"catalog", "GET", "/v2/catalog", "", false},
	{"provision", "PUT", "/v2/service_instances/x", "", true},
	{"update", "PATCH", "/v2/service_instances/x", "", true},
	{"fetch_instance", "GET", "/v2/service_instances/x", "", false},
	{"deprovision", "DELETE", "/v2/service_instances/x", "service_id=s&plan_id=p", false},
	{"instance_last_operation", "GET", "/v2/service_instances/x/last_operation", "", false},
	{"bind", "PUT", "/v2/service_instances/x/service_bindings/y", "", true},
	{"fetch_binding", "GET", "/v2/service_instances/x/service_bindings/y", "", false},
	{"unbind", "DELETE", "/v2/service_instances/x/service_bindings/y", "service_id=s&plan_id=p", false},
	{"binding_last_operation", "GET", "/v2/service_instances/x/service_bindings/y/last_operation", "", false},
	{"unknown", "GET", "/v2/nothing", "", false},
}

// TestCrossCutting checks, on every endpoint, what applies before the
// endpoint's own logic: 401 with WWW-Authenticate without or with wrong
// credentials, 412 without X-Broker-API-Version or with one older than 2.11
// or of another major version, 400 for a
// malformed X-Broker-API-Originating-Identity, 413 for a body over the
// limit (declared or streamed), and X-Broker-API-Request-Identity echoed on
// every answer, errors included.
func TestCrossCutting(t *testing.T) {
	b := setup(t)
	big := strings.Repeat("x", int(osb.DefaultMaxBodyBytes)+1)
	type check struct {
		reason string
		call   func(c call) call
		want   int
		header string
	}
	checks := map[string]check{
		"NoCredentials": {reason: "A request without credentials is 401.", want: 401, header: "WWW-Authenticate",
			call: func(c call) call { c.noAuth = true; return c }},
		"WrongPassword": {reason: "A wrong password is 401.", want: 401, header: "WWW-Authenticate",
			call: func(c call) call { c.auth = [2]string{testUser, "wrong"}; return c }},
		"WrongUser": {reason: "A wrong username is 401.", want: 401, header: "WWW-Authenticate",
			call: func(c call) call { c.auth = [2]string{"someone", testPassword}; return c }},
		"NoVersion": {reason: "A request without X-Broker-API-Version is 412.", want: 412,
			call: func(c call) call { c.header = map[string]string{"X-Broker-API-Version": ""}; return c }},
		"OldVersion": {reason: "A version older than 2.11 is 412.", want: 412,
			call: func(c call) call { c.header = map[string]string{"X-Broker-API-Version": "2.10"}; return c }},
		"NextMajor": {reason: "Another major version is 412.", want: 412,
			call: func(c call) call { c.header = map[string]string{"X-Broker-API-Version": "3.0"}; return c }},
		"MalformedIdentity": {reason: "A malformed originating identity is 400.", want: 400,
			call: func(c call) call {
				c.header = map[string]string{"X-Broker-API-Originating-Identity": "cloudfoundry not-base64!"}
				return c
			}},
		"BodyTooLarge": {reason: "A body over the limit is 413.", want: 413,
			call: func(c call) call { c.body = big; return c }},
	}
	for _, ep := range endpoints {
		for name, ck := range checks {
			t.Run(ep.name+"/"+name, func(t *testing.T) {
				c := ck.call(call{method: ep.method, path: ep.path, query: ep.query})
				if c.header == nil {
					c.header = map[string]string{}
				}
				c.header["X-Broker-API-Request-Identity"] = "req-" + ep.name + "-" + name
				r := do(t, b.url, c)
				if r.status != ck.want {
					t.Fatalf("%s\n%s %s: got %s, want %d", ck.reason, ep.method, ep.path, r, ck.want)
				}
				if got := r.header.Get("X-Broker-API-Request-Identity"); got != "req-"+ep.name+"-"+name {
					t.Errorf("request identity echoed as %q", got)
				}
				if ck.header != "" && !strings.HasPrefix(r.header.Get(ck.header), "Basic ") {
					t.Errorf("%s = %q, want a Basic challenge", ck.header, r.header.Get(ck.header))
				}
				if r.str("description") == "" {
					t.Errorf("no description: %s", r.raw)
				}
			})
		}
	}

	t.Run("StreamedBodyTooLarge", func(t *testing.T) {
		// A chunked body declares no length; the limit applies while
		// reading.
		pr, pw := io.Pipe()
		go func() {
			w := bufio.NewWriter(pw)
			_, _ = w.WriteString(`{"service_id":"` + big + `"}`)
			_ = w.Flush()
			_ = pw.Close()
		}()
		req, err := http.NewRequest("PUT", b.url+"/v2/service_instances/streamed", pr)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(testUser, testPassword)
		req.Header.Set("X-Broker-API-Version", "2.17")
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 413 {
			body, _ := io.ReadAll(resp.Body)
			t.Fatalf("got %d %s, want 413", resp.StatusCode, body)
		}
	})

	t.Run("Metrics", func(t *testing.T) {
		resp, err := http.Get(b.metricsURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		text, _ := io.ReadAll(resp.Body)
		for _, want := range []string{
			`marketplane_broker_requests_total{code="401",endpoint="catalog"}`,
			`marketplane_broker_requests_total{code="412",endpoint="unbind"}`,
			`marketplane_broker_requests_total{code="413",endpoint="provision"}`,
			`marketplane_broker_request_duration_seconds_bucket{endpoint="catalog",le="0.005"}`,
			`marketplane_build_info{goversion="`,
		} {
			if !strings.Contains(string(text), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		for _, probe := range []string{"/healthz", "/readyz"} {
			r, err := http.Get(b.metricsURL + probe)
			if err != nil {
				t.Fatal(err)
			}
			_ = r.Body.Close()
			if r.StatusCode != 200 {
				t.Errorf("%s = %d", probe, r.StatusCode)
			}
		}
	})
}

// TestAuditAndTenancy checks where an instance lives and what is recorded
// on it: its own namespace (sf-<id>), created and labelled by the broker;
// the originating and request identities of the latest change; a binding
// in the instance's namespace; an id that is no Kubernetes name stored
// under its hash with the full id in the spec.
func TestAuditAndTenancy(t *testing.T) {
	b := setup(t)
	hh := h{t: t, base: b.url}
	ctx := context.Background()
	ids := []string{"tenant-a", "tenant-b", "Tenant.C/with?odd#chars"}
	for _, id := range ids {
		r := hh.do(call{method: "PUT", path: instancePath(id), body: provisionBody(planSmall, nil), header: map[string]string{
			"X-Broker-API-Originating-Identity": identityHeader("cloudfoundry", "user-"+strconv.Itoa(len(id))),
			"X-Broker-API-Request-Identity":     "request-" + strconv.Itoa(len(id)),
		}})
		hh.expect(r, 201, "provision "+id)
	}
	namespaces := map[string]bool{}
	for _, id := range ids {
		inst := instance(t, id)
		if inst.Spec.InstanceID != id {
			t.Errorf("spec.instanceId = %q, want %q", inst.Spec.InstanceID, id)
		}
		if want := sf.InstanceNamespace(id); inst.Namespace != want || !strings.HasPrefix(want, "sf-") {
			t.Errorf("instance %q in namespace %q, want %q", id, inst.Namespace, want)
		}
		namespaces[inst.Namespace] = true
		if got, want := inst.Annotations[sf.AnnotationOriginatingIdentity], `cloudfoundry {"user_id":"user-`+strconv.Itoa(len(id))+`"}`; got != want {
			t.Errorf("originating identity annotation = %q, want %q", got, want)
		}
		if got := inst.Annotations[sf.AnnotationRequestIdentity]; got != "request-"+strconv.Itoa(len(id)) {
			t.Errorf("request identity annotation = %q", got)
		}
		ns := &corev1.Namespace{}
		if err := env.onboarding.Client.Get(ctx, client.ObjectKey{Name: inst.Namespace}, ns); err != nil {
			t.Fatal(err)
		}
		if ns.Labels[sf.LabelManagedBy] != sf.ManagedByBroker || ns.Annotations[sf.AnnotationInstanceID] != id {
			t.Errorf("namespace %s labels %v annotations %v", ns.Name, ns.Labels, ns.Annotations)
		}
	}
	if len(namespaces) != len(ids) {
		t.Errorf("instances share namespaces: %v", namespaces)
	}
	if sf.ObjectName(ids[2]) == ids[2] {
		t.Errorf("%q is no Kubernetes name and must be hashed", ids[2])
	}
	hh.expect(hh.bind("tenant-a", "bind-a", planSmall, nil, false), 201, "bind")
	bnd := &osbv1alpha1.SFServiceBinding{}
	if err := env.onboarding.Client.Get(ctx, sf.BindingKey("tenant-a", "bind-a"), bnd); err != nil {
		t.Fatalf("the binding is not in its instance's namespace: %v", err)
	}
	if bnd.Namespace != instance(t, "tenant-a").Namespace || bnd.Spec.InstanceID != "tenant-a" {
		t.Errorf("binding %s/%s of instance %q", bnd.Namespace, bnd.Name, bnd.Spec.InstanceID)
	}
	hh.expect(hh.do(call{method: "GET", path: instancePath(ids[2])}), 200, "fetch the instance with the odd id")
}
