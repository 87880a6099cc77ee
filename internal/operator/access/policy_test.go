package access_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/access"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/internal/operator/internal/optest"
	"github.com/marketplane/marketplane/internal/operator/policy"
	"github.com/marketplane/marketplane/pkg/crdinstall"
	"github.com/marketplane/marketplane/pkg/providerapp"
)

// The test provider's service kind, installed on the onboarding cluster
// (the Target API server), and a group of its domain service.
const (
	widgetGroup = "policytest.services.openmcp.cloud"
	domainGroup = "domain.policytest.services.openmcp.cloud"
)

var widgetKind = schema.GroupVersionKind{Group: widgetGroup, Version: "v1alpha1", Kind: "Widget"}

func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + widgetGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: widgetGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: widgetKind.Kind, ListKind: "WidgetList", Plural: "widgets", Singular: "widget"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: widgetKind.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
}

// policyEnv is what the attacks of issue #10 aim at: the provider
// "policytest" with its namespace as the operator makes it, its tenant's
// MCP (policy-tenant-a/demo, which has a Widget) and another tenant's MCP
// (policy-tenant-b/other, which has none), and Clusters of every purpose,
// all served by the Target API server.
type policyEnv struct {
	provider          providerapp.Provider
	sp                *providerv1alpha1.ServiceProvider
	ns, clustersNS    string
	tenantMCP, other  types.NamespacedName
	tenantCR, otherCR types.NamespacedName
}

func startPolicyEnv(t *testing.T) *policyEnv {
	t.Helper()
	optest.StartEnv(t)
	ctx := t.Context()
	e := &policyEnv{
		provider:   providerapp.Provider{Name: "policytest", CRDs: []*apiextensionsv1.CustomResourceDefinition{widgetCRD()}, ServiceKinds: []schema.GroupVersionKind{widgetKind}},
		clustersNS: optest.NewNamespace(t, "policy-clusters"),
		tenantMCP:  types.NamespacedName{Namespace: "policy-tenant-a", Name: "demo"},
		other:      types.NamespacedName{Namespace: "policy-tenant-b", Name: "other"},
	}
	if err := crdinstall.Apply(ctx, optest.Target.Client, "policy-test", 0, widgetCRD()); err != nil {
		t.Fatal(err)
	}

	// The provider and its namespace.
	e.sp = &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: "policytest"}}
	e.sp.Spec.Image = "example.com/policytest:v1"
	create(t, optest.Platform.Client, e.sp)
	e.sp.Status.Resources = []metav1.GroupVersionKind{metav1.GroupVersionKind(widgetKind)}
	if err := optest.Platform.Client.Status().Update(ctx, e.sp); err != nil {
		t.Fatal(err)
	}
	e.ns = optest.NewProviderNamespace(t, "sp-policytest", policy.KindServiceProvider, e.sp)

	optest.RegisterCluster(t, e.clustersNS, "onboarding", optest.Target.Kubeconfig, clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeOnboarding)
	optest.RegisterCluster(t, e.clustersNS, "platform", optest.Target.Kubeconfig, clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposePlatform)
	optest.RegisterCluster(t, e.clustersNS, "mcp-a", optest.Target.Kubeconfig, clustersv1alpha1.TenancyExclusive, clustersv1alpha1.PurposeMCP)
	optest.RegisterCluster(t, e.clustersNS, "mcp-b", optest.Target.Kubeconfig, clustersv1alpha1.TenancyExclusive, clustersv1alpha1.PurposeMCP)

	// The tenants on the onboarding cluster; only tenant a uses the
	// provider's service.
	for _, ns := range []string{e.tenantMCP.Namespace, e.other.Namespace} {
		create(t, optest.Target.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	widget := &unstructured.Unstructured{}
	widget.SetGroupVersionKind(widgetKind)
	widget.SetNamespace(e.tenantMCP.Namespace)
	widget.SetName(e.tenantMCP.Name)
	createServed(t, optest.Target.Client, widget)

	// The MCPs' ClusterRequests on the platform, as the MCP controller
	// makes them, granted their clusters.
	e.tenantCR = mcpClusterRequest(t, e.tenantMCP, types.NamespacedName{Namespace: e.clustersNS, Name: "mcp-a"})
	e.otherCR = mcpClusterRequest(t, e.other, types.NamespacedName{Namespace: e.clustersNS, Name: "mcp-b"})

	optest.StartManagerFor(t, []string{e.ns, e.clustersNS, e.tenantCR.Namespace, e.otherCR.Namespace}, func(mgr ctrl.Manager) error {
		if err := clusters.NewClusterReconciler(mgr.GetClient(), clusters.WithClusterControllerName("cluster-policy")).SetupWithManager(mgr); err != nil {
			return err
		}
		return access.NewReconciler(mgr.GetClient(), access.WithName("ar-policy")).SetupWithManager(mgr)
	})
	return e
}

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
	}
}

