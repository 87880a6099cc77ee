package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/api/common"
)

// ClusterProfileSpec says which provider creates clusters of a profile,
// with which configuration, and which Kubernetes versions it offers.
type ClusterProfileSpec struct {
	// ProviderRef names the ClusterProvider.
	// +required
	ProviderRef common.LocalObjectReference `json:"providerRef"`

	// ProviderConfigRef names the provider's cluster-scoped ProviderConfig.
	// +required
	ProviderConfigRef common.LocalObjectReference `json:"providerConfigRef"`

	// SupportedVersions are the Kubernetes versions clusters of this
	// profile can have.
	// +required
	// +listType=map
	// +listMapKey=version
	SupportedVersions []SupportedK8sVersion `json:"supportedVersions"`
}

// SupportedK8sVersion is a Kubernetes version a profile offers.
type SupportedK8sVersion struct {
	// Version is the full Kubernetes version, such as "1.36.3".
	// +required
	// +kubebuilder:validation:MinLength=5
	Version string `json:"version"`

	// Deprecated marks a version new clusters should not use.
	// +optional
	Deprecated bool `json:"deprecated,omitempty"`
}

// ClusterProfile ties a ClusterProvider to one of its configurations. A
// Cluster names the profile it is created by.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=cprof;profile,categories=openmcp
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=platform"
// +kubebuilder:selectablefield:JSONPath=".spec.providerRef.name"
// +kubebuilder:selectablefield:JSONPath=".spec.providerConfigRef.name"
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=".spec.providerRef.name"
// +kubebuilder:printcolumn:name="Config",type=string,JSONPath=".spec.providerConfigRef.name"
// +kubebuilder:printcolumn:name="Versions",type=string,JSONPath=".spec.supportedVersions[*].version",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type ClusterProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the profile.
	// +required
	Spec ClusterProfileSpec `json:"spec,omitempty"`
}

// ClusterProfileList is a list of ClusterProfiles.
//
// +kubebuilder:object:root=true
type ClusterProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ClusterProfiles.
	Items []ClusterProfile `json:"items"`
}
