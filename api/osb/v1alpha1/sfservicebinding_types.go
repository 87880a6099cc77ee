/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
)

// SFServiceBindingSpec is the body of an OSB bind request, with camelCased
// keys.
type SFServiceBindingSpec struct {
	// id is the OSB binding_id. The object's name is the binding id. It
	// cannot change once set. OSB ids here have at most 1024 characters,
	// the broker's limit.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	ID string `json:"id,omitempty"`

	// instanceId is the OSB instance_id of the instance being bound. It
	// cannot change.
	// +kubebuilder:validation:MaxLength=1024
	InstanceID string `json:"instanceId"`

	// planId is the OSB plan_id of the instance being bound.
	// +kubebuilder:validation:MaxLength=1024
	PlanID string `json:"planId"`

	// serviceId is the OSB service_id of the instance being bound. It cannot
	// change.
	// +kubebuilder:validation:MaxLength=1024
	ServiceID string `json:"serviceId"`

	// appGuid is the deprecated OSB app_guid of the request.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	AppGUID string `json:"appGuid,omitempty"`

	// bindResource is the OSB bind_resource of the request.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	BindResource *runtime.RawExtension `json:"bindResource,omitempty"`

	// context is the OSB context of the request, as sent by the platform.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Context *runtime.RawExtension `json:"context,omitempty"`

	// parameters are the OSB parameters of the request.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Parameters *runtime.RawExtension `json:"parameters,omitempty"`

	// acceptsIncomplete records whether the platform accepts an asynchronous
	// bind.
	// +optional
	AcceptsIncomplete bool `json:"acceptsIncomplete,omitempty"`
}

// BindingResponse tells where the bind response is kept.
type BindingResponse struct {
	// secretRef is the name of the Secret, in the binding's namespace, whose
	// key "response" holds the OSB bind response (credentials and so on) as
	// JSON. Credentials are never stored in the binding itself.
	// +optional
	SecretRef string `json:"secretRef,omitempty"`
}

// SFServiceBindingStatus is the state of the latest operation on a binding,
// as the plan's status template reported it. State is the binding's phase.
type SFServiceBindingStatus struct {
	// state is the state of the latest operation.
	// +optional
	State State `json:"state,omitempty"`

	// error describes why the latest operation failed.
	// +optional
	Error string `json:"error,omitempty"`

	// response tells where the bind response is kept.
	// +optional
	Response *BindingResponse `json:"response,omitempty"`

	// appliedSpec is the spec that the latest operation applied.
	// +optional
	AppliedSpec *SFServiceBindingSpec `json:"appliedSpec,omitempty"`

	// resources are the objects the provisioner created for the binding;
	// unbinding deletes them.
	// +optional
	// +listType=atomic
	Resources []Source `json:"resources,omitempty"`

	// observedGeneration is the metadata.generation that the status
	// describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase summarises the status for Marketplane's provider runtime:
	// Pending, Progressing, Ready, Failed or Terminating. It is a
	// Marketplane addition; state stays the Service Fabrik and OSB view.
	// +optional
	Phase string `json:"phase,omitempty"`

	// conditions describe the binding, for example whether its credentials
	// are available (Ready).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SFServiceBinding records one OSB service binding: the broker writes the
// request into it and the provisioner renders the plan's bind template for
// it. It lives on the onboarding cluster, in the namespace of its instance.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sfsb,categories=servicefabrik
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=onboarding"
// +kubebuilder:printcolumn:name="state",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="instanceid",type=string,JSONPath=`.spec.instanceId`
// +kubebuilder:printcolumn:name="planid",type=string,JSONPath=`.spec.planId`,priority=1
// +kubebuilder:printcolumn:name="ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
type SFServiceBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the OSB request.
	// +kubebuilder:validation:XValidation:rule="self.instanceId == oldSelf.instanceId",message="instanceId is immutable: a binding cannot move to another instance",fieldPath=".instanceId"
	// +kubebuilder:validation:XValidation:rule="self.serviceId == oldSelf.serviceId",message="serviceId is immutable: a binding cannot move to another service",fieldPath=".serviceId"
	// +kubebuilder:validation:XValidation:rule="!has(oldSelf.id) || size(oldSelf.id) == 0 || (has(self.id) && self.id == oldSelf.id)",message="id is immutable once set: it is the OSB binding_id",fieldPath=".id"
	Spec SFServiceBindingSpec `json:"spec"`

	// status is the state of the latest operation.
	// +optional
	Status SFServiceBindingStatus `json:"status,omitempty"`
}

// SFServiceBindingList is a list of SFServiceBindings.
//
// +kubebuilder:object:root=true
type SFServiceBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the SFServiceBindings.
	Items []SFServiceBinding `json:"items"`
}

// InstanceNames returns the names the binding's SFServiceInstance may have
// in the binding's namespace, in the order the inter-operator looks them
// up: spec.instanceId itself, which is the instance's name (as tenants and
// the console write it, and the broker for an OSB id that is a DNS label),
// when it can be an object's name at all, then its hex SHA-224 (the name
// the broker gives the instance of an OSB id that is not). The first that
// exists is the binding's instance; the instance's own spec.instanceId
// plays no part, so a binding never reaches an instance by what that
// instance claims. An id that cannot be a name is left out rather than
// looked up: a client refuses to send such a name ("/" is no path
// segment), which is no NotFound.
func (s *SFServiceBindingSpec) InstanceNames() []string {
	sum := sha256.Sum224([]byte(s.InstanceID))
	hashed := hex.EncodeToString(sum[:])
	if len(validation.IsDNS1123Subdomain(s.InstanceID)) > 0 {
		return []string{hashed}
	}
	return []string{s.InstanceID, hashed}
}