// createServed creates obj, of a kind whose CRD was just installed: the
// CRD is Established, but the API server's discovery, which the client's
// REST mapper reads, may list the kind a moment later ("no matches for
// kind", seen on a loaded machine); it retries that for up to 30 s.
func createServed(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = c.Create(ctx, obj)
		if apimeta.IsNoMatchError(last) {
			return false, nil
		}
		return true, last
	})
	if err != nil {
		t.Fatalf("create %T %s (its kind served by discovery): %v; last error: %v", obj, client.ObjectKeyFromObject(obj), err, last)
	}
}

// mcpClusterRequest creates the platform namespace and the granted
// ClusterRequest of the ManagedControlPlane mcp.
func mcpClusterRequest(t *testing.T, mcp, cluster types.NamespacedName) types.NamespacedName {
	t.Helper()
	labels := map[string]string{corev2alpha1.MCPNameLabel: mcp.Name, corev2alpha1.MCPNamespaceLabel: mcp.Namespace}
	key := types.NamespacedName{Namespace: corev2alpha1.StableMCPNamespace(mcp.Namespace, mcp.Name), Name: mcp.Name}
	create(t, optest.Platform.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: key.Namespace, Labels: labels}})
	cr := &clustersv1alpha1.ClusterRequest{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: labels},
		Spec:       clustersv1alpha1.ClusterRequestSpec{Purpose: clustersv1alpha1.PurposeMCP},
	}
	create(t, optest.Platform.Client, cr)
	cr.Status.Phase = clustersv1alpha1.RequestGranted
	cr.Status.Cluster = &common.ObjectReference{Name: cluster.Name, Namespace: cluster.Namespace}
	if err := optest.Platform.Client.Status().Update(t.Context(), cr); err != nil {
		t.Fatal(err)
	}
	return key
}

// request creates an AccessRequest of the provider for the rules and
// roleRefs, through clusterRef or requestRef.
func (e *policyEnv) request(t *testing.T, name string, clusterRef, requestRef *common.ObjectReference, rules []rbacv1.PolicyRule, roleRefs ...common.RoleRef) {
	t.Helper()
	token := &clustersv1alpha1.TokenConfig{RoleRefs: roleRefs}
	if len(rules) > 0 {
		token.Permissions = []clustersv1alpha1.PermissionsRequest{{Rules: rules}}
	}
	createAccessRequest(t, &clustersv1alpha1.AccessRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec:       clustersv1alpha1.AccessRequestSpec{ClusterRef: clusterRef, RequestRef: requestRef, Token: token},
	})
}

func (e *policyEnv) cluster(name string) *common.ObjectReference {
	return &common.ObjectReference{Name: name, Namespace: e.clustersNS}
}

func ref(key types.NamespacedName) *common.ObjectReference {
	return &common.ObjectReference{Name: key.Name, Namespace: key.Namespace}
}

var everything = []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}

