// Package clusteraccess is how a service provider obtains the clusters it
// acts on: through the platform's ClusterRequest and AccessRequest APIs, on
// the platform cluster, with the provider's own identity and in its own
// namespace (POD_NAMESPACE), so that the kubeconfig Secrets the operator
// writes are readable by that provider only.
//
// A Manager, built with New from a client of the platform cluster, the
// provider's name and its namespace, offers three kinds of access:
//
//   - The tenant's MCP cluster of a service object (Manager.Clusters, or
//     For to use the Manager as the runtime's spruntime.ClusterAccess). A
//     service object is named like its ManagedControlPlane or ControlPlane;
//     the control plane's ClusterRequest is named like it too, in the
//     platform namespace corev2alpha1.StableMCPNamespace(namespace, name)
//     (openMCP's), or, for a control plane created by an earlier
//     Marketplane version, in corev2alpha1.LegacyMCPNamespace(namespace,
//     name), where the Manager looks when the first has none.
//     For each object the Manager creates one AccessRequest in the
//     provider's namespace, named "<provider>--mcp-<hash of namespace/name>",
//     labelled openmcp.cloud/onboarding-name and -namespace, whose
//     requestRef is that ClusterRequest. Release deletes it again, which
//     revokes the token.
//   - A shared workload cluster (WithWorkloadCluster): one ClusterRequest of
//     purpose workload and one AccessRequest, both "<provider>--workload",
//     used for every object and kept when objects go.
//   - Any other cluster by purpose, blocking until access is granted
//     (Manager.Request, Manager.Onboarding): what a provider's init and run
//     commands use to reach the onboarding cluster.
//
// Permissions are least privilege by default: the Manager asks for exactly
// the rules and role references it is given and nothing else; a provider
// that wants cluster-admin asks for it with the ClusterAdmin role reference.
//
// Clients are built from the Secret each granted AccessRequest names in
// status.secretRef. For the per-object and workload clusters they are
// cached per Secret resourceVersion: an unchanged Secret reuses its client,
// a refreshed token yields a new one on the next call. The long-lived
// clusters of Request re-read the token from the Secret while they are used,
// so they keep working when the operator refreshes the token. Kubeconfigs
// and tokens are never logged, and errors never quote them.
package clusteraccess
