// Package v2alpha1 contains the core.open-control-plane.io/v2alpha1 API
// group with the ControlPlane kind, openMCP's current name for the tenant
// control plane that Marketplane also serves as core.openmcp.cloud/v2alpha1
// ManagedControlPlane: it reuses the spec and status types, labels and
// conditions of api/core/v2alpha1, and one controller serves both
// (internal/operator/mcp). It is a package of its own because controller-gen
// takes one API group per Go package.
//
// +kubebuilder:object:generate=true
// +groupName=core.open-control-plane.io
package v2alpha1
