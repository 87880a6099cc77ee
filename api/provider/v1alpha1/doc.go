// Package v1alpha1 contains the openmcp.cloud/v1alpha1 API group: the
// provider kinds ServiceProvider, ClusterProvider and PlatformService that
// the provider operator deploys on the platform cluster by the init/run
// contract (an init Job per generation, then a run Deployment).
//
// The three kinds are cluster-scoped and share DeploymentSpec and
// DeploymentStatus. Field names, defaults, enums, conditions and reasons
// follow openMCP's openmcp-operator so that openMCP manifests apply
// unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=openmcp.cloud
package v1alpha1
