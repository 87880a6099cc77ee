package v1alpha1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/marketplane/marketplane/api/common"
)

// ClusterSpec is the desired state of a cluster.
type ClusterSpec struct {
	// Profile names the ClusterProfile, and thereby the ClusterProvider,
	// that creates and manages this cluster. It cannot be changed.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="profile is immutable"
	Profile string `json:"profile"`

	// ClusterConfigs name provider-specific configuration objects in the
	// Cluster's namespace. Their kind depends on the provider.
	// +optional
	ClusterConfigs []common.LocalObjectReference `json:"clusterConfigs,omitempty"`

	// Kubernetes configures the cluster's Kubernetes.
	// +optional
	Kubernetes K8sConfiguration `json:"kubernetes,omitempty"`

	// Purposes are the purposes the cluster serves, such as mcp or
	// workload.
	// +optional
	// +kubebuilder:validation:MinItems=1
	Purposes []string `json:"purposes,omitempty"`

	// Tenancy says whether the cluster serves one request or several.
	// +required
	Tenancy Tenancy `json:"tenancy"`
}

// K8sConfiguration configures a cluster's Kubernetes.
type K8sConfiguration struct {
	// Version is the Kubernetes version, possibly partial such as "1.36".
	// +optional
	Version string `json:"version,omitempty"`
}

// Endpoint is a named URL under which a cluster can be reached.
type Endpoint struct {
	// Name identifies the endpoint, such as apiserver-external.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// URL is the endpoint's address.
	// +required
	// +kubebuilder:validation:MinLength=1
	URL string `json:"url"`
}

// ClusterStatus is the observed state of a cluster.
type ClusterStatus struct {
	common.Status `json:",inline"`

	// APIServer is the API server URL.
	//
	// Deprecated: use the apiserver-external entry of Endpoints.
	// +optional
	APIServer string `json:"apiServer,omitempty"`

	// ProviderStatus is free-form state of the ClusterProvider.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	ProviderStatus *runtime.RawExtension `json:"providerStatus,omitempty"`

	// Endpoints are the URLs under which the cluster can be reached.
	// +optional
	// +listType=map
	// +listMapKey=name
	Endpoints []Endpoint `json:"endpoints,omitempty"`
}

// Cluster is a Kubernetes cluster the platform manages, created and kept by
// the ClusterProvider its profile names.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cl,categories=openmcp
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=platform"
// +kubebuilder:selectablefield:JSONPath=".spec.profile"
// +kubebuilder:selectablefield:JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Profile",type=string,JSONPath=".spec.profile"
// +kubebuilder:printcolumn:name="Purposes",type=string,JSONPath=".spec.purposes"
// +kubebuilder:printcolumn:name="Tenancy",type=string,JSONPath=".spec.tenancy"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.metadata.labels["clusters.openmcp.cloud/k8sversion"]`
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.metadata.labels["clusters.openmcp.cloud/provider"]`,priority=1
// +kubebuilder:printcolumn:name="Info",type=string,JSONPath=`.metadata.annotations["clusters.openmcp.cloud/providerinfo"]`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	// +required
	Spec ClusterSpec `json:"spec,omitempty"`
	// Status is the observed state.
	// +optional
	Status ClusterStatus `json:"status,omitempty"`
}

// RequestUIDs returns the UIDs of the ClusterRequests the cluster serves,
// read from its request finalizers, without duplicates.
func (c *Cluster) RequestUIDs() []string {
	seen := map[string]bool{}
	var uids []string
	for _, f := range c.Finalizers {
		uid, ok := strings.CutPrefix(f, RequestFinalizerOnClusterPrefix)
		if !ok || uid == "" || seen[uid] {
			continue
		}
		seen[uid] = true
		uids = append(uids, uid)
	}
	return uids
}

// ClusterList is a list of Clusters.
//
// +kubebuilder:object:root=true
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Clusters.
	Items []Cluster `json:"items"`
}
