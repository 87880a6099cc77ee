package broker_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// endpointCase is one row of TestEndpointStatusCodes: run brings the
// broker into a state and sends the request under test; the reply must
// have status want and pass check.
type endpointCase struct {
	reason string
	want   int
	run    func(h h, id string) reply
	check  func(t *testing.T, r reply, id string)
}

// wantError checks an OSB error body: the error code (empty: none) and a
// description.
func wantError(code string) func(t *testing.T, r reply, id string) {
	return func(t *testing.T, r reply, _ string) {
		t.Helper()
		if got := r.str("error"); got != code {
			t.Errorf("error = %q, want %q (body %s)", got, code, r.raw)
		}
		if r.str("description") == "" {
			t.Errorf("error body without a description: %s", r.raw)
		}
	}
}

// wantDescription checks an OSB error body without error code whose
// description contains text.
func wantDescription(text string) func(t *testing.T, r reply, id string) {
	return func(t *testing.T, r reply, _ string) {
		t.Helper()
		if r.str("error") != "" {
			t.Errorf("error = %q, want none (body %s)", r.str("error"), r.raw)
		}
		if d := r.str("description"); !strings.Contains(d, text) {
			t.Errorf("description %q does not contain %q", d, text)
		}
	}
}

// wantBody checks the whole body.
func wantBody(want map[string]any) func(t *testing.T, r reply, id string) {
	return func(t *testing.T, r reply, _ string) {
		t.Helper()
		got := r.body
		if got == nil {
			got = map[string]any{}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("body -want, +got:\n%s", diff)
		}
	}
}

func wantOperation(op string) func(t *testing.T, r reply, id string) {
	return func(t *testing.T, r reply, _ string) {
		t.Helper()
		if got := r.str("operation"); got != op {
			t.Errorf("operation = %q, want %q (body %s)", got, op, r.raw)
		}
		if r.body["credentials"] != nil {
			t.Errorf("202 with credentials: %s", r.raw)
		}
	}
}

func wantState(state string) func(t *testing.T, r reply, id string) {
	return func(t *testing.T, r reply, _ string) {
		t.Helper()
		if got := r.str("state"); got != state {
			t.Errorf("state = %q, want %q (body %s)", got, state, r.raw)
		}
	}
}

func wantCredentials(t *testing.T, r reply, _ string) {
	t.Helper()
	if field(r.body, "credentials", "username") == nil || field(r.body, "credentials", "password") == nil {
		t.Errorf("no credentials: %s", r.raw)
	}
	if field(r.body, "endpoints", 0, "host") != "db.example.com" {
		t.Errorf("endpoints not passed on: %s", r.raw)
	}
	if _, ok := r.body["secretField"]; ok {
		t.Errorf("a field that is not OSB's was passed on: %s", r.raw)
	}
}

