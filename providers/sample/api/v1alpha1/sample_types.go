package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/api/common"
)

// SampleSpec is what a tenant asks for: the options of the domain service
// the provider offers.
type SampleSpec struct {
	// Version is the version of the domain service. It must be one of the
	// versions the ProviderConfig offers (spec.versions); empty means the
	// first of them. Replace this example field with what your service
	// offers.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Version string `json:"version,omitempty"`
}

// SampleStatus holds the status fields every ServiceProviderAPI carries.
// The service provider runtime writes them.
type SampleStatus struct {
	// Conditions are Ready (the service can be used), Synced (the last
	// reconcile worked) and, while deletion waits for the tenant to remove
	// their objects, DeletionBlocked.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation of the spec last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase summarises the state: Pending, Progressing, Ready, Failed or
	// Terminating.
	// +optional
	Phase string `json:"phase,omitempty"`
}

// Sample is the ServiceProviderAPI of the sample provider. It is named
// like the ManagedControlPlane it is for, in the same namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,path=samples
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=onboarding"
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Sample struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SampleSpec   `json:"spec,omitempty"`
	Status SampleStatus `json:"status,omitempty"`
}

// SampleList is a list of Sample.
//
// +kubebuilder:object:root=true
type SampleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Sample `json:"items"`
}

// The methods below implement spruntime.API, the interface the provider
// runtime drives a ServiceProviderAPI object through. The controller checks
// that at compile time: an API package imports no runtime.

// GetConditions implements spruntime.API.
func (o *Sample) GetConditions() *[]metav1.Condition { return &o.Status.Conditions }

// GetPhase implements spruntime.API.
func (o *Sample) GetPhase() common.Phase { return common.Phase(o.Status.Phase) }

// SetPhase implements spruntime.API.
func (o *Sample) SetPhase(p common.Phase) { o.Status.Phase = string(p) }

// SetObservedGeneration implements spruntime.API.
func (o *Sample) SetObservedGeneration(g int64) { o.Status.ObservedGeneration = g }
