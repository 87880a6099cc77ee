package providertest_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/pkg/providertest"
)

// TestLandscape checks the helpers on one landscape: an MCP's client
// reaches its cluster as the tenant's admin, the MCP created in a subtest
// is deleted when the subtest ends so that the only MCP cluster is free
// for the next, and a provider namespace can be reused once its deletion
// is through.
func TestLandscape(t *testing.T) {
	l := providertest.Start(t)
	ctx := t.Context()

	list := &clustersv1alpha1.ClusterList{}
	if err := l.Platform.Client.List(ctx, list, client.InNamespace(providertest.ClustersNamespace)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 || l.Cluster(providertest.OnboardingClusterName) != l.Onboarding || l.Cluster("mcp-0") != l.MCPClusters[0] || l.Workload != nil {
		t.Errorf("registered %d Clusters; want onboarding and mcp-0 only", len(list.Items))
	}

	for _, name := range []string{"first", "second"} {
		t.Run(name, func(t *testing.T) {
			l.ProviderNamespace(t, "sp-reused")
			mcp := l.CreateMCP(t, name, "tenants")
			if mcp.ClusterName != "mcp-0" || mcp.Admin != l.MCPClusters[0] {
				t.Fatalf("MCP granted Cluster %q, want mcp-0", mcp.ClusterName)
			}
			// The tenant's admin token may create namespaces; what it
			// creates is on the MCP cluster.
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "from-" + name}}
			if err := mcp.Client.Create(ctx, ns); err != nil {
				t.Fatalf("create with the MCP client: %v", err)
			}
			if err := mcp.Admin.Client.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}); err != nil {
				t.Errorf("the namespace is not on the MCP cluster: %v", err)
			}
		})
	}
}
