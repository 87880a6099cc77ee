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

// AnnotationRoundRobinSequence records, on the SFCluster the round-robin
// scheduler chose last, a sequence number that grows with every choice: the
// cluster with the highest one is where round-robin continues, also after
// a restart or a change of leader. It is Marketplane's.
const AnnotationRoundRobinSequence = "interoperator.marketplane.io/round-robin-sequence"

// PrimaryClusterID is the name Service Fabrik gives the SFCluster of the
// cluster it runs on when that cluster also hosts instances.
const PrimaryClusterID = "1"

// SFClusterFinalizer keeps an SFCluster that instances still run on: its
// deletion waits until no SFServiceInstance names it in spec.clusterId.
// It is the name Service Fabrik's offboarding controller uses, so that
// SFClusters it protected stay protected after a move.
const SFClusterFinalizer = "interoperator.servicefabrik.io"

// Condition types of an SFCluster.
const (
	// SFClusterConditionReady says whether the cluster's API server answers
	// with the kubeconfig of the SFCluster.
	SFClusterConditionReady = "Ready"
	// SFClusterConditionOffboarding is present while the cluster is
	// cordoned or being deleted: its message is the drain report, the
	// instances still on the cluster.
	SFClusterConditionOffboarding = "Offboarding"
)

// Reasons of the conditions of an SFCluster. A Ready=False condition may
// also carry a reason of the inter-operator's cluster registry, such as
// InvalidKubeconfig.
const (
	// SFClusterReasonReachable: the API server answered.
	SFClusterReasonReachable = "Reachable"
	// SFClusterReasonUnreachable: the API server did not answer in time or
	// refused the connection.
	SFClusterReasonUnreachable = "Unreachable"
	// SFClusterReasonUnauthorized: the API server refused the credentials
	// of the kubeconfig.
	SFClusterReasonUnauthorized = "Unauthorized"
	// SFClusterReasonCordoned: the cluster takes no new instances; the
	// message lists those still there.
	SFClusterReasonCordoned = "Cordoned"
	// SFClusterReasonDrained: the cluster is cordoned and no instance is
	// left; it can be deleted at once.
	SFClusterReasonDrained = "Drained"
	// SFClusterReasonDeletionBlocked: the SFCluster was deleted while
	// instances still run there; the deletion completes when they are gone.
	SFClusterReasonDeletionBlocked = "DeletionBlocked"
)

// ProvisioningMode says who provisions the instances of an SFCluster.
type ProvisioningMode string

// Provisioning modes of an SFCluster.
const (
	// ProvisioningCentral: the inter-operator renders the instances and
	// applies the objects to the cluster. An empty mode means central.
	ProvisioningCentral ProvisioningMode = "central"
	// ProvisioningReplicate: the instances and bindings are replicated to
	// the cluster, where an inter-operator provisions them (Service
	// Fabrik's MultiClusterDeployer).
	ProvisioningReplicate ProvisioningMode = "replicate"
)

// SFClusterSpec tells how to reach a cluster and how much may be scheduled
// on it.
type SFClusterSpec struct {
	// secretRef is the name of a Secret in the SFCluster's namespace whose
	// key "kubeconfig" holds a kubeconfig for the cluster.
	SecretRef string `json:"secretRef"`

	// totalCapacity is the capacity of the cluster, including what a node
	// autoscaler may add. When set, the capacity-aware scheduler uses it
	// instead of the capacity of the current nodes. Each quantity is bounded
	// (docs/api.md, "Quantities"); at most 128 resource names, where a node
	// lists about ten.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:MaxProperties=128
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

	// provisioningMode says who renders the instances placed on the
	// cluster. central (the default): the inter-operator applies them
	// through the kubeconfig of secretRef. replicate: Service Fabrik's
	// MultiClusterDeployer; the SFServiceInstances and SFServiceBindings are
	// copied to the cluster, where an inter-operator of its own provisions
	// them, and their status and bind Secrets are copied back. This field
	// is a Marketplane extension (docs/multicluster.md).
	// +optional
	// +kubebuilder:validation:Enum=central;replicate
	ProvisioningMode ProvisioningMode `json:"provisioningMode,omitempty"`

	// components are what the cluster needs installed before instances are
	// placed on it, for example the Helm chart of a service operator
	// (sfcluster_components.go). The scheduler places no instance on the
	// cluster until they are installed (condition ComponentsReady). This
	// field is a Marketplane extension.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Components []SFClusterComponent `json:"components,omitempty"`
}

// SFClusterStatus is what the inter-operator observed about a cluster.
type SFClusterStatus struct {
	// serviceInstanceCount is the number of instances scheduled on the
	// cluster (SFServiceInstances whose spec.clusterId names it, those
	// being deleted included).
	// +optional
	ServiceInstanceCount int32 `json:"serviceInstanceCount,omitempty"`

	// currentCapacity is the sum of the allocatable resources of the
	// cluster's current nodes; empty when it has none. While the cluster is
	// unreachable it keeps the last value seen.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:MaxProperties=128
	CurrentCapacity corev1.ResourceList `json:"currentCapacity,omitempty"`

	// totalCapacity is the capacity the scheduler assumes: spec.totalCapacity
	// when set, the current capacity otherwise.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:MaxProperties=128
	TotalCapacity corev1.ResourceList `json:"totalCapacity,omitempty"`

	// requests is the sum, over the instances scheduled on the cluster, of
	// their plans' spec.context.requests (for example {cpu: "1", memory:
	// 1Gi} per instance). Service Fabrik sums the requests of the pods on
	// the cluster instead.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:MaxProperties=128
	Requests corev1.ResourceList `json:"requests,omitempty"`

	// observedGeneration is the metadata.generation that the status
	// describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions describe the cluster: whether it is reachable with the
	// kubeconfig (Ready), and, while it is cordoned or being deleted, what
	// is still on it (Offboarding).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// components are what is installed of spec.components, and of removed
	// components until their resources are gone.
	// +optional
	// +listType=map
	// +listMapKey=name
	Components []SFClusterComponentStatus `json:"components,omitempty"`
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
// +kubebuilder:printcolumn:name="mode",type=string,JSONPath=`.spec.provisioningMode`,priority=1
// +kubebuilder:printcolumn:name="ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="requests-cpu",type=string,JSONPath=`.status.requests.cpu`
// +kubebuilder:printcolumn:name="capacity-cpu",type=string,JSONPath=`.status.totalCapacity.cpu`
// +kubebuilder:printcolumn:name="requests-memory",type=string,JSONPath=`.status.requests.memory`,priority=1
// +kubebuilder:printcolumn:name="capacity-memory",type=string,JSONPath=`.status.totalCapacity.memory`,priority=1
// +kubebuilder:printcolumn:name="components",type=string,JSONPath=`.status.conditions[?(@.type=="ComponentsReady")].reason`,priority=1
// +kubebuilder:printcolumn:name="offboarding",type=string,JSONPath=`.status.conditions[?(@.type=="Offboarding")].reason`,priority=1
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
