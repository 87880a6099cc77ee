package broker_test

import (
	"context"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	"github.com/marketplane/marketplane/internal/broker/catalog"
	"github.com/marketplane/marketplane/internal/broker/code"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// sameNameTenant is issue #32's same-name attack on a code-based offering:
// an OSB instance gets a control plane and the provider's object named
// after its id; a tenant of the onboarding cluster creates, in its own
// namespace, a ManagedControlPlane and a Sample of exactly those names. Each
// gets a control plane of its own (openMCP's MCP namespaces hash
// namespace and name); the OSB binding reaches the instance's only, the
// tenant's objects never show there, and the tenant deleting its objects
// leaves the OSB instance succeeded and its binding working.
func sameNameTenant(t *testing.T, c *codeLandscape) {
	ctx := t.Context()
	h := h2(t, c.base)
	const id, bid = "same-name-1", "same-name-1-binding"
	r := h.expect(h.do(call{method: http.MethodPut, path: instancePath(id), query: "accepts_incomplete=true", body: codeProvisionBody(obj{"version": "v1"})}),
		http.StatusAccepted, "provision")
	poll(t, c.base, call{method: http.MethodGet, path: instancePath(id) + "/last_operation", query: "operation=" + r.str("operation")}, codeTimeout,
		"provision succeeded", func(r reply) bool {
			if r.status != http.StatusOK || r.str("state") == "failed" {
				t.Fatalf("last_operation: %s", r)
			}
			return r.str("state") == "succeeded"
		})
	r = h.expect(h.do(call{method: http.MethodPut, path: bindingPath(id, bid), body: obj{"service_id": catalog.OfferingServiceID(sampleOffering), "plan_id": samplePlanID}}),
		http.StatusCreated, "bind")
	kubeconfig, _ := field(r.body, "credentials", "kubeconfig").(string)
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	if err != nil {
		t.Fatalf("the bind response holds no kubeconfig: %v", err)
	}
	bound, err := client.New(cfg, client.Options{Scheme: c.l.Onboarding.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	sampleObject := func(name string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("domain.sample.services.openmcp.cloud/v1alpha1")
		o.SetKind("SampleObject")
		o.SetNamespace("default")
		o.SetName(name)
		return o
	}
	if err := bound.Create(ctx, sampleObject("osb-data")); err != nil {
		t.Fatalf("the OSB binding creates a SampleObject on its control plane: %v", err)
	}

	// The tenant: the instance's names, in its own namespace.
	name := sf.ObjectName(id)
	mcp := c.l.CreateMCP(t, name, "tenant-same-name")
	osbMCP := &corev2alpha1.ManagedControlPlane{}
	if err := c.l.Onboarding.Client.Get(ctx, client.ObjectKey{Namespace: code.Namespace(id), Name: name}, osbMCP); err != nil {
		t.Fatalf("the OSB instance's control plane %s/%s: %v", code.Namespace(id), name, err)
	}
	if cfg.Host == mcp.Config.Host {
		t.Fatalf("the tenant's control plane %s/%s is the OSB instance's (%s)", mcp.Namespace, mcp.Name, cfg.Host)
	}
	sample := &unstructured.Unstructured{}
	sample.SetAPIVersion("sample.services.openmcp.cloud/v1alpha1")
	sample.SetKind("Sample")
	sample.SetNamespace(mcp.Namespace)
	sample.SetName(name)
	if err := unstructured.SetNestedField(sample.Object, "v1", "spec", "version"); err != nil {
		t.Fatal(err)
	}
	if err := c.l.Onboarding.Client.Create(ctx, sample); err != nil {
		t.Fatal(err)
	}
	awaitCond(t, "the tenant's Sample to be Ready", func(ctx2 context.Context) (bool, error) {
		if err := c.l.Onboarding.Client.Get(ctx2, client.ObjectKeyFromObject(sample), sample); err != nil {
			return false, err
		}
		phase, _, _ := unstructured.NestedString(sample.Object, "status", "phase")
		return phase == "Ready", nil
	})
	if err := mcp.Client.Create(ctx, sampleObject("tenant-data")); err != nil {
		t.Fatalf("the tenant creates a SampleObject on its control plane: %v", err)
	}
	if err := bound.Get(ctx, client.ObjectKeyFromObject(sampleObject("tenant-data")), sampleObject("tenant-data")); !apierrors.IsNotFound(err) {
		t.Errorf("the OSB binding reads the tenant's SampleObject: %v, want NotFound (another control plane)", err)
	}
	if err := mcp.Client.Get(ctx, client.ObjectKeyFromObject(sampleObject("osb-data")), sampleObject("osb-data")); !apierrors.IsNotFound(err) {
		t.Errorf("the tenant reads the OSB instance's SampleObject: %v, want NotFound (another control plane)", err)
	}

	// The tenant deletes its objects (its SampleObject first: the provider
	// keeps a Sample whose users still have objects): the OSB instance is
	// unaffected.
	if err := mcp.Client.Delete(ctx, sampleObject("tenant-data")); err != nil {
		t.Fatal(err)
	}
	if err := c.l.Onboarding.Client.Delete(ctx, sample); err != nil {
		t.Fatal(err)
	}
	c.l.DeleteMCP(t, mcp.Name, mcp.Namespace)
	r = h.expect(h.do(call{method: http.MethodGet, path: instancePath(id) + "/last_operation"}), http.StatusOK, "last_operation after the tenant's deletion")
	if r.str("state") != "succeeded" {
		t.Errorf("the OSB instance after the tenant deleted its same-named objects: %s", r)
	}
	if err := bound.Get(ctx, client.ObjectKeyFromObject(sampleObject("osb-data")), sampleObject("osb-data")); err != nil {
		t.Errorf("the OSB binding after the tenant's deletion: %v, want its SampleObject", err)
	}
	// Its users' objects first, as for the tenant's.
	if err := bound.Delete(ctx, sampleObject("osb-data")); err != nil {
		t.Fatal(err)
	}
	r = h.expect(h.do(call{method: http.MethodDelete, path: instancePath(id), query: codeDeleteQuery()}), http.StatusAccepted, "deprovision")
	poll(t, c.base, call{method: http.MethodGet, path: instancePath(id) + "/last_operation", query: "operation=" + r.str("operation")}, codeTimeout,
		"deprovision finished", func(r reply) bool { return r.status == http.StatusGone })
}
