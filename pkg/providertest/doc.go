// Package providertest runs a Marketplane landscape inside a test process,
// for integration tests of service providers (and of the runtime and the
// validation flow): real API servers for the platform cluster, the
// onboarding cluster, MCP clusters and optionally a workload cluster, and
// the provider operator's cluster controllers (Cluster, ClusterRequest,
// AccessRequest, ManagedControlPlane) running in-process against them.
//
// The target clusters are registered on the platform cluster as Cluster
// objects in ClustersNamespace, each with an admin kubeconfig Secret named
// by the annotation clusters.marketplane.io/kubeconfig-secret (the static
// cluster provider): "onboarding" (purpose onboarding, Shared), "mcp-0" ...
// (purpose mcp, Exclusive: one ManagedControlPlane each, see
// WithMCPClusters) and, with WithWorkloadCluster, "workload" (purpose
// workload, Shared). A provider under test therefore gets its clusters
// exactly as it does in a real landscape: through ClusterRequests and
// AccessRequests in its own namespace (ProviderNamespace).
//
// Starting API servers takes seconds, so a package should share one
// landscape: create it in TestMain with New and Stop it at the end, or with
// Start in a single test. CreateMCP creates a ManagedControlPlane on the
// onboarding cluster, waits until it is Ready and returns clients for its
// cluster; the MCP is deleted again when the test ends (or with DeleteMCP),
// which frees its cluster for the next one. An MCP cluster is reused, not
// recreated: what one test leaves there, the next test with an MCP on the
// same cluster sees.
//
// WithKCP serves MCPs with kcp workspaces instead: the landscape runs a kcp
// server and the kcp ClusterProvider's controller, registers the
// ClusterProfile KCPProfile, and an MCP's ClusterRequest gets a new Cluster
// of that profile in KCPClustersNamespace, the provider's namespace (no
// "mcp-N" Clusters are registered). A workspace runs no
// Pods, and a token of one workspace is refused by every other.
//
// InProcess and InProcessLandscape are targets of the validation flow
// (pkg/validation) on such a landscape. This package runs the operator, so
// it is the one package under pkg/ that imports internal/ packages.
package providertest
