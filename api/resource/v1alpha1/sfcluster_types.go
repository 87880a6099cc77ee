/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeconfigSecretKey is the key, in the Secret named by an SFCluster's
// spec.secretRef, that holds the kubeconfig of the cluster.
const KubeconfigSecretKey = "kubeconfig"

// PrimaryClusterID is the name Service Fabrik gives the SFCluster of the
// cluster it runs on when that cluster also hosts instances.
const PrimaryClusterID = "1"

// SFClusterSpec tells how to reach a cluster and how much may be scheduled
// on it.
type SFClusterSpec struct {
	// secretRef is the name of a Secret in the SFCluster's namespace whose
	// key "kubeconfig" holds a kubeconfig for the cluster.
	SecretRef string `json:"secretRef"`

	// totalCapacity is the capacity of the cluster, including what a node
	// autoscaler may add. When set, the capacity-aware scheduler uses it
	// instead of the capacity of the current nodes.
	// +optional
	TotalCapacity corev1.ResourceList `json:"totalCapacity,omitempty"`

	// schedulingLimitPercentage is how full, in percent of its capacity, the
	// cluster may become before the scheduler treats it as full.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	SchedulingLimitPercentage int32 `json:"schedulingLimitPercentage,omitempty"`

	// unschedulable cordons the cluster: the scheduler places no new
	// instances on it, while the instances already there stay. This field is
	// a Marketplane extension; Service Fabrik has no way to cordon a cluster.
	// +optional
	Unschedulable bool `json:"unschedulable,omitempty"`
}

// SFClusterStatus is what the scheduler observed about a cluster.
type SFClusterStatus struct {
	// serviceInstanceCount is the number of instances scheduled on the
	// cluster.
	// +optional
	ServiceInstanceCount int32 `json:"serviceInstanceCount,omitempty"`

	// currentCapacity is the sum of the allocatable resources of the
	// cluster's current nodes.
	// +optional
	CurrentCapacity corev1.ResourceList `json:"currentCapacity,omitempty"`

	// totalCapacity is the capacity the scheduler assumes: spec.totalCapacity
	// when set, the current capacity otherwise.
	// +optional
	TotalCapacity corev1.ResourceList `json:"totalCapacity,omitempty"`

	// requests is the sum of the resource requests of all pods on the
	// cluster.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`

	// observedGeneration is the metadata.generation that the status
	// describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions describe the cluster, for example whether it is reachable
	// with the kubeconfig (Ready).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SFCluster registers one cluster that service instances can be scheduled
// on. Its name is the cluster id that instances record in spec.clusterId.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sfc,categories=servicefabrik
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=platform"
// +kubebuilder:printcolumn:name="numserviceinstance",type=integer,JSONPath=`.status.serviceInstanceCount`
// +kubebuilder:printcolumn:name="schedulinglimit",type=integer,JSONPath=`.spec.schedulingLimitPercentage`,priority=1
// +kubebuilder:printcolumn:name="unschedulable",type=boolean,JSONPath=`.spec.unschedulable`
// +kubebuilder:printcolumn:name="ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="age",type=date,JSONPath=`.metadata.creationTimestamp`
type SFCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec tells how to reach the cluster and how much may be scheduled on
	// it.
	Spec SFClusterSpec `json:"spec"`

	// status is what the scheduler observed about the cluster.
	// +optional
	Status SFClusterStatus `json:"status,omitempty"`
}

// SFClusterList is a list of SFClusters.
//
// +kubebuilder:object:root=true
type SFClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the SFClusters.
	Items []SFCluster `json:"items"`
}
