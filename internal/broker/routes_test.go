package broker_test

import (
	"strings"
	"testing"
)

// TestRoutes sends methods an endpoint does not take, ids that are dot
// segments and paths that are no endpoint, over real HTTP. Every 405
// carries an Allow header (RFC 9110) listing exactly the methods the
// endpoint takes; a dot-segment id ("." or "..", also percent-encoded) on
// an endpoint that takes the method is a 400 naming the id, not a 405 that
// lists the method sent among the allowed ones.
func TestRoutes(t *testing.T) {
	b := setup(t)
	hh := h{t: t, base: b.url}
	const (
		instanceMethods = "GET, HEAD, PUT, PATCH, DELETE"
		bindingMethods  = "GET, HEAD, PUT, DELETE"
		pollMethods     = "GET, HEAD"
	)
	cases := map[string]struct {
		reason       string
		method, path string
		want         int
		// allow is the Allow header a 405 must carry.
		allow string
		// description is a text the error's description must hold.
		description string
	}{
		"405/PostCatalog": {reason: "The catalog takes GET (and so HEAD) only.",
			method: "POST", path: "/v2/catalog", want: 405, allow: pollMethods},
		"405/DeleteCatalog": {reason: "The catalog takes GET (and so HEAD) only.",
			method: "DELETE", path: "/v2/catalog", want: 405, allow: pollMethods},
		"405/PostInstance": {reason: "An instance takes GET, PUT, PATCH and DELETE.",
			method: "POST", path: "/v2/service_instances/routes-x", want: 405, allow: instanceMethods},
		"405/PutInstanceLastOperation": {reason: "last_operation takes GET only.",
			method: "PUT", path: "/v2/service_instances/routes-x/last_operation", want: 405, allow: pollMethods},
		"405/PatchBinding": {reason: "A binding takes no PATCH.",
			method: "PATCH", path: "/v2/service_instances/routes-x/service_bindings/routes-y", want: 405, allow: bindingMethods},
		"405/PostBindingLastOperation": {reason: "A binding's last_operation takes GET only.",
			method: "POST", path: "/v2/service_instances/routes-x/service_bindings/routes-y/last_operation", want: 405, allow: pollMethods},
		"405/PostDotSegmentInstance": {reason: "A method the endpoint does not take is 405 whatever the id.",
			method: "POST", path: "/v2/service_instances/%2E%2E", want: 405, allow: instanceMethods},

		"400/EncodedDotDotInstance": {reason: "A percent-encoded \"..\" instance id is a bad id.",
			method: "PUT", path: "/v2/service_instances/%2E%2E", want: 400, description: "instance_id"},
		"400/EncodedDotInstance": {reason: "A percent-encoded \".\" instance id is a bad id.",
			method: "PATCH", path: "/v2/service_instances/%2e", want: 400, description: "instance_id"},
		"400/DotDotInstance": {reason: "A literal \"..\" instance id is a bad id.",
			method: "GET", path: "/v2/service_instances/..", want: 400, description: "instance_id"},
		"400/DotInstanceDelete": {reason: "A literal \".\" instance id is a bad id.",
			method: "DELETE", path: "/v2/service_instances/.", want: 400, description: "instance_id"},
		"400/DotInstanceLastOperation": {reason: "A dot-segment id is a bad id on last_operation too.",
			method: "GET", path: "/v2/service_instances/%2E/last_operation", want: 400, description: "instance_id"},
		"400/DotDotBinding": {reason: "A dot-segment binding id is a bad binding id.",
			method: "PUT", path: "/v2/service_instances/routes-x/service_bindings/%2E%2E", want: 400, description: "binding_id"},
		"400/DotBindingLastOperation": {reason: "A dot-segment binding id is a bad binding id on last_operation.",
			method: "GET", path: "/v2/service_instances/routes-x/service_bindings/./last_operation", want: 400, description: "binding_id"},
		"400/DotInstanceOfBinding": {reason: "A dot-segment instance id in a binding's path is named first.",
			method: "DELETE", path: "/v2/service_instances/../service_bindings/%2E%2E", want: 400, description: "instance_id"},

		"404/NoEndpoint": {reason: "A path that is no endpoint is 404, without Allow.",
			method: "GET", path: "/v2/nothing", want: 404},
		"404/TrailingSlash": {reason: "A path that is not canonical is no endpoint.",
			method: "PUT", path: "/v2/service_instances/routes-x/", want: 404},
		"404/DoubleSlash": {reason: "An empty id segment is no endpoint.",
			method: "GET", path: "/v2/service_instances//last_operation", want: 404},
		"404/DotSegmentElsewhere": {reason: "A dot segment where no id belongs is no endpoint.",
			method: "GET", path: "/v2/service_instances/routes-x/%2E%2E", want: 404},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := hh.do(call{method: tc.method, path: tc.path})
			if r.status != tc.want {
				t.Fatalf("%s\n%s %s: got %s, want status %d", tc.reason, tc.method, tc.path, r, tc.want)
			}
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
			}
			if tc.method != "HEAD" && !strings.Contains(r.str("description"), tc.description) {
				t.Errorf("%s %s: description %q does not name %q", tc.method, tc.path, r.str("description"), tc.description)
			}
			if tc.want != 405 {
				return
			}
			if strings.Contains(tc.allow, tc.method) {
				t.Errorf("%s %s: the Allow header lists the method that was refused", tc.method, tc.path)
			}
			// Every method listed is really taken: it reaches the endpoint.
			clean := strings.ReplaceAll(tc.path, "%2E%2E", "routes-x")
			for _, m := range strings.Split(tc.allow, ", ") {
				if got := hh.do(call{method: m, path: clean}); got.status == 405 || (got.status == 404 && got.str("description") != "" && strings.Contains(got.str("description"), "not an endpoint")) {
					t.Errorf("%s %s is listed in Allow but answered %s", m, clean, got)
				}
			}
		})
	}
}