// waitDenied waits until the request is Denied by rule with a message that
// contains detail, and checks that nothing was granted: no finalizer, no
// Secret, no object on the target, and a warning event naming the rule.
func waitDenied(t *testing.T, ns, name, rule, detail string) {
	t.Helper()
	ar := waitAccess(t, ns, name, clustersv1alpha1.RequestDenied, access.ReasonPolicyViolation)
	_, _, msg := optest.ReadyReason(ar.Status.Conditions)
	if want := fmt.Sprintf("rule %q", rule); !strings.Contains(msg, want) || !strings.Contains(msg, detail) {
		t.Errorf("message %q does not name %s and %q", msg, want, detail)
	}
	if slices.Contains(ar.Finalizers, access.Finalizer) || ar.Status.SecretRef != nil {
		t.Errorf("denied request has finalizer %v, secretRef %v", ar.Finalizers, ar.Status.SecretRef)
	}
	if left := labelled(t, string(ar.UID)); len(left) != 0 {
		t.Errorf("objects created on the target for a denied request: %v", left)
	}
	if err := optest.Platform.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: access.SecretName(ar)}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("kubeconfig Secret of a denied request: got %v, want NotFound", err)
	}
	optest.Eventually(t, 30*time.Second, "a PolicyViolation event for "+name, func(ctx context.Context) (bool, error) {
		list := &eventsv1.EventList{}
		if err := optest.Platform.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, ev := range list.Items {
			if ev.Regarding.Name == name && ev.Reason == string(access.ReasonPolicyViolation) && ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Note, rule) {
				return true, nil
			}
		}
		return false, nil
	})
}

