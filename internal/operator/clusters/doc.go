// Package clusters implements the cluster API of the provider operator on
// the platform cluster: the Cluster registry, ClusterRequest scheduling and
// the static cluster provider.
//
// A Cluster is reached through an admin kubeconfig kept in a Secret in the
// Cluster's namespace and named by the annotation KubeconfigSecretAnnotation
// (key "kubeconfig"). Registering an existing cluster this way is the static
// cluster provider; AdminConfig turns the Secret into a rest.Config for the
// other controllers (AccessRequests, ManagedControlPlanes).
//
// ClusterReconciler checks every Cluster's API server (GET /version)
// periodically and reports Ready, phase, status.endpoints and the Kubernetes
// version; a missing Secret, an invalid kubeconfig or an unreachable server
// is Ready=False with a reason and is retried with a backoff that grows
// while the cluster stays not ready.
//
// RequestReconciler schedules ClusterRequests: a purpose maps to a tenancy
// (by default mcp is Exclusive, everything else Shared). A Shared request is
// granted the Ready Shared cluster of its purpose that serves the fewest
// requests; an Exclusive request a Ready Exclusive cluster of its purpose
// that serves none, or else one a Provisioner creates. Every grant puts the
// finalizer request.clusters.openmcp.cloud/<request uid> on the Cluster; the
// finalizers count a cluster's tenants. A request nothing fits is Denied and
// re-evaluated whenever a Cluster changes.
package clusters
