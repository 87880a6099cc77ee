package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EchoSpec is what a tenant orders: a greeting served in its control plane.
type EchoSpec struct {
	// Message is the text of the Greeting the provider creates in the
	// tenant's control plane.
	// +kubebuilder:validation:MinLength=1
	Message string `json:"message"`
}

// EchoStatus follows openMCP's common status: phase, observed generation
// and conditions.
type EchoStatus struct {
	// ObservedGeneration is the generation the status describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is Ready, Progressing or Terminating.
	Phase string `json:"phase,omitempty"`
	// Conditions hold the Ready condition.
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Echo is the ServiceProviderAPI of the compatibility provider: one per
// tenant control plane, named like it and in its namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=onboarding"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
type Echo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EchoSpec   `json:"spec,omitempty"`
	Status EchoStatus `json:"status,omitempty"`
}

// EchoList is a list of Echo.
//
// +kubebuilder:object:root=true
type EchoList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Echo `json:"items"`
}

// Finalizer is the finalizer the runtime keeps on an Echo until its
// Greeting and cluster access are gone.
func (e *Echo) Finalizer() string { return GroupVersion.Group + "/finalizer" }

// GetStatus returns the status, which the runtime compares before writing.
func (e *Echo) GetStatus() any { return e.Status }

// GetConditions returns the conditions for the runtime to set.
func (e *Echo) GetConditions() *[]metav1.Condition { return &e.Status.Conditions }

// SetPhase sets status.phase.
func (e *Echo) SetPhase(phase string) { e.Status.Phase = phase }

// SetObservedGeneration sets status.observedGeneration.
func (e *Echo) SetObservedGeneration(g int64) { e.Status.ObservedGeneration = g }
