package broker_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// Plans of testdata/catalog.yaml.
const (
	planSmall = "plan-sync-small"
	planLarge = "plan-sync-large"
	planApp   = "plan-sync-app"
	planAsync = "plan-async"
	planOther = "plan-async-other"
	planPlain = "plan-plain"
)

func serviceOf(plan string) string {
	switch {
	case strings.HasPrefix(plan, "plan-sync"):
		return "svc-sync"
	case strings.HasPrefix(plan, "plan-async"):
		return "svc-async"
	}
	return "svc-plain"
}

func isAsync(plan string) bool { return strings.HasPrefix(plan, "plan-async") }

type obj = map[string]any

func instancePath(id string) string { return "/v2/service_instances/" + url.PathEscape(id) }

func bindingPath(id, bid string) string {
	return instancePath(id) + "/service_bindings/" + url.PathEscape(bid)
}

// provisionBody is a provision request for plan.
func provisionBody(plan string, params obj) obj {
	b := obj{
		"service_id":        serviceOf(plan),
		"plan_id":           plan,
		"organization_guid": "org-1",
		"space_guid":        "space-1",
		"context":           obj{"platform": "cloudfoundry", "organization_guid": "org-1", "space_guid": "space-1"},
	}
	if params != nil {
		b["parameters"] = params
	}
	return b
}

// bindBody is a bind request for plan.
func bindBody(plan string, params obj) obj {
	b := obj{"service_id": serviceOf(plan), "plan_id": plan, "bind_resource": obj{"app_guid": "app-1"}}
	if params != nil {
		b["parameters"] = params
	}
	return b
}

// deleteQuery is the query of a deprovision or unbind.
func deleteQuery(plan string, async bool) string {
	q := "service_id=" + serviceOf(plan) + "&plan_id=" + plan
	if async {
		q += "&accepts_incomplete=true"
	}
	return q
}

// h bundles a broker's URL with the helpers that bring instances and
// bindings into a state.
type h struct {
	t    *testing.T
	base string
}

func (h h) do(c call) reply { h.t.Helper(); return do(h.t, h.base, c) }

// expect fails the test unless r has the status.
func (h h) expect(r reply, status int, what string) reply {
	h.t.Helper()
	if r.status != status {
		h.t.Fatalf("%s: got %s, want status %d", what, r, status)
	}
	return r
}

// provision sends a provision request; async adds accepts_incomplete.
func (h h) provision(id, plan string, params obj, async bool) reply {
	h.t.Helper()
	q := ""
	if async {
		q = "accepts_incomplete=true"
	}
	return h.do(call{method: "PUT", path: instancePath(id), query: q, body: provisionBody(plan, params)})
}

// ready provisions an instance and waits until it is provisioned.
func (h h) ready(id, plan string, params obj) {
	h.t.Helper()
	if !isAsync(plan) {
		h.expect(h.provision(id, plan, params, false), 201, "provision "+id)
		return
	}
	r := h.expect(h.provision(id, plan, params, true), 202, "provision "+id)
	h.awaitInstance(id, r.str("operation"), "succeeded")
}

// awaitInstance polls the instance's last_operation until it reports state.
// Every answer on the way must be 200: an operation the broker handed out
// is known to last_operation at once, whatever its cache lags.
func (h h) awaitInstance(id, op, state string) reply {
	h.t.Helper()
	return h.await(instancePath(id)+"/last_operation", op, state, "instance "+id)
}

// awaitBindingSucceeded polls the binding's last_operation until it reports
// succeeded.
func (h h) awaitBindingSucceeded(id, bid, op string) {
	h.t.Helper()
	h.await(bindingPath(id, bid)+"/last_operation", op, "succeeded", "binding "+bid)
}

func (h h) await(path, op, state, what string) reply {
	h.t.Helper()
	return poll(h.t, h.base, call{method: "GET", path: path, query: "operation=" + url.QueryEscape(op)},
		30*time.Second, what+" "+op+" "+state, func(r reply) bool {
			if r.status != 200 {
				h.t.Fatalf("%s %s: last_operation answered %s while polling", what, op, r)
			}
			return r.str("state") == state
		})
}

// bind sends a bind request; async adds accepts_incomplete.
func (h h) bind(id, bid, plan string, params obj, async bool) reply {
	h.t.Helper()
	q := ""
	if async {
		q = "accepts_incomplete=true"
	}
	return h.do(call{method: "PUT", path: bindingPath(id, bid), query: q, body: bindBody(plan, params)})
}

// bound binds and waits until the binding is created.
func (h h) bound(id, bid, plan string, params obj) {
	h.t.Helper()
	if !isAsync(plan) {
		h.expect(h.bind(id, bid, plan, params, false), 201, "bind "+bid)
		return
	}
	r := h.expect(h.bind(id, bid, plan, params, true), 202, "bind "+bid)
	h.awaitBindingSucceeded(id, bid, r.str("operation"))
}

// release lets the test provisioner finish an operation it holds.
func release(t *testing.T, key client.ObjectKey, o client.Object) {
	t.Helper()
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+annotationRelease+`":"true"}}}`))
	o.SetName(key.Name)
	o.SetNamespace(key.Namespace)
	if err := env.onboarding.Client.Patch(context.Background(), o, patch); err != nil {
		t.Fatalf("release %s: %v", key, err)
	}
}

func releaseInstance(t *testing.T, id string) {
	t.Helper()
	release(t, sf.InstanceKey(id), &osbv1alpha1.SFServiceInstance{})
}

// instance reads the stored SFServiceInstance of id.
func instance(t *testing.T, id string) *osbv1alpha1.SFServiceInstance {
	t.Helper()
	inst := &osbv1alpha1.SFServiceInstance{}
	if err := env.onboarding.Client.Get(context.Background(), sf.InstanceKey(id), inst); err != nil {
		t.Fatalf("get instance %s: %v", id, err)
	}
	return inst
}

// identityHeader is an X-Broker-API-Originating-Identity for a user.
func identityHeader(platform, user string) string {
	return platform + " " + base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf(`{"user_id":%q}`, user)))
}

// field walks a path of object keys and array indexes in a JSON body.
func field(body any, path ...any) any {
	cur := body
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil
			}
			cur = m[k]
		case int:
			l, ok := cur.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			cur = l[k]
		}
	}
	return cur
}
