package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ClusterProviderSpec is the desired deployment of a cluster provider.
type ClusterProviderSpec struct {
	DeploymentSpec `json:",inline"`
}

// ClusterProviderStatus is the observed state of a cluster provider.
type ClusterProviderStatus struct {
	DeploymentStatus `json:",inline"`
}

// ClusterProvider deploys a provider that creates Kubernetes clusters and
// access to them: it answers ClusterRequests and AccessRequests for the
// ClusterProfiles that name it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cp,categories=openmcp
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=platform"
// +kubebuilder:selectablefield:JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=".spec.image"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=".spec.runReplicas",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type ClusterProvider struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired deployment.
	// +required
	Spec ClusterProviderSpec `json:"spec,omitempty"`
	// Status is the observed state.
	// +optional
	Status ClusterProviderStatus `json:"status,omitempty"`
}

// ClusterProviderList is a list of ClusterProviders.
//
// +kubebuilder:object:root=true
type ClusterProviderList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ClusterProviders.
	Items []ClusterProvider `json:"items"`
}
