package access_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/access"
	"github.com/marketplane/marketplane/internal/operator/internal/optest"
	"github.com/marketplane/marketplane/internal/operator/policy"
	"github.com/marketplane/marketplane/pkg/crdinstall"
)

// A second provider, "policyother", whose service kind Gadget the tenant
// policy-tenant-a uses as well.
const gadgetGroup = "policyother.services.openmcp.cloud"

var gadgetKind = schema.GroupVersionKind{Group: gadgetGroup, Version: "v1alpha1", Kind: "Gadget"}

// mcpRequest creates an AccessRequest in an MCP namespace labelled with
// labels, for the rules, through requestRef or clusterRef.
func mcpRequest(t *testing.T, ns, name string, labels map[string]string, clusterRef, requestRef *common.ObjectReference, rules []rbacv1.PolicyRule) {
	t.Helper()
	createAccessRequest(t, &clustersv1alpha1.AccessRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: clustersv1alpha1.AccessRequestSpec{ClusterRef: clusterRef, RequestRef: requestRef, Token: &clustersv1alpha1.TokenConfig{
			Permissions: []clustersv1alpha1.PermissionsRequest{{Rules: rules}},
		}},
	})
}

func managedBy(provider string) map[string]string {
	return map[string]string{providerv1alpha1.ManagedByLabel: provider, "openmcp.cloud/managed-purpose": "policy-tenant-a.demo.mcp"}
}

