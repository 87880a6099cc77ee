package broker_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/internal/broker/osb"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// The requests real OSB platforms send, read from their sources
// (docs/broker.md "Platforms": the version header, the originating
// identity, the context and which calls carry accepts_incomplete=true).
// Each platform drives the synchronous test plan through its whole life
// with exactly those headers and bodies.

// platform is what one OSB platform sends.
type platform struct {
	// version is X-Broker-API-Version on the instance and binding calls;
	// catalogVersion on GET /v2/catalog, when it differs.
	version, catalogVersion string
	// identity is X-Broker-API-Originating-Identity: the platform and the
	// JSON it encodes; empty when the platform sends none.
	identity, identityJSON string
	// identityOnCatalog sends the identity on the catalog call too.
	identityOnCatalog bool
	// extra are other headers the platform sends on every call.
	extra map[string]string
	// org and space are the top-level organization_guid and space_guid.
	org, space string
	// context is the provision context (the update's and bind's unless
	// updateContext / bindContext say otherwise); nil: none.
	context, updateContext, bindContext obj
	// bindExtra are more top-level bind fields (app_guid, bind_resource).
	bindExtra obj
	// async: accepts_incomplete=true on provision, update and
	// deprovision; asyncBindings on bind and unbind.
	async, asyncBindings bool
	// updates and fetchesBindings: the platform sends these calls.
	updates, fetchesBindings bool
}

// platforms are the platforms of docs/broker.md, as their sources send.
var platforms = map[string]platform{
	// Cloud Foundry's Cloud Controller (v3 API).
	"CloudFoundry": {
		version: "2.15", identity: "cloudfoundry", identityJSON: `{"user_id":"5a6d3c8e-2b0f-4c39-9d62-7f1e0b4a8c21"}`, identityOnCatalog: true,
		extra: map[string]string{"Accept": "application/json", "X-Api-Info-Location": "api.cf.example.com/v2/info", "X-VCAP-Request-ID": "cc-req-1"},
		org:   "org-guid-1", space: "space-guid-1",
		context: obj{"platform": "cloudfoundry", "organization_guid": "org-guid-1", "space_guid": "space-guid-1",
			"organization_name": "acme", "space_name": "dev", "organization_annotations": obj{}, "space_annotations": obj{},
			"instance_name": "my-db", "instance_annotations": obj{}},
		updateContext: obj{"platform": "cloudfoundry", "organization_guid": "org-guid-1", "space_guid": "space-guid-1",
			"organization_name": "acme", "space_name": "dev", "organization_annotations": obj{}, "space_annotations": obj{},
			"instance_name": "my-db"},
		bindContext: obj{"platform": "cloudfoundry", "organization_guid": "org-guid-1", "space_guid": "space-guid-1",
			"organization_name": "acme", "space_name": "dev", "organization_annotations": obj{}, "space_annotations": obj{}},
		bindExtra: obj{"app_guid": "app-guid-1", "bind_resource": obj{"app_guid": "app-guid-1", "space_guid": "space-guid-1", "app_annotations": obj{}}},
		async:     true, asyncBindings: true, updates: true, fetchesBindings: true,
	},
	// Kubernetes service-catalog's controller (its client library at
	// its latest version; asynchronous bindings are an alpha gate, off).
	"ServiceCatalog": {
		version: "2.14", identity: "kubernetes", identityJSON: `{"username":"alice","uid":"1001","groups":["devs","system:authenticated"],"extra":{"scopes":["a"]}}`,
		org: "cluster-1", space: "ns-uid-1",
		context:   obj{"platform": "kubernetes", "namespace": "team-a", "clusterid": "cluster-1", "instance_name": "my-db"},
		bindExtra: obj{"app_guid": "ns-uid-1", "bind_resource": obj{"app_guid": "ns-uid-1"}},
		async:     true, updates: true,
	},
	// SAP Service Manager as a platform (its source, and what a logging
	// proxy saw it send): the catalog at 2.14, its own calls through the
	// client library it pins, at 2.13; accepts_incomplete on every
	// lifecycle call.
	"ServiceManager": {
		version: "2.13", catalogVersion: "2.14", identity: "service-manager", identityJSON: `{"username":"admin"}`,
		extra: map[string]string{"X-Correlationid": "sm-corr-1"},
		org:   "-", space: "-",
		context: obj{"platform": "service-manager", "instance_name": "my-db"},
		async:   true, asyncBindings: true, updates: true, fetchesBindings: true,
	},
	// The eden CLI: placeholders, no identity, no context.
	"Eden": {
		version: "2.13", extra: map[string]string{"Content-Type": "application/json"},
		org: "eden-unknown-guid", space: "eden-unknown-space", bindExtra: obj{"app_guid": "eden-unknown"},
		async: true,
	},
	// osb-checker (Go): 2.14, no identity, no context.
	"OSBChecker": {version: "2.14", org: "org-guid-here", space: "space-guid-here", async: true, asyncBindings: true, updates: true, fetchesBindings: true},
}

