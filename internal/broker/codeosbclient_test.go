package broker_test

import (
	"testing"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/marketplane/marketplane/internal/broker/catalog"
)

// realClientCode drives a code-based offering (the sample provider's)
// through the real client library at version v, on the landscape of
// TestCodeOffering: catalog, provision, last_operation, update, fetch,
// bind, fetch binding, unbind, deprovision, and with orphans a deprovision
// sent while the provision still runs, as a platform's orphan mitigation
// after a timeout does. Bindings of code-based offerings are synchronous, so a
// 2.13 client binds too; it cannot fetch (the library refuses before
// 2.14).
func realClientCode(t *testing.T, base string, v osbVersion, id string, orphans bool) {
	c := osbClient(t, base, v, testPassword)
	serviceID := catalog.OfferingServiceID(sampleOffering)
	cat, err := c.GetCatalog()
	if err != nil {
		t.Fatalf("catalog: %v", err)
	}
	var found bool
	for _, s := range cat.Services {
		found = found || (s.ID == serviceID && len(s.Plans) == 1 && s.Plans[0].ID == samplePlanID)
	}
	if !found {
		t.Fatalf("the catalog lacks %s with plan %s", sampleOffering, samplePlanID)
	}
	provision := func(id string) *osb.ProvisionResponse {
		t.Helper()
		p, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id, ServiceID: serviceID, PlanID: samplePlanID, AcceptsIncomplete: true,
			OrganizationGUID: "org-1", SpaceGUID: "space-1", Parameters: map[string]any{"version": "v1"},
			Context: map[string]any{"platform": "service-manager", "instance_name": id}})
		if err != nil || !p.Async || p.OperationKey == nil {
			t.Fatalf("provision %s: %v %+v", id, err, p)
		}
		return p
	}
	deprovision := func(id string) {
		t.Helper()
		d, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: id, ServiceID: serviceID, PlanID: samplePlanID, AcceptsIncomplete: true})
		if err != nil || !d.Async {
			t.Fatalf("deprovision %s: %v %+v", id, err, d)
		}
		awaitLastOperation(t, c, id, d.OperationKey, "deprovision "+id)
	}

	p := provision(id)
	awaitLastOperation(t, c, id, p.OperationKey, "provision")
	u, err := c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: id, ServiceID: serviceID, AcceptsIncomplete: true, Parameters: map[string]any{"version": "v2"}})
	if err != nil || !u.Async {
		t.Fatalf("update: %v %+v", err, u)
	}
	awaitLastOperation(t, c, id, u.OperationKey, "update")
	if v.asyncBindings() {
		g, err := c.GetInstance(&osb.GetInstanceRequest{InstanceID: id})
		if err != nil || g.PlanID != samplePlanID || g.Parameters["version"] != "v2" {
			t.Fatalf("fetch: %v %+v", err, g)
		}
	}
	bid := id + "-binding"
	bd, err := c.Bind(&osb.BindRequest{InstanceID: id, BindingID: bid, ServiceID: serviceID, PlanID: samplePlanID})
	if err != nil || bd.Async || bd.Credentials["kubeconfig"] == nil {
		t.Fatalf("bind: %v (async %v, credential keys %d)", err, bd != nil && bd.Async, len(bd.Credentials))
	}
	if v.asyncBindings() {
		g, err := c.GetBinding(&osb.GetBindingRequest{InstanceID: id, BindingID: bid})
		if err != nil || g.Credentials["kubeconfig"] != bd.Credentials["kubeconfig"] {
			t.Fatalf("fetch binding: %v (the same kubeconfig: %v)", err, g != nil && g.Credentials["kubeconfig"] == bd.Credentials["kubeconfig"])
		}
	}
	if _, err := c.Unbind(&osb.UnbindRequest{InstanceID: id, BindingID: bid, ServiceID: serviceID, PlanID: samplePlanID}); err != nil {
		t.Fatalf("unbind: %v", err)
	}
	deprovision(id)

	// Orphan mitigation (once; it costs a control plane): the platform
	// gave up waiting and deletes while the provision runs.
	if orphans {
		provision(id + "-orphan")
		deprovision(id + "-orphan")
	}
}