// TestEndpointStatusCodes drives every endpoint to every status code OSB
// v2.17 lists for it (and the ones the broker adds: 404 for an unknown
// instance on update and bind, 500/504 for synchronous failures and
// timeouts), with real HTTP requests against a broker backed by real API
// servers and the test provisioner.
func TestEndpointStatusCodes(t *testing.T) {
	b := setup(t)
	small := obj{"size": 2}
	cases := map[string]endpointCase{
		// GET /v2/catalog
		"Catalog/200": {
			reason: "The catalog lists every served offering with its plans, schemas and maintenance info.",
			want:   200,
			run:    func(h h, _ string) reply { return h.do(call{method: "GET", path: "/v2/catalog"}) },
			check: func(t *testing.T, r reply, _ string) {
				var names []string
				var sync any
				for _, s := range r.body["services"].([]any) {
					name := s.(map[string]any)["name"].(string)
					names = append(names, name)
					if name == "test-sync" {
						sync = s
					}
				}
				if diff := cmp.Diff([]string{"cache", "dedicated-cluster", "kubernetes-namespace", "test-async", "test-plain", "test-sync"}, names); diff != "" {
					t.Errorf("services -want, +got:\n%s", diff)
				}
				if r.header.Get("ETag") == "" {
					t.Error("no ETag")
				}
				if got := field(sync, "plans", 2, "maintenance_info", "version"); got != "1.0.0" {
					t.Errorf("plan small maintenance_info.version = %v", got)
				}
				if got := field(sync, "plans", 2, "schemas", "service_instance", "create", "parameters", "$schema"); got != "http://json-schema.org/draft-04/schema#" {
					t.Errorf("plan small create schema $schema = %v", got)
				}
				if got, ok := field(sync, "plan_updateable").(bool); !ok || !got {
					t.Errorf("plan_updateable = %v", field(sync, "plan_updateable"))
				}
			},
		},
		"Catalog/304": {
			reason: "A platform that sends the catalog's ETag gets 304 Not Modified.",
			want:   304,
			run: func(h h, _ string) reply {
				etag := h.do(call{method: "GET", path: "/v2/catalog"}).header.Get("ETag")
				return h.do(call{method: "GET", path: "/v2/catalog", header: map[string]string{"If-None-Match": etag}})
			},
		},

		// PUT /v2/service_instances/:id
		"Provision/201Sync": {
			reason: "A synchronous plan waits for the provisioner and answers 201 with the dashboard URL it reported.",
			want:   201,
			run:    func(h h, id string) reply { return h.provision(id, planSmall, small, false) },
			check: func(t *testing.T, r reply, id string) {
				wantBody(obj{"dashboard_url": "https://dashboard.example.com/" + id})(t, r, id)
			},
		},
		"Provision/200IdenticalReput": {
			reason: "Re-sending the request for a provisioned instance with identical attributes is 200.",
			want:   200,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, small)
				return h.provision(id, planSmall, small, false)
			},
			check: func(t *testing.T, r reply, id string) {
				wantBody(obj{"dashboard_url": "https://dashboard.example.com/" + id})(t, r, id)
			},
		},
		"Provision/202Async": {
			reason: "An asynchronous plan answers 202 with the operation and the dashboard URL of its template.",
			want:   202,
			run:    func(h h, id string) reply { return h.provision(id, planAsync, nil, true) },
			check: func(t *testing.T, r reply, id string) {
				wantBody(obj{"operation": "create-1", "dashboard_url": "https://dash.example.com/" + id})(t, r, id)
			},
		},
		"Provision/202ReputInProgress": {
			reason: "A re-sent PUT while provisioning runs gets 202 with the same operation, not 200.",
			want:   202,
			run: func(h h, id string) reply {
				h.expect(h.provision(id, planAsync, obj{"hold": true}, true), 202, "first PUT")
				return h.provision(id, planAsync, obj{"hold": true}, true)
			},
			check: wantOperation("create-1"),
		},
		"Provision/202SyncPlanPastTimeout": {
			reason: "A synchronous plan that does not finish within the sync timeout answers 202 when the platform accepts it.",
			want:   202,
			run:    func(h h, id string) reply { return h.provision(id, planSmall, obj{"hold": true}, true) },
			check:  wantOperation("create-1"),
		},
		"Provision/400MalformedJSON": {
			reason: "A body that is not JSON is 400.",
			want:   400,
			run: func(h h, id string) reply {
				return h.do(call{method: "PUT", path: instancePath(id), body: `{"service_id":`})
			},
			check: wantDescription("not valid JSON"),
		},
		"Provision/400MissingServiceID": {
			reason: "service_id is required.",
			want:   400,
			run: func(h h, id string) reply {
				body := provisionBody(planSmall, nil)
				delete(body, "service_id")
				return h.do(call{method: "PUT", path: instancePath(id), body: body})
			},
			check: wantDescription("service_id"),
		},
		"Provision/400MissingOrganizationGUID": {
			reason: "organization_guid is still REQUIRED in v2.17.",
			want:   400,
			run: func(h h, id string) reply {
				body := provisionBody(planSmall, nil)
				delete(body, "organization_guid")
				return h.do(call{method: "PUT", path: instancePath(id), body: body})
			},
			check: wantDescription("organization_guid"),
		},
		"Provision/400UnknownPlan": {
			reason: "plan_id must be in the catalog.",
			want:   400,
			run: func(h h, id string) reply {
				body := provisionBody(planSmall, nil)
				body["plan_id"] = "no-such-plan"
				return h.do(call{method: "PUT", path: instancePath(id), body: body})
			},
			check: wantDescription("plan_id"),
		},
		"Provision/400PlanOfAnotherService": {
			reason: "plan_id must belong to service_id.",
			want:   400,
			run: func(h h, id string) reply {
				body := provisionBody(planSmall, nil)
				body["plan_id"] = planAsync
				return h.do(call{method: "PUT", path: instancePath(id), body: body})
			},
			check: wantDescription("not a plan of service offering"),
		},
		"Provision/400SchemaViolation": {
			reason: "Parameters are validated against the plan's create schema.",
			want:   400,
			run:    func(h h, id string) reply { return h.provision(id, planSmall, obj{"size": "big"}, false) },
			check:  wantDescription("/size"),
		},
		"Provision/400ParametersNotObject": {
			reason: "parameters must be an object.",
			want:   400,
			run: func(h h, id string) reply {
				body := provisionBody(planSmall, nil)
				body["parameters"] = []int{1}
				return h.do(call{method: "PUT", path: instancePath(id), body: body})
			},
			check: wantDescription("parameters must be a JSON object"),
		},
		"Provision/400AcceptsIncompleteNotBoolean": {
			reason: "accepts_incomplete is a boolean.",
			want:   400,
			run: func(h h, id string) reply {
				return h.do(call{method: "PUT", path: instancePath(id), query: "accepts_incomplete=maybe", body: provisionBody(planSmall, nil)})
			},
			check: wantDescription("accepts_incomplete"),
		},
		"Provision/400IdentityPlatformMismatch": {
			reason: "The originating identity's platform must equal context.platform.",
			want:   400,
			run: func(h h, id string) reply {
				return h.do(call{method: "PUT", path: instancePath(id), body: provisionBody(planSmall, nil),
					header: map[string]string{"X-Broker-API-Originating-Identity": identityHeader("kubernetes", "u")}})
			},
			check: wantDescription("context.platform"),
		},
		"Provision/409DifferentAttributes": {
			reason: "The same id with different attributes is a conflict.",
			want:   409,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, small)
				return h.provision(id, planSmall, obj{"size": 3}, false)
			},
			check: wantDescription("different attributes"),
		},
		"Provision/422AsyncRequired": {
			reason: "An asynchronous plan without accepts_incomplete=true is 422 AsyncRequired.",
			want:   422,
			run:    func(h h, id string) reply { return h.provision(id, planAsync, nil, false) },
			check:  wantError("AsyncRequired"),
		},
		"Provision/422MaintenanceInfoConflict": {
			reason: "A maintenance_info.version other than the catalog's is 422 MaintenanceInfoConflict.",
			want:   422,
			run: func(h h, id string) reply {
				body := provisionBody(planSmall, nil)
				body["maintenance_info"] = obj{"version": "0.9.0"}
				return h.do(call{method: "PUT", path: instancePath(id), body: body})
			},
			check: wantError("MaintenanceInfoConflict"),
		},
		"Provision/201EmptyMaintenanceInfo": {
			reason: "An empty maintenance_info object (the OSB checker's client sends one) is the same as none: the plan's version is recorded.",
			want:   201,
			run: func(h h, id string) reply {
				body := provisionBody(planSmall, nil)
				body["maintenance_info"] = obj{}
				return h.do(call{method: "PUT", path: instancePath(id), body: body})
			},
			check: func(t *testing.T, _ reply, id string) {
				if got := instance(t, id).Annotations[sf.AnnotationMaintenanceVersion]; got != "1.0.0" {
					t.Errorf("maintenance version %q, want the plan's 1.0.0", got)
				}
			},
		},
		"Provision/400EmptyMaintenanceVersion": {
			reason: "A maintenance_info with fields but no version is still 400: only the empty object counts as absent.",
			want:   400,
			run: func(h h, id string) reply {
				body := provisionBody(planSmall, nil)
				body["maintenance_info"] = obj{"description": "no version"}
				return h.do(call{method: "PUT", path: instancePath(id), body: body})
			},
			check: wantDescription("maintenance_info.version"),
		},
		"Provision/422ConcurrencyWhileDeleting": {
			reason: "A PUT for an instance being deleted is 422 ConcurrencyError.",
			want:   422,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, obj{"holdDelete": true})
				h.expect(h.do(call{method: "DELETE", path: instancePath(id), query: deleteQuery(planAsync, true)}), 202, "delete")
				return h.provision(id, planAsync, obj{"holdDelete": true}, true)
			},
			check: wantError("ConcurrencyError"),
		},
		"Provision/201ReuseAfterDelete": {
			reason: "Once a synchronous deprovision finished, the id provisions anew at once (not 422 for the tombstone's lifetime).",
			want:   201,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, nil)
				h.expect(h.do(call{method: "DELETE", path: instancePath(id), query: deleteQuery(planSmall, false)}), 200, "deprovision")
				return h.provision(id, planSmall, small, false)
			},
			check: func(t *testing.T, r reply, id string) {
				wantBody(obj{"dashboard_url": "https://dashboard.example.com/" + id})(t, r, id)
				inst := instance(t, id)
				if inst.DeletionTimestamp != nil || inst.Annotations[sf.AnnotationOperation] != "create-3" || string(inst.Spec.Parameters.Raw) != `{"size":2}` {
					t.Errorf("the stored instance is not the new one of create-3 with the new parameters: deletion %v, annotations %v, parameters %s",
						inst.DeletionTimestamp, inst.Annotations, inst.Spec.Parameters.Raw)
				}
			},
		},
		"Provision/202ReuseAfterAsyncDelete": {
			reason: "Once an asynchronous deprovision reported succeeded, the id provisions anew at once; the old delete's poll then says 410 Gone, the new create runs to succeeded.",
			want:   202,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				del := h.expect(h.do(call{method: "DELETE", path: instancePath(id), query: deleteQuery(planAsync, true)}), 202, "deprovision")
				h.awaitInstance(id, del.str("operation"), "succeeded")
				r := h.provision(id, planAsync, nil, true)
				if r.status == 202 {
					old := h.do(call{method: "GET", path: instancePath(id) + "/last_operation", query: "operation=" + del.str("operation")})
					h.expect(old, 410, "poll of the finished delete "+del.str("operation")+" after the id was reused")
					h.awaitInstance(id, r.str("operation"), "succeeded")
				}
				return r
			},
			check: wantOperation("create-3"),
		},
		"Provision/504SyncPastTimeout": {
			reason: "A synchronous plan past the sync timeout, with a platform that does not accept 202, is 504.",
			want:   504,
			run:    func(h h, id string) reply { return h.provision(id, planSmall, obj{"hold": true}, false) },
			check:  wantDescription("did not finish"),
		},
		"Provision/500SyncFailed": {
			reason: "A synchronous provisioning that fails is 500 with the provisioner's message.",
			want:   500,
			run:    func(h h, id string) reply { return h.provision(id, planSmall, obj{"fail": true}, false) },
			check:  wantDescription("failed as the test asked"),
		},

		// GET /v2/service_instances/:id
		"FetchInstance/200": {
			reason: "A provisioned instance is fetched with its ids, parameters, dashboard URL and maintenance info.",
			want:   200,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, small)
				return h.do(call{method: "GET", path: instancePath(id), query: "service_id=svc-sync&plan_id=" + planSmall})
			},
			check: func(t *testing.T, r reply, id string) {
				wantBody(obj{
					"service_id": "svc-sync", "plan_id": planSmall, "parameters": obj{"size": 2.0},
					"dashboard_url":    "https://dashboard.example.com/" + id,
					"maintenance_info": obj{"version": "1.0.0", "description": "first version"},
				})(t, r, id)
			},
		},
		"FetchInstance/404Missing": {
			reason: "An unknown instance is 404.",
			want:   404,
			run:    func(h h, id string) reply { return h.do(call{method: "GET", path: instancePath(id)}) },
		},
		"FetchInstance/404WhileProvisioning": {
			reason: "An instance still being provisioned is 404.",
			want:   404,
			run: func(h h, id string) reply {
				h.expect(h.provision(id, planAsync, obj{"hold": true}, true), 202, "provision")
				return h.do(call{method: "GET", path: instancePath(id)})
			},
		},
		"FetchInstance/422WhileUpdating": {
			reason: "An instance being updated is 422 ConcurrencyError.",
			want:   422,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				h.expect(h.do(call{method: "PATCH", path: instancePath(id), query: "accepts_incomplete=true",
					body: obj{"service_id": "svc-async", "parameters": obj{"hold": true}}}), 202, "update")
				return h.do(call{method: "GET", path: instancePath(id)})
			},
			check: wantError("ConcurrencyError"),
		},
		"FetchInstance/400NotRetrievable": {
			reason: "An offering without instances_retrievable cannot be fetched.",
			want:   400,
			run: func(h h, id string) reply {
				h.ready(id, planPlain, nil)
				return h.do(call{method: "GET", path: instancePath(id)})
			},
			check: wantDescription("instances_retrievable"),
		},
		"FetchInstance/400EmptyHint": {
			reason: "plan_id, when present, must not be empty.",
			want:   400,
			run: func(h h, id string) reply {
				return h.do(call{method: "GET", path: instancePath(id), query: "plan_id="})
			},
			check: wantDescription("plan_id"),
		},

		// PATCH /v2/service_instances/:id
		"Update/200Sync": {
			reason: "A synchronous update answers 200 once applied; parameters merge into the stored ones.",
			want:   200,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, obj{"size": 2, "failDelete": false})
				r := h.do(call{method: "PATCH", path: instancePath(id), body: obj{"service_id": "svc-sync", "parameters": obj{"size": 5, "failDelete": nil}}})
				if got := h.do(call{method: "GET", path: instancePath(id)}).body["parameters"]; !cmp.Equal(got, any(obj{"size": 5.0})) {
					h.t.Errorf("parameters after the update = %v, want {size: 5}", got)
				}
				return r
			},
			check: func(t *testing.T, r reply, id string) {
				wantBody(obj{"dashboard_url": "https://dashboard.example.com/" + id})(t, r, id)
			},
		},
		"Update/200NoChange": {
			reason: "An update that changes nothing is 200 {} at once.",
			want:   200,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, small)
				return h.do(call{method: "PATCH", path: instancePath(id), body: obj{"service_id": "svc-sync"}})
			},
			check: wantBody(obj{}),
		},
		"Update/200PlanChange": {
			reason: "A plan change to a plan that lists the current one as predecessor is applied.",
			want:   200,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, small)
				r := h.do(call{method: "PATCH", path: instancePath(id), body: obj{"service_id": "svc-sync", "plan_id": planLarge, "previous_values": obj{"plan_id": planSmall}}})
				got := h.do(call{method: "GET", path: instancePath(id)})
				if got.str("plan_id") != planLarge || field(got.body, "maintenance_info", "version") != "2.0.0" {
					h.t.Errorf("after the plan change: %s", got)
				}
				return r
			},
		},
		"Update/202Async": {
			reason: "An asynchronous update is 202 with a new operation.",
			want:   202,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				return h.do(call{method: "PATCH", path: instancePath(id), query: "accepts_incomplete=true", body: obj{"service_id": "svc-async", "parameters": obj{"x": 1}}})
			},
			check: wantOperation("update-2"),
		},
		"Update/202ResentInProgress": {
			reason: "A re-sent PATCH while the update runs gets 202 with the same operation.",
			want:   202,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				req := call{method: "PATCH", path: instancePath(id), query: "accepts_incomplete=true", body: obj{"service_id": "svc-async", "parameters": obj{"hold": true}}}
				h.expect(h.do(req), 202, "first PATCH")
				return h.do(req)
			},
			check: wantOperation("update-2"),
		},
		"Update/202ContextOnly": {
			reason: "An offering with allow_context_updates accepts an update of the context alone.",
			want:   202,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				return h.do(call{method: "PATCH", path: instancePath(id), query: "accepts_incomplete=true",
					body: obj{"service_id": "svc-async", "context": obj{"platform": "cloudfoundry", "instance_name": "renamed"}}})
			},
			check: wantOperation("update-2"),
		},
		"Update/400Malformed": {
			reason: "A body that is not a JSON object is 400.",
			want:   400,
			run:    func(h h, id string) reply { return h.do(call{method: "PATCH", path: instancePath(id), body: `[]`}) },
			check:  wantDescription("JSON object"),
		},
		"Update/400MissingServiceID": {
			reason: "service_id is required.",
			want:   400,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, nil)
				return h.do(call{method: "PATCH", path: instancePath(id), body: obj{"parameters": obj{"size": 3}}})
			},
			check: wantDescription("service_id"),
		},
		"Update/400SchemaViolation": {
			reason: "Parameters are validated against the plan's update schema.",
			want:   400,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, nil)
				return h.do(call{method: "PATCH", path: instancePath(id), body: obj{"service_id": "svc-sync", "parameters": obj{"size": 11}}})
			},
			check: wantDescription("/size"),
		},
		"Update/400UnknownPlan": {
			reason: "plan_id must be in the catalog.",
			want:   400,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, nil)
				return h.do(call{method: "PATCH", path: instancePath(id), body: obj{"service_id": "svc-sync", "plan_id": "nope"}})
			},
			check: wantDescription("plan_id"),
		},
		"Update/404UnknownInstance": {
			reason: "Updating an instance that does not exist is 404.",
			want:   404,
			run: func(h h, id string) reply {
				return h.do(call{method: "PATCH", path: instancePath(id), body: obj{"service_id": "svc-sync"}})
			},
		},
		"Update/422AsyncRequired": {
			reason: "An asynchronous plan without accepts_incomplete=true is 422 AsyncRequired.",
			want:   422,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				return h.do(call{method: "PATCH", path: instancePath(id), body: obj{"service_id": "svc-async", "parameters": obj{"x": 1}}})
			},
			check: wantError("AsyncRequired"),
		},
		"Update/422MaintenanceInfoConflict": {
			reason: "A maintenance_info.version other than the catalog's is 422 MaintenanceInfoConflict.",
			want:   422,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, nil)
				return h.do(call{method: "PATCH", path: instancePath(id), body: obj{"service_id": "svc-sync", "maintenance_info": obj{"version": "9.9.9"}}})
			},
			check: wantError("MaintenanceInfoConflict"),
		},
		"Update/200EmptyMaintenanceInfo": {
			reason: "An empty maintenance_info object in an update is the same as none: nothing changes.",
			want:   200,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, nil)
				return h.do(call{method: "PATCH", path: instancePath(id), body: obj{"service_id": "svc-sync", "maintenance_info": obj{}}})
			},
			check: wantBody(obj{}),
		},
		"Update/422PlanChangeNotAllowed": {
			reason: "An offering without plan_updateable refuses plan changes with 422.",
			want:   422,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				return h.do(call{method: "PATCH", path: instancePath(id), query: "accepts_incomplete=true", body: obj{"service_id": "svc-async", "plan_id": planOther}})
			},
			check: wantDescription("does not allow plan changes"),
		},
		"Update/422NotAPredecessor": {
			reason: "A plan that lists update_predecessors accepts only instances of those plans.",
			want:   422,
			run: func(h h, id string) reply {
				h.ready(id, planApp, nil)
				return h.do(call{method: "PATCH", path: instancePath(id), body: obj{"service_id": "svc-sync", "plan_id": planLarge}})
			},
			check: wantDescription("cannot change to plan"),
		},
		"Update/422AnotherUpdateInProgress": {
			reason: "A different update while one runs is 422 ConcurrencyError.",
			want:   422,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				h.expect(h.do(call{method: "PATCH", path: instancePath(id), query: "accepts_incomplete=true", body: obj{"service_id": "svc-async", "parameters": obj{"hold": true}}}), 202, "first update")
				return h.do(call{method: "PATCH", path: instancePath(id), query: "accepts_incomplete=true", body: obj{"service_id": "svc-async", "parameters": obj{"other": 1}}})
			},
			check: wantError("ConcurrencyError"),
		},
		"Update/422ContextOnlyNotAllowed": {
			reason: "An offering without allow_context_updates refuses an update of the context alone.",
			want:   422,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, nil)
				return h.do(call{method: "PATCH", path: instancePath(id), body: obj{"service_id": "svc-sync", "context": obj{"platform": "cloudfoundry", "instance_name": "renamed"}}})
			},
			check: wantDescription("context alone"),
		},

		// DELETE /v2/service_instances/:id
		"Deprovision/200Sync": {
			reason: "A synchronous deprovision waits for the provisioner and answers 200 {}.",
			want:   200,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, nil)
				return h.do(call{method: "DELETE", path: instancePath(id), query: deleteQuery(planSmall, false)})
			},
			check: wantBody(obj{}),
		},
		"Deprovision/202Async": {
			reason: "An asynchronous deprovision is 202 with the delete operation.",
			want:   202,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				return h.do(call{method: "DELETE", path: instancePath(id), query: deleteQuery(planAsync, true)})
			},
			check: wantOperation("delete-2"),
		},
		"Deprovision/202ResentInProgress": {
			reason: "A re-sent DELETE while the deletion runs gets 202 with the same operation.",
			want:   202,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, obj{"holdDelete": true})
				h.expect(h.do(call{method: "DELETE", path: instancePath(id), query: deleteQuery(planAsync, true)}), 202, "first DELETE")
				return h.do(call{method: "DELETE", path: instancePath(id), query: deleteQuery(planAsync, true)})
			},
			check: wantOperation("delete-2"),
		},
		"Deprovision/400MissingPlanID": {
			reason: "plan_id is a required query parameter.",
			want:   400,
			run: func(h h, id string) reply {
				return h.do(call{method: "DELETE", path: instancePath(id), query: "service_id=svc-sync"})
			},
			check: wantDescription("plan_id"),
		},
		"Deprovision/410Missing": {
			reason: "Deleting an instance that does not exist is 410 Gone with {}.",
			want:   410,
			run: func(h h, id string) reply {
				return h.do(call{method: "DELETE", path: instancePath(id), query: deleteQuery(planSmall, false)})
			},
			check: wantBody(obj{}),
		},
		"Deprovision/422AsyncRequired": {
			reason: "An asynchronous plan without accepts_incomplete=true is 422 AsyncRequired.",
			want:   422,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				return h.do(call{method: "DELETE", path: instancePath(id), query: deleteQuery(planAsync, false)})
			},
			check: wantError("AsyncRequired"),
		},
		"Deprovision/422BindingInProgress": {
			reason: "While a binding of the instance is being created the deprovision is 422 ConcurrencyError.",
			want:   422,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				h.expect(h.bind(id, "b", planAsync, obj{"hold": true}, true), 202, "bind")
				return h.do(call{method: "DELETE", path: instancePath(id), query: deleteQuery(planAsync, true)})
			},
			check: wantError("ConcurrencyError"),
		},

		// GET /v2/service_instances/:id/last_operation
		"InstanceLastOperation/200InProgress": {
			reason: "A held provisioning reports in progress.",
			want:   200,
			run: func(h h, id string) reply {
				h.expect(h.provision(id, planAsync, obj{"hold": true}, true), 202, "provision")
				return h.do(call{method: "GET", path: instancePath(id) + "/last_operation", query: "operation=create-1&service_id=svc-async&plan_id=" + planAsync})
			},
			check: wantState("in progress"),
		},
		"InstanceLastOperation/200Succeeded": {
			reason: "A finished provisioning reports succeeded with the provisioner's description.",
			want:   200,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				return h.do(call{method: "GET", path: instancePath(id) + "/last_operation", query: "operation=create-1"})
			},
			check: wantBody(obj{"state": "succeeded", "description": "ready"}),
		},
		"InstanceLastOperation/200FailedUpdate": {
			reason: "A failed update reports failed with instance_usable and update_repeatable.",
			want:   200,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				h.expect(h.do(call{method: "PATCH", path: instancePath(id), query: "accepts_incomplete=true", body: obj{"service_id": "svc-async", "parameters": obj{"fail": true}}}), 202, "update")
				return h.awaitInstance(id, "update-2", "failed")
			},
			check: wantBody(obj{"state": "failed", "description": "provisioning failed as the test asked", "instance_usable": true, "update_repeatable": false}),
		},
		"InstanceLastOperation/400UnknownOperation": {
			reason: "An operation id this broker never issued is 400.",
			want:   400,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				return h.do(call{method: "GET", path: instancePath(id) + "/last_operation", query: "operation=bogus"})
			},
			check: wantDescription("operation"),
		},
		"InstanceLastOperation/400EmptyServiceID": {
			reason: "service_id, when present, must not be empty.",
			want:   400,
			run: func(h h, id string) reply {
				return h.do(call{method: "GET", path: instancePath(id) + "/last_operation", query: "service_id="})
			},
		},
		"InstanceLastOperation/404Missing": {
			reason: "Polling an instance that does not exist is 404.",
			want:   404,
			run: func(h h, id string) reply {
				return h.do(call{method: "GET", path: instancePath(id) + "/last_operation", query: "operation=create-1"})
			},
		},
		"InstanceLastOperation/410AfterDelete": {
			reason: "After an asynchronous delete the tombstone reports succeeded, then the poll is 410 Gone.",
			want:   410,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				r := h.expect(h.do(call{method: "DELETE", path: instancePath(id), query: deleteQuery(planAsync, true)}), 202, "delete")
				h.awaitInstance(id, r.str("operation"), "succeeded")
				return poll(h.t, h.base, call{method: "GET", path: instancePath(id) + "/last_operation", query: "operation=" + r.str("operation")},
					30*testTombstoneTTL, "410", func(r reply) bool { return r.status == 410 })
			},
			check: wantBody(obj{}),
		},

		// PUT .../service_bindings/:binding_id
		"Bind/201Sync": {
			reason: "A synchronous bind answers 201 with the credentials and endpoints of the provisioner's Secret, and nothing else from it.",
			want:   201,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, nil)
				return h.bind(id, "b", planSmall, obj{"readOnly": true}, false)
			},
			check: wantCredentials,
		},
		"Bind/200IdenticalReput": {
			reason: "Re-sending an identical bind for a created binding is 200 with the credentials.",
			want:   200,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, nil)
				h.bound(id, "b", planSmall, obj{"readOnly": true})
				return h.bind(id, "b", planSmall, obj{"readOnly": true}, false)
			},
			check: wantCredentials,
		},
		"Bind/201RequiresAppSatisfied": {
			reason: "A plan that requires an application binds when bind_resource.app_guid is sent.",
			want:   201,
			run: func(h h, id string) reply {
				h.ready(id, planApp, nil)
				return h.bind(id, "b", planApp, nil, false)
			},
			check: wantCredentials,
		},
		"Bind/202Async": {
			reason: "An asynchronous bind is 202 with an operation and no credentials.",
			want:   202,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				return h.bind(id, "b", planAsync, nil, true)
			},
			check: wantOperation("create-1"),
		},
		"Bind/202ReputInProgress": {
			reason: "A re-sent bind while binding runs gets 202 with the same operation.",
			want:   202,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				h.expect(h.bind(id, "b", planAsync, obj{"hold": true}, true), 202, "first bind")
				return h.bind(id, "b", planAsync, obj{"hold": true}, true)
			},
			check: wantOperation("create-1"),
		},
		"Bind/400Malformed": {
			reason: "A body that is not JSON is 400.",
			want:   400,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, nil)
				return h.do(call{method: "PUT", path: bindingPath(id, "b"), body: `{"service_id": 1}`})
			},
			check: wantDescription("service_id"),
		},
		"Bind/400MissingPlanID": {
			reason: "plan_id is required.",
			want:   400,
			run: func(h h, id string) reply {
				return h.do(call{method: "PUT", path: bindingPath(id, "b"), body: obj{"service_id": "svc-sync"}})
			},
			check: wantDescription("plan_id"),
		},
		"Bind/400SchemaViolation": {
			reason: "Parameters are validated against the plan's binding schema.",
			want:   400,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, nil)
				return h.bind(id, "b", planSmall, obj{"readOnly": "yes"}, false)
			},
			check: wantDescription("/readOnly"),
		},
		"Bind/400NotBindable": {
			reason: "A plan that is not bindable cannot be bound.",
			want:   400,
			run: func(h h, id string) reply {
				h.ready(id, planPlain, nil)
				return h.bind(id, "b", planPlain, nil, false)
			},
			check: wantDescription("not bindable"),
		},
		"Bind/400NotTheInstancesPlan": {
			reason: "service_id and plan_id must be the instance's.",
			want:   400,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, nil)
				return h.bind(id, "b", planLarge, nil, false)
			},
			check: wantDescription("must be those of the instance"),
		},
		"Bind/404UnknownInstance": {
			reason: "Binding an instance that does not exist is 404.",
			want:   404,
			run:    func(h h, id string) reply { return h.bind(id, "b", planSmall, nil, false) },
		},
		"Bind/409DifferentParameters": {
			reason: "The same binding id with different parameters is a conflict.",
			want:   409,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, nil)
				h.bound(id, "b", planSmall, obj{"readOnly": true})
				return h.bind(id, "b", planSmall, obj{"readOnly": false}, false)
			},
			check: wantDescription("different attributes"),
		},
		"Bind/422RequiresApp": {
			reason: "A plan that requires an application refuses a bind without app_guid with RequiresApp.",
			want:   422,
			run: func(h h, id string) reply {
				h.ready(id, planApp, nil)
				return h.do(call{method: "PUT", path: bindingPath(id, "b"), body: obj{"service_id": "svc-sync", "plan_id": planApp}})
			},
			check: wantError("RequiresApp"),
		},
		"Bind/422InstanceBeingUpdated": {
			reason: "Binding while the instance is updated is 422 ConcurrencyError.",
			want:   422,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				h.expect(h.do(call{method: "PATCH", path: instancePath(id), query: "accepts_incomplete=true", body: obj{"service_id": "svc-async", "parameters": obj{"hold": true}}}), 202, "update")
				return h.bind(id, "b", planAsync, nil, true)
			},
			check: wantError("ConcurrencyError"),
		},
		"Bind/422AsyncRequired": {
			reason: "An asynchronous binding without accepts_incomplete=true is 422 AsyncRequired.",
			want:   422,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				return h.bind(id, "b", planAsync, nil, false)
			},
			check: wantError("AsyncRequired"),
		},
		"Bind/500SyncFailed": {
			reason: "A synchronous bind that fails is 500 with the provisioner's message.",
			want:   500,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, nil)
				return h.bind(id, "b", planSmall, obj{"fail": true}, false)
			},
			check: wantDescription("failed as the test asked"),
		},

		// GET .../service_bindings/:binding_id
		"FetchBinding/200": {
			reason: "A created binding is fetched with its credentials and parameters.",
			want:   200,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				h.bound(id, "b", planAsync, obj{"x": "y"})
				return h.do(call{method: "GET", path: bindingPath(id, "b"), query: "service_id=svc-async&plan_id=" + planAsync})
			},
			check: func(t *testing.T, r reply, id string) {
				wantCredentials(t, r, id)
				if got := field(r.body, "parameters", "x"); got != "y" {
					t.Errorf("parameters.x = %v, want y", got)
				}
			},
		},
		"FetchBinding/404Missing": {
			reason: "An unknown binding is 404.",
			want:   404,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, nil)
				return h.do(call{method: "GET", path: bindingPath(id, "b")})
			},
		},
		"FetchBinding/404WhileBinding": {
			reason: "A binding still being created is 404.",
			want:   404,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				h.expect(h.bind(id, "b", planAsync, obj{"hold": true}, true), 202, "bind")
				return h.do(call{method: "GET", path: bindingPath(id, "b")})
			},
		},

		"Bind/201ReuseAfterUnbind": {
			reason: "Once an unbind finished, the binding id binds anew at once (not 422 for the tombstone's lifetime).",
			want:   201,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, nil)
				h.bound(id, "b", planSmall, nil)
				h.expect(h.do(call{method: "DELETE", path: bindingPath(id, "b"), query: deleteQuery(planSmall, false)}), 200, "unbind")
				return h.bind(id, "b", planSmall, obj{"readOnly": true}, false)
			},
			check: func(t *testing.T, r reply, id string) {
				wantCredentials(t, r, id)
				b := &osbv1alpha1.SFServiceBinding{}
				if err := env.onboarding.Client.Get(context.Background(), sf.BindingKey(id, "b"), b); err != nil {
					t.Fatal(err)
				}
				if b.DeletionTimestamp != nil || b.Annotations[sf.AnnotationOperation] != "create-3" {
					t.Errorf("the stored binding is not the new one of create-3: deletion %v, annotations %v", b.DeletionTimestamp, b.Annotations)
				}
			},
		},
		"Bind/422ConcurrencyWhileUnbinding": {
			reason: "A PUT for a binding whose deletion is still in progress is 422 ConcurrencyError.",
			want:   422,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				h.bound(id, "b", planAsync, obj{"holdDelete": true})
				h.expect(h.do(call{method: "DELETE", path: bindingPath(id, "b"), query: deleteQuery(planAsync, true)}), 202, "unbind")
				return h.bind(id, "b", planAsync, obj{"holdDelete": true}, true)
			},
			check: wantError("ConcurrencyError"),
		},

		// DELETE .../service_bindings/:binding_id
		"Unbind/200Sync": {
			reason: "A synchronous unbind waits and answers 200 {}.",
			want:   200,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, nil)
				h.bound(id, "b", planSmall, nil)
				return h.do(call{method: "DELETE", path: bindingPath(id, "b"), query: deleteQuery(planSmall, false)})
			},
			check: wantBody(obj{}),
		},
		"Unbind/202Async": {
			reason: "An asynchronous unbind is 202 with the delete operation.",
			want:   202,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				h.bound(id, "b", planAsync, nil)
				return h.do(call{method: "DELETE", path: bindingPath(id, "b"), query: deleteQuery(planAsync, true)})
			},
			check: wantOperation("delete-2"),
		},
		"Unbind/400MissingServiceID": {
			reason: "service_id is a required query parameter.",
			want:   400,
			run: func(h h, id string) reply {
				return h.do(call{method: "DELETE", path: bindingPath(id, "b"), query: "plan_id=" + planSmall})
			},
			check: wantDescription("service_id"),
		},
		"Unbind/410Missing": {
			reason: "Unbinding a binding that does not exist is 410 Gone with {}.",
			want:   410,
			run: func(h h, id string) reply {
				h.ready(id, planSmall, nil)
				return h.do(call{method: "DELETE", path: bindingPath(id, "b"), query: deleteQuery(planSmall, false)})
			},
			check: wantBody(obj{}),
		},
		"Unbind/422AsyncRequired": {
			reason: "An asynchronous binding without accepts_incomplete=true is 422 AsyncRequired.",
			want:   422,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				h.bound(id, "b", planAsync, nil)
				return h.do(call{method: "DELETE", path: bindingPath(id, "b"), query: deleteQuery(planAsync, false)})
			},
			check: wantError("AsyncRequired"),
		},
		"Unbind/422WhileBinding": {
			reason: "Unbinding while the binding is still being created is 422 ConcurrencyError.",
			want:   422,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				h.expect(h.bind(id, "b", planAsync, obj{"hold": true}, true), 202, "bind")
				return h.do(call{method: "DELETE", path: bindingPath(id, "b"), query: deleteQuery(planAsync, true)})
			},
			check: wantError("ConcurrencyError"),
		},

		// GET .../service_bindings/:binding_id/last_operation
		"BindingLastOperation/200InProgress": {
			reason: "A held bind reports in progress.",
			want:   200,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				h.expect(h.bind(id, "b", planAsync, obj{"hold": true}, true), 202, "bind")
				return h.do(call{method: "GET", path: bindingPath(id, "b") + "/last_operation", query: "operation=create-1"})
			},
			check: wantState("in progress"),
		},
		"BindingLastOperation/200Succeeded": {
			reason: "A created binding reports succeeded.",
			want:   200,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				h.bound(id, "b", planAsync, nil)
				return h.do(call{method: "GET", path: bindingPath(id, "b") + "/last_operation", query: "operation=create-1&service_id=svc-async&plan_id=" + planAsync})
			},
			check: wantBody(obj{"state": "succeeded"}),
		},
		"BindingLastOperation/400UnknownOperation": {
			reason: "An operation id this broker never issued is 400.",
			want:   400,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				h.bound(id, "b", planAsync, nil)
				return h.do(call{method: "GET", path: bindingPath(id, "b") + "/last_operation", query: "operation=update-7"})
			},
			check: wantDescription("unknown"),
		},
		"BindingLastOperation/404Missing": {
			reason: "Polling a binding that does not exist is 404.",
			want:   404,
			run: func(h h, id string) reply {
				return h.do(call{method: "GET", path: bindingPath(id, "b") + "/last_operation"})
			},
		},
		"BindingLastOperation/410AfterUnbind": {
			reason: "After an asynchronous unbind the tombstone reports succeeded, then the poll is 410 Gone.",
			want:   410,
			run: func(h h, id string) reply {
				h.ready(id, planAsync, nil)
				h.bound(id, "b", planAsync, nil)
				r := h.expect(h.do(call{method: "DELETE", path: bindingPath(id, "b"), query: deleteQuery(planAsync, true)}), 202, "unbind")
				h.awaitBindingSucceeded(id, "b", r.str("operation"))
				return poll(h.t, h.base, call{method: "GET", path: bindingPath(id, "b") + "/last_operation", query: "operation=" + r.str("operation")},
					30*testTombstoneTTL, "410", func(r reply) bool { return r.status == 410 })
			},
			check: wantBody(obj{}),
		},
	}
	nonID := regexp.MustCompile(`[^a-z0-9]+`)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			id := strings.Trim(nonID.ReplaceAllString(strings.ToLower(name), "-"), "-")
			r := tc.run(h{t: t, base: b.url}, id)
			if r.status != tc.want {
				t.Fatalf("%s\ngot %s, want status %d", tc.reason, r, tc.want)
			}
			if ct := r.header.Get("Content-Type"); r.status != 304 && ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			if tc.check != nil {
				tc.check(t, r, id)
			}
		})
	}
}