// TestAccessPolicy runs the attacks of issue #10 item 1 with a provider's
// own AccessRequests, each now Denied with the rule it breaks, and the
// access a provider does need, which is still granted.
func TestAccessPolicy(t *testing.T) {
	e := startPolicyEnv(t)
	ctx := t.Context()

	t.Run("OnboardingClusterAdmin", func(t *testing.T) {
		// Attack (a): clusterRef to the onboarding cluster with roleRefs
		// [cluster-admin].
		e.request(t, "attack-a", e.cluster("onboarding"), nil, nil, common.RoleRef{Kind: common.RoleKindClusterRole, Name: "cluster-admin"})
		waitDenied(t, e.ns, "attack-a", policy.RuleNoAdminRoles, "roleRef ClusterRole cluster-admin")
	})
	t.Run("OtherTenantsMCPCluster", func(t *testing.T) {
		// Attack (b): clusterRef to another tenant's MCP Cluster.
		e.request(t, "attack-b", e.cluster("mcp-b"), nil, everything)
		waitDenied(t, e.ns, "attack-b", policy.RuleMCPThroughRequest, "clusterRef "+e.clustersNS+"/mcp-b")
	})
	t.Run("OtherMCPsNamespace", func(t *testing.T) {
		// Attack (c): requestRef into another MCP's namespace with */*/*.
		e.request(t, "attack-c", nil, ref(e.otherCR), everything)
		waitDenied(t, e.ns, "attack-c", policy.RuleTenantsOnly, "is not a tenant of ServiceProvider policytest")
	})
	t.Run("EverythingOnOwnTenantsMCP", func(t *testing.T) {
		// Even on its own tenant's MCP, */*/* is above the ceiling.
		e.request(t, "attack-c-tenant", nil, ref(e.tenantCR), everything)
		waitDenied(t, e.ns, "attack-c-tenant", policy.RuleCeiling, "permissions[0]: * */*")
	})
	t.Run("OtherNamespace", func(t *testing.T) {
		e.request(t, "attack-other-ns", nil, &common.ObjectReference{Name: "x", Namespace: e.clustersNS}, everything)
		waitDenied(t, e.ns, "attack-other-ns", policy.RuleRequestRefScope, "requestRef "+e.clustersNS+"/x")
	})
	t.Run("PlatformCluster", func(t *testing.T) {
		e.request(t, "attack-platform", e.cluster("platform"), nil, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}})
		waitDenied(t, e.ns, "attack-platform", policy.RuleNoPlatform, "serves purpose platform")
	})
	t.Run("OnboardingSecrets", func(t *testing.T) {
		// Reading the tenants' Secrets on the onboarding cluster (such as
		// tenant-a/demo.admin.kubeconfig).
		e.request(t, "attack-secrets", e.cluster("onboarding"), nil, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}})
		waitDenied(t, e.ns, "attack-secrets", policy.RuleCeiling, "get core/secrets")
	})

	t.Run("OnboardingNamespaceSquatting", func(t *testing.T) {
		// A Role in a namespace that does not exist yet would create it
		// on the onboarding cluster, before the tenant of that name.
		createAccessRequest(t, &clustersv1alpha1.AccessRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "attack-squat", Namespace: e.ns},
			Spec: clustersv1alpha1.AccessRequestSpec{ClusterRef: e.cluster("onboarding"), Token: &clustersv1alpha1.TokenConfig{
				Permissions: []clustersv1alpha1.PermissionsRequest{{Namespace: "policy-tenant-c", Rules: []rbacv1.PolicyRule{{APIGroups: []string{widgetGroup}, Resources: []string{"widgets"}, Verbs: []string{"get"}}}}},
			}},
		})
		waitDenied(t, e.ns, "attack-squat", policy.RuleTenantNamespaces, "namespace policy-tenant-c")
		if err := optest.Target.Client.Get(ctx, client.ObjectKey{Name: "policy-tenant-c"}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace policy-tenant-c: got %v, want NotFound", err)
		}
	})

	t.Run("OnboardingInitAndRun", func(t *testing.T) {
		// What pkg/providerapp asks for on the onboarding cluster.
		for _, purpose := range []string{"init", "run"} {
			e.request(t, "onboarding-"+purpose, e.cluster("onboarding"), nil, e.provider.OnboardingPermissions(purpose).Rules)
		}
		initAR := waitAccess(t, e.ns, "onboarding-init", clustersv1alpha1.RequestGranted, access.ReasonGranted)
		runAR := waitAccess(t, e.ns, "onboarding-run", clustersv1alpha1.RequestGranted, access.ReasonGranted)

		// init installs its CRD again (server-side apply by name) but
		// cannot change another one.
		initClient := kubeconfigClient(t, getSecret(t, e.ns, initAR.Status.SecretRef.Name))
		if err := crdinstall.Apply(ctx, initClient, "policytest", 0, widgetCRD()); err != nil {
			t.Errorf("init cannot apply its own CRD: %v", err)
		}
		other := widgetCRD()
		other.Name, other.Spec.Group = "widgets.other.services.openmcp.cloud", "other.services.openmcp.cloud"
		if err := optest.Target.Client.Create(ctx, other); err != nil {
			t.Fatal(err)
		}
		other = &apiextensionsv1.CustomResourceDefinition{}
		if err := initClient.Get(ctx, client.ObjectKey{Name: "widgets.other.services.openmcp.cloud"}, other); err != nil {
			t.Fatal(err)
		}
		other.Labels = map[string]string{"changed-by": "policytest"}
		if err := initClient.Update(ctx, other); !apierrors.IsForbidden(err) {
			t.Errorf("init updating another provider's CRD: got %v, want Forbidden", err)
		}

		// run manages its service objects.
		runClient := kubeconfigClient(t, getSecret(t, e.ns, runAR.Status.SecretRef.Name))
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(widgetKind.GroupVersion().WithKind("WidgetList"))
		if err := runClient.List(ctx, list); err != nil || len(list.Items) != 1 {
			t.Errorf("run lists Widgets: %d, %v; want the tenant's one", len(list.Items), err)
		}
	})

	t.Run("OwnTenantsMCP", func(t *testing.T) {
		// What a domain service needs on its tenant's MCP, like the
		// sample provider's MCP permissions.
		domainCRD := "things." + domainGroup
		e.request(t, "mcp-demo", nil, ref(e.tenantCR), []rbacv1.PolicyRule{
			{APIGroups: []string{apiextensionsv1.GroupName}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"create"}},
			{APIGroups: []string{apiextensionsv1.GroupName}, Resources: []string{"customresourcedefinitions"}, ResourceNames: []string{domainCRD}, Verbs: []string{"get", "update", "patch", "delete"}},
			{APIGroups: []string{domainGroup}, Resources: []string{"things"}, Verbs: []string{"list"}},
			{APIGroups: []string{""}, Resources: []string{"namespaces", "secrets"}, Verbs: []string{"get", "create"}},
		})
		ar := waitAccess(t, e.ns, "mcp-demo", clustersv1alpha1.RequestGranted, access.ReasonGranted)
		user := kubeconfigClient(t, getSecret(t, e.ns, ar.Status.SecretRef.Name))
		if err := user.Get(ctx, client.ObjectKey{Name: domainCRD}, &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
			t.Errorf("get its domain CRD on the MCP: got %v, want NotFound (allowed, not there yet)", err)
		}
	})

	t.Run("PolicyChangeRechecks", func(t *testing.T) {
		// The inter-operator writes bind Secrets on the onboarding
		// cluster: beyond the default ceiling until the platform operator
		// allows it in spec.accessPolicy.onboarding.
		secrets := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "patch", "delete"}}}
		e.request(t, "bind-secrets", e.cluster("onboarding"), nil, secrets)
		waitDenied(t, e.ns, "bind-secrets", policy.RuleCeiling, "create core/secrets")

		setPolicy(t, e.sp.Name, &providerv1alpha1.AccessPolicy{Onboarding: secrets})
		ar := waitAccess(t, e.ns, "bind-secrets", clustersv1alpha1.RequestGranted, access.ReasonGranted)
		if len(labelled(t, string(ar.UID))) == 0 {
			t.Fatal("granted, but nothing on the target")
		}

		// Taking it back revokes what was granted.
		setPolicy(t, e.sp.Name, nil)
		waitDenied(t, e.ns, "bind-secrets", policy.RuleCeiling, "create core/secrets")
	})

	t.Run("MCPNamespace", func(t *testing.T) { testMCPNamespace(t, e) })
	t.Run("TemplateGrant", func(t *testing.T) { testTemplateGrant(t, e) })
}

