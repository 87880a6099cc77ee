/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// InstanceMetadata is the OSB metadata of a service instance.
type InstanceMetadata struct {
	// labels are key/value pairs that describe the instance to platform
	// users: at most 64, keys of at most 256 characters, values of at most
	// 1024 (docs/api.md, "Tenant-written fields").
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 256 && size(self[k]) <= 1024)",message="keys may have at most 256 characters and values at most 1024"
	Labels map[string]string `json:"labels,omitempty"`

	// attributes are further key/value pairs about the instance, bounded as
	// labels are.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 256 && size(self[k]) <= 1024)",message="keys may have at most 256 characters and values at most 1024"
	Attributes map[string]string `json:"attributes,omitempty"`
}

// SFServiceInstanceSpec is the body of an OSB provision or update request,
// with camelCased keys, plus the cluster the scheduler chose.
type SFServiceInstanceSpec struct {
	// instanceId is the OSB instance_id. The object's name is the instance id
	// itself, or its SHA-224 when the id is not a valid Kubernetes name. It
	// cannot change once set. OSB ids here have at most 1024 characters,
	// the broker's limit.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	InstanceID string `json:"instanceId,omitempty"`

	// serviceId is the OSB service_id. It cannot change.
	// +kubebuilder:validation:MaxLength=1024
	ServiceID string `json:"serviceId"`

	// planId is the OSB plan_id; an update request may change it.
	// +kubebuilder:validation:MaxLength=1024
	PlanID string `json:"planId"`

	// context is the OSB context of the request, as sent by the platform.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Context *runtime.RawExtension `json:"context,omitempty"`

	// organizationGuid is the Cloud Foundry organization of the request.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	OrganizationGUID string `json:"organizationGuid,omitempty"`

	// spaceGuid is the Cloud Foundry space of the request.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	SpaceGUID string `json:"spaceGuid,omitempty"`

	// parameters are the OSB parameters of the request.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Parameters *runtime.RawExtension `json:"parameters,omitempty"`

	// metadata is the OSB metadata of the instance.
	// +optional
	Metadata *InstanceMetadata `json:"metadata,omitempty"`

	// previousValues are the OSB previous_values of an update request.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	PreviousValues *runtime.RawExtension `json:"previousValues,omitempty"`

	// clusterId is the name of the SFCluster the instance is scheduled on.
	// The scheduler sets it. A creator may set it to pin the instance to
	// that SFCluster: the inter-operator then applies the scheduler's
	// filters to that cluster alone before anything is applied, and the
	// instance waits or fails when they refuse it (docs/multicluster.md).
	// It cannot change once set: an instance stays where it was placed.
	// At most 253 characters, an object name's.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ClusterID string `json:"clusterId,omitempty"`
}

// SFServiceInstanceStatus is the state of the latest operation on an
// instance, as the plan's status template reported it. State is the
// instance's phase.
type SFServiceInstanceStatus struct {
	// state is the state of the latest operation.
	// +optional
	State State `json:"state,omitempty"`

	// error describes why the latest operation failed.
	// +optional
	Error string `json:"error,omitempty"`

	// description is the response of the status template, returned as the
	// description of last_operation.
	// +optional
	Description string `json:"description,omitempty"`

	// dashboardUrl is the dashboard URL the status template reported.
	// +optional
	DashboardURL string `json:"dashboardUrl,omitempty"`

	// instanceUsable tells, after a failed update or deprovision, whether the
	// instance can still be used ("true" or "false", as a string).
	// +optional
	InstanceUsable string `json:"instanceUsable,omitempty"`

	// updateRepeatable tells, after a failed update, whether the update may
	// be repeated ("true" or "false", as a string).
	// +optional
	UpdateRepeatable string `json:"updateRepeatable,omitempty"`

	// appliedSpec is the spec that the latest operation applied.
	// +optional
	AppliedSpec *SFServiceInstanceSpec `json:"appliedSpec,omitempty"`

	// resources are the objects the provisioner created for the instance;
	// deprovisioning deletes them.
	// +optional
	// +listType=atomic
	Resources []Source `json:"resources,omitempty"`

	// instanceId is the instance's id on target clusters, the template
	// variable .instanceId, recorded at the first provision so that it
	// never changes for the instance. A Marketplane addition.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	InstanceID string `json:"instanceId,omitempty"`

	// observedGeneration is the metadata.generation that the status
	// describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase summarises the status for Marketplane's provider runtime:
	// Pending, Progressing, Ready, Failed or Terminating. It is a
	// Marketplane addition; state stays the Service Fabrik and OSB view.
	// +optional
	Phase string `json:"phase,omitempty"`

	// conditions describe the instance, for example whether it is usable
	// (Ready).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SFServiceInstance records one OSB service instance: the broker writes the
// request into it, the scheduler places it on an SFCluster, and the
// provisioner renders the plan's templates for it. It lives on the
// onboarding cluster, in a namespace of its own (sf-<instance id>) by default.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sfsi,categories=servicefabrik
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=onboarding"
// +kubebuilder:printcolumn:name="state",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="clusterid",type=string,JSONPath=`.spec.clusterId`
// +kubebuilder:printcolumn:name="planid",type=string,JSONPath=`.spec.planId`
// +kubebuilder:printcolumn:name="serviceid",type=string,JSONPath=`.spec.serviceId`,priority=1
// +kubebuilder:printcolumn:name="ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
type SFServiceInstance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the OSB request. It is optional, as in Service Fabrik's CRD,
	// so that tooling written for Service Fabrik is not refused; an
	// instance without it names no service or plan, and the provisioner
	// fails it with reason MissingServiceOrPlan (docs/api.md).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.serviceId == oldSelf.serviceId",message="serviceId is immutable: an instance cannot move to another service",fieldPath=".serviceId"
	// +kubebuilder:validation:XValidation:rule="!has(oldSelf.instanceId) || size(oldSelf.instanceId) == 0 || (has(self.instanceId) && self.instanceId == oldSelf.instanceId)",message="instanceId is immutable once set: it is the OSB instance_id",fieldPath=".instanceId"
	// +kubebuilder:validation:XValidation:rule="!has(oldSelf.clusterId) || size(oldSelf.clusterId) == 0 || (has(self.clusterId) && self.clusterId == oldSelf.clusterId)",message="clusterId is immutable once set: the instance's objects live on that SFCluster; to move an instance, create a new one",fieldPath=".clusterId"
	Spec SFServiceInstanceSpec `json:"spec,omitempty"`

	// status is the state of the latest operation.
	// +optional
	Status SFServiceInstanceStatus `json:"status,omitempty"`
}

// SFServiceInstanceList is a list of SFServiceInstances.
//
// +kubebuilder:object:root=true
type SFServiceInstanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the SFServiceInstances.
	Items []SFServiceInstance `json:"items"`
}
