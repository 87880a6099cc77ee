// Package mcp implements the control-plane controller of the provider
// operator. It serves two kinds with the same fields through one
// representation (the object interface): core.openmcp.cloud
// ManagedControlPlane and openMCP's current core.open-control-plane.io
// ControlPlane, with one controller per kind running the same code. "MCP"
// below means either.
//
// An MCP M in namespace NS lives on the onboarding cluster; everything it
// needs is requested on the platform cluster, in its platform namespace
// corev2alpha1.PlatformNamespace(M): openMCP's StableMCPNamespace(NS, M)
// for new MCPs, the legacy (SHA-1) namespace for ManagedControlPlanes whose
// ClusterRequest an earlier version created there, recorded in the
// annotation core.openmcp.cloud/platform-namespace. The namespace carries
// core.openmcp.cloud/mcp-kind, the kind that holds it: an MCP of the other
// kind with the same namespace and name is Ready=False with reason
// NameConflict and gets nothing. Every object created for the MCP is
// labelled with core.openmcp.cloud/mcp-name and
// core.openmcp.cloud/mcp-namespace:
//
//   - the ClusterRequest M, of purpose "mcp" or the value of the
//     core.openmcp.cloud/purpose-override label, else of openMCP's
//     core.openmcp.cloud/purpose label (condition
//     ClusterRequestReady; a denied request passes its reason through);
//   - one AccessRequest "M.<token>" per entry of spec.iam.tokens, with
//     requestRef to the ClusterRequest, the entry's permissions and
//     roleRefs, and the label core.openmcp.cloud/token-name (conditions
//     AccessReady.<token> and AllAccessReady). Token names cannot contain
//     dots, so the name is unambiguous.
//
// The Secret of each granted AccessRequest is copied (all keys, among them
// "kubeconfig") to the onboarding cluster as Secret "M.<token>.kubeconfig" in
// NS, controlled by the MCP, kept equal to the source when the token is
// refreshed, and named in status.access[<token>]. status.endpoints and the
// Cluster.<type> conditions mirror the granted Cluster. Ready is True when
// the cluster is granted and every access is ready. OIDC access
// (spec.iam.oidc) cannot be issued by Marketplane's cluster providers yet:
// each configured provider gets AccessReady.<provider>=False with reason
// OIDCNotSupported, so such an MCP does not become Ready. A name longer than
// 63 characters (the limit of label values) is Ready=False with reason
// InvalidName.
//
// Deleting a ManagedControlPlane first deletes the service objects that
// belong to it: for every kind a ServiceProvider registered in
// status.resources and owns the API group of (policy.Ownership; a Secret or
// another provider's kind is never deleted), the object of that kind named
// M in NS on the onboarding
// cluster (kinds the onboarding cluster does not serve, and cluster-scoped
// kinds, are skipped). Service finalizers (services.openmcp.cloud/...) on the
// MCP are waited for too (AllServicesDeleted, polled). Then the
// AccessRequests are deleted and waited for, then the ClusterRequest
// (AllClusterRequestsDeleted, through watches); then the copied Secrets and
// the platform namespace are deleted, the latter without waiting, and the
// finalizer core.openmcp.cloud/mcp goes.
//
// The controller reads and writes two clusters, so it is built from two
// cluster.Cluster values (the onboarding and the platform cluster) and
// watches both; see NewReconciler and Reconciler.SetupWithManager. Secrets
// are watched as metadata only and read from the API servers, so that no
// cache holds the credentials of a whole cluster.
package mcp
