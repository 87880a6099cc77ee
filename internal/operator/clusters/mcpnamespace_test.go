package clusters_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/clusters"
	"github.com/marketplane/marketplane/internal/operator/internal/optest"
	"github.com/marketplane/marketplane/internal/operator/policy"
	"github.com/marketplane/marketplane/pkg/crdinstall"
)

// TestClusterRequestsInMCPNamespaces is issue #11 item 2 for
// ClusterRequests: openMCP's clusteraccess library creates a provider's
// workload ClusterRequest in each tenant's MCP namespace, labelled
// openmcp.cloud/managed-by=<provider>. A provider with 20 tenants gets all
// 20 (maxClusterRequests counts per namespace); a namespace still holds at
// most maxClusterRequests of its requests; exclusive clusters count over all
// namespaces; a namespace of an MCP that is not its tenant, an unlabelled
// request, or one naming no provider is Denied; the MCP's own request is
// granted as before.
func TestClusterRequestsInMCPNamespaces(t *testing.T) {
	t.Parallel()
	optest.StartEnv(t)
	ctx := t.Context()
	const group, provider, tenants = "crmcp.services.openmcp.cloud", "cr-mcp", 20
	kind := schema.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: "Widget"}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", ListKind: "WidgetList", Plural: "widgets", Singular: "widget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	if err := crdinstall.Apply(ctx, optest.Target.Client, "cr-mcp-test", 0, crd); err != nil {
		t.Fatal(err)
	}
	sp := &providerv1alpha1.ServiceProvider{ObjectMeta: metav1.ObjectMeta{Name: provider}}
	sp.Spec.Image = "example.com/cr-mcp:v1"
	mustCreate(t, optest.Platform.Client, sp)
	sp.Status.Resources = []metav1.GroupVersionKind{metav1.GroupVersionKind(kind)}
	if err := optest.Platform.Client.Status().Update(ctx, sp); err != nil {
		t.Fatal(err)
	}
	providerNS := optest.NewProviderNamespace(t, "sp-cr-mcp", policy.KindServiceProvider, sp)
	clustersNS := optest.NewNamespace(t, "cr-mcp-clusters")

	// The tenants' MCP namespaces, as the MCP controller makes them; every
	// tenant but the stranger has a Widget named like its MCP.
	mcpNamespace := func(tenant string, widget bool) string {
		t.Helper()
		labels := map[string]string{corev2alpha1.MCPNameLabel: "demo", corev2alpha1.MCPNamespaceLabel: tenant}
		mustCreate(t, optest.Platform.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: corev2alpha1.StableMCPNamespace(tenant, "demo"), Labels: labels}})
		mustCreate(t, optest.Target.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}})
		if widget {
			w := &unstructured.Unstructured{}
			w.SetGroupVersionKind(kind)
			w.SetNamespace(tenant)
			w.SetName("demo")
			mustCreate(t, optest.Target.Client, w)
		}
		return corev2alpha1.StableMCPNamespace(tenant, "demo")
	}
	var mcpNS []string
	for i := range tenants {
		mcpNS = append(mcpNS, mcpNamespace(fmt.Sprintf("crmcp-t%d", i), true))
	}
	stranger := mcpNamespace("crmcp-stranger", false)

	optest.StartManagerFor(t, append([]string{providerNS, clustersNS, stranger}, mcpNS...), func(mgr ctrl.Manager) error {
		if err := clusters.NewClusterReconciler(mgr.GetClient(), clusters.WithClusterControllerName("cluster-cr-mcp")).SetupWithManager(mgr); err != nil {
			return err
		}
		return clusters.NewRequestReconciler(mgr.GetClient(), clusters.WithRequestControllerName("clusterrequest-cr-mcp")).SetupWithManager(mgr)
	})
	optest.RegisterCluster(t, clustersNS, "onboarding", optest.Target.Kubeconfig, clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeOnboarding)
	optest.RegisterCluster(t, clustersNS, "shared", optest.Target.Kubeconfig, clustersv1alpha1.TenancyShared, clustersv1alpha1.PurposeWorkload)
	for _, name := range []string{"x1", "x2"} {
		optest.RegisterCluster(t, clustersNS, name, optest.Target.Kubeconfig, clustersv1alpha1.TenancyExclusive, clustersv1alpha1.PurposeMCP)
	}
	for _, name := range []string{"shared", "x1", "x2"} {
		optest.WaitClusterReason(t, clustersNS, name, metav1.ConditionTrue, clusters.ReasonReachable, 60*time.Second)
	}

	labelled := func(ns, name, purpose string, labels map[string]string) {
		t.Helper()
		mustCreate(t, optest.Platform.Client, &clustersv1alpha1.ClusterRequest{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec:       clustersv1alpha1.ClusterRequestSpec{Purpose: purpose},
		})
	}
	ours := map[string]string{providerv1alpha1.ManagedByLabel: provider}

	// A workload cluster for each of the 20 tenants: more than the 8 of
	// maxClusterRequests, which counts per namespace.
	for _, ns := range mcpNS {
		labelled(ns, "cr-mcp--demo--workload", clustersv1alpha1.PurposeWorkload, ours)
	}
	for _, ns := range mcpNS {
		waitRequestPhase(t, ns, "cr-mcp--demo--workload", clustersv1alpha1.RequestGranted, clusters.ReasonGranted)
	}

	t.Run("PerNamespaceLimit", func(t *testing.T) {
		for i := range 8 {
			labelled(mcpNS[0], fmt.Sprintf("extra-%d", i), clustersv1alpha1.PurposeWorkload, ours)
		}
		for i := range 7 {
			waitRequestPhase(t, mcpNS[0], fmt.Sprintf("extra-%d", i), clustersv1alpha1.RequestGranted, clusters.ReasonGranted)
		}
		waitPolicyDenied(t, mcpNS[0], "extra-7", policy.RuleMaxClusterRequests)
	})
	t.Run("NotATenant", func(t *testing.T) {
		labelled(stranger, "cr-mcp--demo--workload", clustersv1alpha1.PurposeWorkload, ours)
		waitPolicyDenied(t, stranger, "cr-mcp--demo--workload", policy.RuleTenantsOnly)
	})
	t.Run("Unlabelled", func(t *testing.T) {
		labelled(mcpNS[1], "unlabelled", clustersv1alpha1.PurposeWorkload, nil)
		waitPolicyDenied(t, mcpNS[1], "unlabelled", policy.RuleRequestOwner)
	})
	t.Run("NamesNoProvider", func(t *testing.T) {
		labelled(mcpNS[1], "nobody--demo--workload", clustersv1alpha1.PurposeWorkload, map[string]string{providerv1alpha1.ManagedByLabel: "nobody"})
		waitPolicyDenied(t, mcpNS[1], "nobody--demo--workload", policy.RuleRequestOwner)
	})
	t.Run("MCPsOwnRequest", func(t *testing.T) {
		labelled(mcpNS[1], "demo", clustersv1alpha1.PurposeMCP, map[string]string{corev2alpha1.MCPNameLabel: "demo", corev2alpha1.MCPNamespaceLabel: "crmcp-t1"})
		waitRequestPhase(t, mcpNS[1], "demo", clustersv1alpha1.RequestGranted, clusters.ReasonGranted)
	})
	t.Run("ExclusiveCountAcrossNamespaces", func(t *testing.T) {
		cur := &providerv1alpha1.ServiceProvider{}
		if err := optest.Platform.Client.Get(ctx, client.ObjectKeyFromObject(sp), cur); err != nil {
			t.Fatal(err)
		}
		cur.Spec.AccessPolicy = &providerv1alpha1.AccessPolicy{MaxExclusiveClusters: ptr.To[int32](1)}
		if err := optest.Platform.Client.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
		labelled(mcpNS[2], "cr-mcp--demo--own", clustersv1alpha1.PurposeMCP, ours)
		waitRequestPhase(t, mcpNS[2], "cr-mcp--demo--own", clustersv1alpha1.RequestGranted, clusters.ReasonGranted)
		labelled(mcpNS[3], "cr-mcp--demo--own", clustersv1alpha1.PurposeMCP, ours)
		waitPolicyDenied(t, mcpNS[3], "cr-mcp--demo--own", policy.RuleMaxExclusive)
	})
}

func mustCreate(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
	}
}
