// Package v1alpha1 contains the clusters.openmcp.cloud/v1alpha1 API group,
// the cluster model of the platform: Clusters and the ClusterProfiles that
// say which ClusterProvider creates them, ClusterRequests that ask the
// scheduler for a cluster of a purpose, and AccessRequests that ask a
// ClusterProvider for credentials to a cluster, delivered as a kubeconfig
// Secret.
//
// Field names, enums, scopes and validation rules follow openMCP's
// openmcp-operator so that openMCP manifests apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=clusters.openmcp.cloud
package v1alpha1
