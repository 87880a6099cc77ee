// Package v2alpha1 contains the core.openmcp.cloud/v2alpha1 API group with
// the ManagedControlPlane kind: a tenant's control plane, requested on the
// onboarding cluster. Its controller obtains an MCP cluster through a
// ClusterRequest, issues access through AccessRequests and publishes the
// resulting kubeconfig Secrets in status.access.
//
// openMCP later renamed this kind (ManagedControlPlaneV2, then ControlPlane
// in core.open-control-plane.io); Marketplane keeps the original group and
// kind name with the fields of the later spec.
//
// +kubebuilder:object:generate=true
// +groupName=core.openmcp.cloud
package v2alpha1