// headers returns the platform's headers for one call.
func (p platform) headers(catalog bool) map[string]string {
	h := map[string]string{osb.HeaderAPIVersion: p.version, osb.HeaderRequestIdentity: "", "Content-Type": ""}
	if catalog && p.catalogVersion != "" {
		h[osb.HeaderAPIVersion] = p.catalogVersion
	}
	if p.identity != "" && (!catalog || p.identityOnCatalog) {
		h[osb.HeaderOriginatingIdentity] = p.identity + " " + base64.StdEncoding.EncodeToString([]byte(p.identityJSON))
	}
	for k, v := range p.extra {
		h[k] = v
	}
	return h
}

// query adds accepts_incomplete=true when async.
func query(q string, async bool) string {
	if !async {
		return q
	}
	if q == "" {
		return "accepts_incomplete=true"
	}
	return q + "&accepts_incomplete=true"
}

// TestPlatformRequests runs the synchronous test plan through catalog,
// provision, update, bind, fetch binding, unbind and deprovision as each
// platform sends them, and checks what the broker records: the context as
// sent and the originating identity.
func TestPlatformRequests(t *testing.T) {
	b := setup(t)
	for name, p := range platforms {
		t.Run(name, func(t *testing.T) {
			hh := h{t: t, base: b.url}
			id := "platform-" + strings.ToLower(name)
			bid := id + "-binding"
			send := func(c call, catalog bool) reply { c.header = p.headers(catalog); return hh.do(c) }
			// awaitOp polls last_operation as the platform does after a
			// 202 (with the operation it was given).
			awaitOp := func(path string, r reply) {
				if r.status != http.StatusAccepted {
					return
				}
				poll(t, b.url, call{method: "GET", path: path + "/last_operation", query: "operation=" + r.str("operation"), header: p.headers(false)},
					codeTimeout, name+" "+path+" "+r.str("operation"), func(r reply) bool {
						return r.status == http.StatusGone || r.str("state") == "succeeded"
					})
			}

			r := hh.expect(send(call{method: "GET", path: "/v2/catalog"}, true), 200, "catalog")
			if len(r.body["services"].([]any)) == 0 {
				t.Fatalf("empty catalog: %s", r)
			}
			body := obj{"service_id": "svc-sync", "plan_id": planSmall, "organization_guid": p.org, "space_guid": p.space, "parameters": obj{"size": 1}}
			if p.context != nil {
				body["context"] = p.context
			}
			r = send(call{method: "PUT", path: instancePath(id), query: query("", p.async), body: body}, false)
			if r.status != 201 && r.status != 202 {
				t.Fatalf("provision: %s", r)
			}
			awaitOp(instancePath(id), r)
			inst := instance(t, id)
			if p.identity != "" {
				if got, want := inst.Annotations[sf.AnnotationOriginatingIdentity], p.identity+" "+p.identityJSON; got != want {
					t.Errorf("originating identity recorded as %q, want %q", got, want)
				}
			}
			if p.context != nil {
				var got map[string]any
				if inst.Spec.Context == nil || json.Unmarshal(inst.Spec.Context.Raw, &got) != nil || got["platform"] != p.context["platform"] || len(got) != len(p.context) {
					t.Errorf("context recorded as %v, want %v", inst.Spec.Context, p.context)
				}
			}
			if inst.Spec.OrganizationGUID != p.org || inst.Spec.SpaceGUID != p.space {
				t.Errorf("organization and space recorded as %q, %q", inst.Spec.OrganizationGUID, inst.Spec.SpaceGUID)
			}

			if p.updates {
				body := obj{"service_id": "svc-sync", "plan_id": planSmall, "parameters": obj{"size": 2},
					"previous_values": obj{"service_id": "svc-sync", "plan_id": planSmall, "organization_id": p.org, "space_id": p.space}}
				if c := p.updateContext; c != nil {
					body["context"] = c
				} else if p.context != nil {
					body["context"] = p.context
				}
				r = send(call{method: "PATCH", path: instancePath(id), query: query("", p.async), body: body}, false)
				if r.status != 200 && r.status != 202 {
					t.Fatalf("update: %s", r)
				}
				awaitOp(instancePath(id), r)
			}

			body = obj{"service_id": "svc-sync", "plan_id": planSmall}
			for k, v := range p.bindExtra {
				body[k] = v
			}
			if c := p.bindContext; c != nil {
				body["context"] = c
			} else if p.context != nil {
				body["context"] = p.context
			}
			r = send(call{method: "PUT", path: bindingPath(id, bid), query: query("", p.asyncBindings), body: body}, false)
			if r.status != 201 && r.status != 202 {
				t.Fatalf("bind: %s", r)
			}
			awaitOp(bindingPath(id, bid), r)
			if p.fetchesBindings {
				r = hh.expect(send(call{method: "GET", path: bindingPath(id, bid)}, false), 200, "fetch binding")
				if field(r.body, "credentials", "username") != "user-"+bid {
					t.Errorf("fetched binding: %s", r)
				}
			}
			del := "service_id=svc-sync&plan_id=" + planSmall
			r = send(call{method: "DELETE", path: bindingPath(id, bid), query: query(del, p.asyncBindings)}, false)
			if r.status != 200 && r.status != 202 {
				t.Fatalf("unbind: %s", r)
			}
			awaitOp(bindingPath(id, bid), r)
			r = send(call{method: "DELETE", path: instancePath(id), query: query(del, p.async)}, false)
			if r.status != 200 && r.status != 202 {
				t.Fatalf("deprovision: %s", r)
			}
			awaitOp(instancePath(id), r)
		})
	}
}

