package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/api/common"
)

// ClusterRequestSpec asks for a cluster of a purpose. It cannot be changed
// after creation: to ask for something else, create another request.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable; delete the ClusterRequest and create a new one to request a different cluster"
type ClusterRequestSpec struct {
	// Purpose is the purpose the requested cluster must serve, such as mcp
	// or workload. The scheduler maps it to a cluster template.
	// +required
	// +kubebuilder:validation:MinLength=1
	Purpose string `json:"purpose"`

	// WaitForClusterDeletion says whether the request's finalizer stays until
	// the Cluster it caused to be deleted is gone. Unset means true for
	// Exclusive clusters and false for Shared ones. It has no effect when
	// deleting the request does not delete the Cluster.
	// +optional
	WaitForClusterDeletion *bool `json:"waitForClusterDeletion,omitempty"`
}

// ClusterRequestStatus is the observed state of a cluster request.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.cluster) || has(self.cluster)",message="status.cluster cannot be removed once set"
type ClusterRequestStatus struct {
	common.Status `json:",inline"`

	// Cluster is the Cluster that was assigned when the request was
	// granted. Once set it never changes; the Cluster carries a finalizer
	// with the request's UID from which it can be recovered.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="status.cluster is immutable once set"
	Cluster *common.ObjectReference `json:"cluster,omitempty"`
}

// IsGranted reports whether the request has been granted.
func (s ClusterRequestStatus) IsGranted() bool { return s.Phase == RequestGranted }

// IsDenied reports whether the request has been denied.
func (s ClusterRequestStatus) IsDenied() bool { return s.Phase == RequestDenied }

// IsPending reports whether the request has been neither granted nor denied.
func (s ClusterRequestStatus) IsPending() bool {
	return s.Phase == "" || s.Phase == RequestPending
}

// ClusterRequest asks the scheduler for a cluster of a purpose. The
// scheduler assigns an existing shared cluster or creates a new Cluster and
// records it in status.cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cr;creq,categories=openmcp
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=platform"
// +kubebuilder:selectablefield:JSONPath=".spec.purpose"
// +kubebuilder:selectablefield:JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Purpose",type=string,JSONPath=".spec.purpose"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=".status.cluster.name"
// +kubebuilder:printcolumn:name="Cluster-NS",type=string,JSONPath=".status.cluster.namespace"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type ClusterRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the request.
	// +required
	Spec ClusterRequestSpec `json:"spec,omitempty"`
	// Status is the observed state.
	// +optional
	Status ClusterRequestStatus `json:"status,omitempty"`
}

// FinalizerForCluster returns the finalizer that the assigned Cluster
// carries for this request.
func (r *ClusterRequest) FinalizerForCluster() string {
	return RequestFinalizerOnClusterPrefix + string(r.UID)
}

// ClusterRequestList is a list of ClusterRequests.
//
// +kubebuilder:object:root=true
type ClusterRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ClusterRequests.
	Items []ClusterRequest `json:"items"`
}
