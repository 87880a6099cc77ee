package v2alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
)

// ControlPlane is a tenant's control plane under openMCP's current API group
// and kind. It is the same object as a core.openmcp.cloud ManagedControlPlane:
// the same fields, the same controller, the same platform namespace for the
// same namespace and name. Because of the last, a ControlPlane and a
// ManagedControlPlane of one namespace and name cannot both exist: the one
// reconciled second stays Ready=False with reason NameConflict. Service
// objects for it live on the onboarding cluster with the same name and
// namespace; deleting the ControlPlane deletes them.
//
// The short name is only "ctrlp": openMCP's "cp" is the short name of
// ClusterProvider, and clusters that play both the platform and the
// onboarding role must not serve one short name twice.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ctrlp,categories=openmcp
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=onboarding"
// +kubebuilder:selectablefield:JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Kubeconfig",type=string,JSONPath=".status.access.default.name",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type ControlPlane struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	// +required
	Spec corev2alpha1.ManagedControlPlaneSpec `json:"spec,omitempty"`

	// Status is the observed state.
	// +optional
	Status corev2alpha1.ManagedControlPlaneStatus `json:"status,omitempty"`
}

// ControlPlaneSpec returns the spec, for code that serves both control-plane
// kinds.
func (c *ControlPlane) ControlPlaneSpec() *corev2alpha1.ManagedControlPlaneSpec { return &c.Spec }

// ControlPlaneStatus returns the status, for code that serves both
// control-plane kinds.
func (c *ControlPlane) ControlPlaneStatus() *corev2alpha1.ManagedControlPlaneStatus {
	return &c.Status
}

// ControlPlaneList is a list of ControlPlanes.
//
// +kubebuilder:object:root=true
type ControlPlaneList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ControlPlanes.
	Items []ControlPlane `json:"items"`
}