// testMCPNamespace is issue #11 item 2: openMCP's clusteraccess library
// creates a provider's requests in its tenant's MCP namespace, labelled
// openmcp.cloud/managed-by=<provider>. Each is checked with the policy of
// the provider the label names; unlabelled ones or ones naming nobody are
// Denied; the MCP's own requests there keep working; the kubeconfig Secret
// of a granted one is readable by its provider only.
func testMCPNamespace(t *testing.T, e *policyEnv) {
	ctx := t.Context()
	mcpNS, otherNS := e.tenantCR.Namespace, e.otherCR.Namespace
	domainRules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}

	// The second provider serves the same tenant.
	gadgetCRD := widgetCRD()
	gadgetCRD.Name, gadgetCRD.Spec.Group = "gadgets."+gadgetGroup, gadgetGroup
	gadgetCRD.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Kind: "Gadget", ListKind: "GadgetList", Plural: "gadgets", Singular: "gadget"}
	if err := crdinstall.Apply(ctx, optest.Target.Client, "policy-test", 0, gadgetCRD); err != nil {
		t.Fatal(err)
	}
	other := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: "policyother"}}
	other.Spec.Image = "example.com/policyother:v1"
	create(t, optest.Platform.Client, other)
	other.Status.Resources = []metav1.GroupVersionKind{metav1.GroupVersionKind(gadgetKind)}
	if err := optest.Platform.Client.Status().Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	gadget := &unstructured.Unstructured{}
	gadget.SetGroupVersionKind(gadgetKind)
	gadget.SetNamespace(e.tenantMCP.Namespace)
	gadget.SetName(e.tenantMCP.Name)
	createServed(t, optest.Target.Client, gadget)

	// The MCP controller's own AccessRequest in that namespace: labelled
	// with the MCP, not with a provider. It is not a provider's and is not
	// policed (it may ask for more than any provider).
	mcpLabels := map[string]string{corev2alpha1.MCPNameLabel: e.tenantMCP.Name, corev2alpha1.MCPNamespaceLabel: e.tenantMCP.Namespace}
	mcpRequest(t, mcpNS, "demo.admin", mcpLabels, nil, &common.ObjectReference{Name: e.tenantMCP.Name, Namespace: mcpNS}, everything)

	// Each provider's own request, as the library makes it: requestRef to
	// the MCP's ClusterRequest of the same namespace.
	mcpRequest(t, mcpNS, "policytest--demo--mcp", managedBy("policytest"), nil, &common.ObjectReference{Name: e.tenantMCP.Name, Namespace: mcpNS}, domainRules)
	mcpRequest(t, mcpNS, "policyother--demo--mcp", managedBy("policyother"), nil, &common.ObjectReference{Name: e.tenantMCP.Name, Namespace: mcpNS}, domainRules)

	own := waitAccess(t, mcpNS, "demo.admin", clustersv1alpha1.RequestGranted, access.ReasonGranted)
	mine := waitAccess(t, mcpNS, "policytest--demo--mcp", clustersv1alpha1.RequestGranted, access.ReasonGranted)
	theirs := waitAccess(t, mcpNS, "policyother--demo--mcp", clustersv1alpha1.RequestGranted, access.ReasonGranted)

	t.Run("ProviderPolicyApplies", func(t *testing.T) {
		// The same provider asking for everything on its tenant's MCP is
		// above its MCP ceiling, as from its own namespace.
		mcpRequest(t, mcpNS, "policytest--demo--everything", managedBy("policytest"), nil, &common.ObjectReference{Name: e.tenantMCP.Name, Namespace: mcpNS}, everything)
		waitDenied(t, mcpNS, "policytest--demo--everything", policy.RuleCeiling, "permissions[0]: * */*")
	})
	t.Run("Unlabelled", func(t *testing.T) {
		mcpRequest(t, mcpNS, "unlabelled", nil, nil, &common.ObjectReference{Name: e.tenantMCP.Name, Namespace: mcpNS}, domainRules)
		waitDenied(t, mcpNS, "unlabelled", policy.RuleRequestOwner, "has no label openmcp.cloud/managed-by")
	})
	t.Run("NamesNoProvider", func(t *testing.T) {
		mcpRequest(t, mcpNS, "nobody--demo--mcp", managedBy("nobody"), nil, &common.ObjectReference{Name: e.tenantMCP.Name, Namespace: mcpNS}, domainRules)
		waitDenied(t, mcpNS, "nobody--demo--mcp", policy.RuleRequestOwner, "openmcp.cloud/managed-by=nobody names no ServiceProvider")
	})
	t.Run("NotATenant", func(t *testing.T) {
		// policy-tenant-b uses neither provider.
		mcpRequest(t, otherNS, "policytest--other--mcp", managedBy("policytest"), nil, &common.ObjectReference{Name: e.other.Name, Namespace: otherNS}, domainRules)
		waitDenied(t, otherNS, "policytest--other--mcp", policy.RuleTenantsOnly, "is not a tenant of ServiceProvider policytest")
		// Even a shared cluster through clusterRef: nothing in a namespace
		// of an MCP that is not its tenant.
		mcpRequest(t, otherNS, "policytest--other--shared", managedBy("policytest"), e.cluster("onboarding"), nil,
			[]rbacv1.PolicyRule{{APIGroups: []string{widgetGroup}, Resources: []string{"widgets"}, Verbs: []string{"get"}}})
		waitDenied(t, otherNS, "policytest--other--shared", policy.RuleTenantsOnly, "is not a tenant of ServiceProvider policytest")
	})
	t.Run("OtherProvidersClusterRequest", func(t *testing.T) {
		// policyother's workload ClusterRequest in the same namespace is
		// not policytest's to use.
		create(t, optest.Platform.Client, &clustersv1alpha1.ClusterRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "policyother--demo--workload", Namespace: mcpNS, Labels: managedBy("policyother")},
			Spec:       clustersv1alpha1.ClusterRequestSpec{Purpose: clustersv1alpha1.PurposeWorkload},
		})
		mcpRequest(t, mcpNS, "policytest--demo--steal", managedBy("policytest"), nil, &common.ObjectReference{Name: "policyother--demo--workload", Namespace: mcpNS}, domainRules)
		waitDenied(t, mcpNS, "policytest--demo--steal", policy.RuleRequestRefScope, "is neither the ClusterRequest of ManagedControlPlane")
	})
	t.Run("OtherNamespaceRef", func(t *testing.T) {
		mcpRequest(t, mcpNS, "policytest--demo--cross", managedBy("policytest"), nil, ref(e.otherCR), domainRules)
		waitDenied(t, mcpNS, "policytest--demo--cross", policy.RuleRequestRefScope, "may refer only to ClusterRequests of that namespace")
	})
	t.Run("MCPClusterThroughClusterRef", func(t *testing.T) {
		mcpRequest(t, mcpNS, "policytest--demo--clusterref", managedBy("policytest"), e.cluster("mcp-a"), nil, domainRules)
		waitDenied(t, mcpNS, "policytest--demo--clusterref", policy.RuleMCPThroughRequest, "clusterRef "+e.clustersNS+"/mcp-a")
	})

	t.Run("KubeconfigOnlyForItsProvider", func(t *testing.T) {
		// Issue #11 item 4: a Role for exactly that Secret, bound to the
		// provider's run ServiceAccount, controlled by the request.
		for _, ar := range []*clustersv1alpha1.AccessRequest{mine, theirs} {
			role := &rbacv1.Role{}
			if err := optest.Platform.Client.Get(ctx, client.ObjectKey{Namespace: mcpNS, Name: access.SecretName(ar)}, role); err != nil {
				t.Fatalf("Role for the Secret of %s: %v", ar.Name, err)
			}
			if !metav1.IsControlledBy(role, ar) {
				t.Errorf("Role %s is not controlled by AccessRequest %s: %v", role.Name, ar.Name, role.OwnerReferences)
			}
			binding := &rbacv1.RoleBinding{}
			if err := optest.Platform.Client.Get(ctx, client.ObjectKey{Namespace: mcpNS, Name: access.SecretName(ar)}, binding); err != nil {
				t.Fatalf("RoleBinding for the Secret of %s: %v", ar.Name, err)
			}
			if !metav1.IsControlledBy(binding, ar) {
				t.Errorf("RoleBinding %s is not controlled by AccessRequest %s", binding.Name, ar.Name)
			}
		}
		if err := optest.Platform.Client.Get(ctx, client.ObjectKey{Namespace: mcpNS, Name: access.SecretName(own)}, &rbacv1.Role{}); !apierrors.IsNotFound(err) {
			t.Errorf("Role for the MCP's own Secret: got %v, want NotFound (no provider may read it)", err)
		}

		a := optest.Platform.ActAs(t, "sp-policytest", "sp-policytest")
		b := optest.Platform.ActAs(t, "sp-policyother", "sp-policyother")
		secret := func(c client.Client, ar *clustersv1alpha1.AccessRequest) error {
			return c.Get(ctx, client.ObjectKey{Namespace: mcpNS, Name: ar.Status.SecretRef.Name}, &corev1.Secret{})
		}
		if err := secret(a, mine); err != nil {
			t.Errorf("policytest reads the kubeconfig Secret of its own request: %v", err)
		}
		if err := secret(b, theirs); err != nil {
			t.Errorf("policyother reads the kubeconfig Secret of its own request: %v", err)
		}
		for what, err := range map[string]error{
			"policytest reads policyother's kubeconfig Secret":  secret(a, theirs),
			"policyother reads policytest's kubeconfig Secret":  secret(b, mine),
			"policytest reads the MCP's own kubeconfig Secret":  secret(a, own),
			"policyother reads the MCP's own kubeconfig Secret": secret(b, own),
			"policytest lists the Secrets of the MCP namespace": a.List(ctx, &corev1.SecretList{}, client.InNamespace(mcpNS)),
		} {
			if !apierrors.IsForbidden(err) {
				t.Errorf("%s: got %v, want Forbidden", what, err)
			}
		}

		// Revoking the request takes the Role and binding with it.
		if err := optest.Platform.Client.Delete(ctx, mine); err != nil {
			t.Fatal(err)
		}
		optest.Eventually(t, 30*time.Second, "the Role and RoleBinding of the deleted request are gone", func(ctx context.Context) (bool, error) {
			key := types.NamespacedName{Namespace: mcpNS, Name: access.SecretName(mine)}
			errRole := optest.Platform.Client.Get(ctx, key, &rbacv1.Role{})
			errBinding := optest.Platform.Client.Get(ctx, key, &rbacv1.RoleBinding{})
			return apierrors.IsNotFound(errRole) && apierrors.IsNotFound(errBinding), nil
		})
	})
}