// testTemplateGrant is issue #34: the AccessRequests of openMCP's
// service-provider-template in its tenant's MCP namespace, of its exact
// shape (*/*/* and a roleRef to cluster-admin, requestRef to the MCP's
// ClusterRequest and to its own workload ClusterRequest there). Without
// the grant each is Denied with the rule named, never left Pending; with
// the grant of docs/openmcp-compat.md each is Granted and its token is
// cluster-admin; taking the grant back revokes it.
func testTemplateGrant(t *testing.T, e *policyEnv) {
	ctx := t.Context()
	mcpNS := e.tenantCR.Namespace
	optest.RegisterCluster(t, e.clustersNS, "workload", optest.Target.Kubeconfig, clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeWorkload)
	// The workload ClusterRequest openMCP's library creates in the MCP
	// namespace, granted as the ClusterRequest controller would.
	wl := &clustersv1alpha1.ClusterRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "policytest--demo--wl", Namespace: mcpNS, Labels: managedBy("policytest")},
		Spec:       clustersv1alpha1.ClusterRequestSpec{Purpose: clustersv1alpha1.PurposeWorkload},
	}
	create(t, optest.Platform.Client, wl)
	wl.Status.Phase = clustersv1alpha1.RequestGranted
	wl.Status.Cluster = e.cluster("workload")
	if err := optest.Platform.Client.Status().Update(ctx, wl); err != nil {
		t.Fatal(err)
	}
	template := func(name string, requestRef *common.ObjectReference) {
		createAccessRequest(t, &clustersv1alpha1.AccessRequest{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mcpNS, Labels: managedBy("policytest")},
			Spec: clustersv1alpha1.AccessRequestSpec{RequestRef: requestRef, Token: &clustersv1alpha1.TokenConfig{
				Permissions: []clustersv1alpha1.PermissionsRequest{{Rules: everything}},
				RoleRefs:    []common.RoleRef{{Kind: common.RoleKindClusterRole, Name: "cluster-admin"}},
			}},
		})
	}
	template("policytest--demo--mcp-template", &common.ObjectReference{Name: e.tenantMCP.Name, Namespace: mcpNS})
	template("policytest--demo--wl-template", &common.ObjectReference{Name: wl.Name, Namespace: mcpNS})
	names := []string{"policytest--demo--mcp-template", "policytest--demo--wl-template"}

	// Default policy: the rules are above the ceilings.
	for _, name := range names {
		waitDenied(t, mcpNS, name, policy.RuleCeiling, "permissions[0]: * */*")
	}
	// The rules widened, the roleRef not: Denied by the admin-role rule,
	// which says where to grant it.
	setPolicy(t, e.sp.Name, &providerv1alpha1.AccessPolicy{MCP: everything, Workload: everything})
	waitDeniedAgain(t, mcpNS, names[0], policy.RuleNoAdminRoles, "spec.accessPolicy.roleRefs.mcp")
	waitDeniedAgain(t, mcpNS, names[1], policy.RuleNoAdminRoles, "spec.accessPolicy.roleRefs.workload")

	// The grant.
	setPolicy(t, e.sp.Name, &providerv1alpha1.AccessPolicy{
		MCP: everything, Workload: everything,
		RoleRefs: &providerv1alpha1.RoleRefGrants{MCP: []string{"cluster-admin"}, Workload: []string{"cluster-admin"}},
	})
	for _, name := range names {
		ar := waitAccess(t, mcpNS, name, clustersv1alpha1.RequestGranted, access.ReasonGranted)
		bindings := &rbacv1.ClusterRoleBindingList{}
		if err := optest.Target.Client.List(ctx, bindings, client.MatchingLabels{access.RequestUIDLabel: string(ar.UID)}); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(bindings.Items, func(b rbacv1.ClusterRoleBinding) bool { return b.RoleRef.Name == "cluster-admin" }) {
			t.Errorf("%s granted, but no binding to cluster-admin on the target: %v", name, labelled(t, string(ar.UID)))
		}
		// The token is what the template asked for: it reads Secrets in
		// kube-system.
		user := kubeconfigClient(t, getSecret(t, mcpNS, ar.Status.SecretRef.Name))
		if err := user.List(ctx, &corev1.SecretList{}, client.InNamespace("kube-system")); err != nil {
			t.Errorf("%s: the granted token cannot list Secrets in kube-system: %v", name, err)
		}
	}

	// Taking the grant back revokes both.
	setPolicy(t, e.sp.Name, nil)
	for _, name := range names {
		waitDenied(t, mcpNS, name, policy.RuleCeiling, "permissions[0]: * */*")
	}
}

