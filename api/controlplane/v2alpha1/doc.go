// Package v2alpha1 contains the core.open-control-plane.io/v2alpha1 API
// group with the ControlPlane kind: openMCP's current name (openmcp-operator
// v1.0 and later) for the tenant control plane that Marketplane also serves
// as core.openmcp.cloud/v2alpha1 ManagedControlPlane.
//
// Both kinds have the same fields (ControlPlane reuses the spec and status
// types of api/core/v2alpha1, so that one controller serves both through one
// representation) and are reconciled by the same controller
// (internal/operator/mcp). The labels, annotations and condition types of a
// ControlPlane are those of package api/core/v2alpha1, whose group
// core.openmcp.cloud openMCP keeps for them as well (its OldGroupName).
//
// The package is a separate directory, rather than a second group in
// api/core/v2alpha1, because controller-gen derives a package's API group
// from its +groupName marker: one Go package serves exactly one group.
//
// +kubebuilder:object:generate=true
// +groupName=core.open-control-plane.io
package v2alpha1