// edenCatalog is what eden decodes a catalog answer into, whatever its
// status: it never looks at the status code, and an empty "services"
// prints an empty table and exits 0.
type edenCatalog struct {
	Services []struct {
		ID    string `json:"id"`
		Name  string `json:"name"`
		Plans []struct {
			ID          string `json:"id"`
			Name        string `json:"name"`
			Free        *bool  `json:"free"`
			Description string `json:"description"`
		} `json:"plans"`
	} `json:"services"`
}

// TestRefusedCatalogIsNoCatalog checks that a catalog request refused for
// its credentials or its version cannot be read as an empty catalog by a
// client that decodes the body without looking at the status (eden): the
// body's "services" is the description, a string, so the decoding fails
// (eden prints the decode error and exits 1; before issue #33 it printed
// an empty table and exited 0). Clients that read the error see the
// description.
func TestRefusedCatalogIsNoCatalog(t *testing.T) {
	b := setup(t)
	for name, c := range map[string]call{
		"WrongPassword": {auth: [2]string{testUser, "wrong"}, header: map[string]string{osb.HeaderAPIVersion: "2.13"}},
		"OldVersion":    {header: map[string]string{osb.HeaderAPIVersion: "2.10"}},
		"NoVersion":     {header: map[string]string{osb.HeaderAPIVersion: ""}},
	} {
		t.Run(name, func(t *testing.T) {
			c.method, c.path = "GET", "/v2/catalog"
			c.header["Content-Type"] = "application/json"
			r := do(t, b.url, c)
			if r.status < 400 || r.str("description") == "" {
				t.Fatalf("refused catalog answered %s, want 4xx with a description", r)
			}
			var cat edenCatalog
			if err := json.Unmarshal(r.raw, &cat); err == nil {
				t.Errorf("eden decodes the refusal %s as a catalog of %d services", r, len(cat.Services))
			}
			if !strings.Contains(r.str("services"), r.str("description")) {
				t.Errorf("services %q does not say why: %s", r.str("services"), r)
			}
		})
	}
}
