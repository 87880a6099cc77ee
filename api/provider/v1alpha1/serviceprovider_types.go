package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ServiceProviderSpec is the desired deployment of a service provider.
type ServiceProviderSpec struct {
	DeploymentSpec `json:",inline"`
}

// ServiceProviderStatus is the observed state of a service provider.
type ServiceProviderStatus struct {
	DeploymentStatus `json:",inline"`

	// Resources lists the kinds of service objects the provider serves on
	// the onboarding cluster. The provider registers them itself (usually
	// from its init command); the operator never overwrites them. When a
	// ManagedControlPlane is deleted, the object of each kind that has the
	// ManagedControlPlane's name and namespace is deleted.
	// +optional
	Resources []metav1.GroupVersionKind `json:"resources,omitempty"`
}

// ServiceProvider deploys a provider that offers a managed service to
// tenants: it runs on the platform cluster and serves its own API on the
// onboarding cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=sp,categories=openmcp
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=platform"
// +kubebuilder:selectablefield:JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=".spec.image"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=".spec.runReplicas",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type ServiceProvider struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired deployment.
	// +required
	Spec ServiceProviderSpec `json:"spec,omitempty"`
	// Status is the observed state.
	// +optional
	Status ServiceProviderStatus `json:"status,omitempty"`
}

// ServiceProviderList is a list of ServiceProviders.
//
// +kubebuilder:object:root=true
type ServiceProviderList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ServiceProviders.
	Items []ServiceProvider `json:"items"`
}