func setPolicy(t *testing.T, name string, p *providerv1alpha1.AccessPolicy) {
	t.Helper()
	sp := &providerv1alpha1.ServiceProvider{}
	if err := optest.Platform.Client.Get(t.Context(), client.ObjectKey{Name: name}, sp); err != nil {
		t.Fatal(err)
	}
	sp.Spec.AccessPolicy = p
	if err := optest.Platform.Client.Update(t.Context(), sp); err != nil {
		t.Fatalf("set spec.accessPolicy of ServiceProvider %s: %v", name, err)
	}
}

// waitDeniedAgain waits until a request that is already Denied is Denied
// by rule (its provider's policy changed), with detail in the message and
// nothing granted. No new event is awaited: the event recorder counts an
// event of the same reason and action as a repeat of the first, whose
// note named the earlier rule.
func waitDeniedAgain(t *testing.T, ns, name, rule, detail string) {
	t.Helper()
	want := fmt.Sprintf("rule %q", rule)
	optest.Eventually(t, 30*time.Second, fmt.Sprintf("AccessRequest %s denied by %s", name, want), func(ctx context.Context) (bool, error) {
		ar := &clustersv1alpha1.AccessRequest{}
		if err := optest.Platform.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ar); err != nil {
			return false, err
		}
		_, _, msg := optest.ReadyReason(ar.Status.Conditions)
		if ar.Status.Phase != clustersv1alpha1.RequestDenied || !strings.Contains(msg, want) || !strings.Contains(msg, detail) {
			return false, fmt.Errorf("phase %q: %s", ar.Status.Phase, msg)
		}
		return true, nil
	})
	ar := &clustersv1alpha1.AccessRequest{}
	if err := optest.Platform.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, ar); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(ar.Finalizers, access.Finalizer) || ar.Status.SecretRef != nil || len(labelled(t, string(ar.UID))) != 0 {
		t.Errorf("denied request %s holds a grant: finalizers %v, secretRef %v, objects %v", name, ar.Finalizers, ar.Status.SecretRef, labelled(t, string(ar.UID)))
	}
}
