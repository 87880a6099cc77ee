/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TemplateSpec maps one action of a plan to a template. The template text is
// taken from content when it is set, otherwise from contentEncoded (base64);
// url locates a remote template, and for helm the chart archive.
// +kubebuilder:validation:XValidation:rule="(has(self.url) && size(self.url) > 0) || (has(self.content) && size(self.content) > 0) || (has(self.contentEncoded) && size(self.contentEncoded) > 0)",message="a template needs its text: set content (inline), contentEncoded (base64) or url"
// +kubebuilder:validation:XValidation:rule="self.type != 'helm' || (has(self.url) && size(self.url) > 0)",message="a helm template needs url, the http(s) location of the chart archive (.tgz); content holds the template of the chart's values"
type TemplateSpec struct {
	// action is the step this template renders.
	Action TemplateAction `json:"action"`

	// type is the template engine.
	Type TemplateType `json:"type"`

	// url locates the template: for helm, the chart archive (.tgz) over http
	// or https; for gotemplate, a remote template file.
	// +optional
	URL string `json:"url,omitempty"`

	// content is the inline template text. For helm it renders the chart's
	// values.
	// +optional
	Content string `json:"content,omitempty"`

	// contentEncoded is the template text encoded in base64. It is used only
	// when content is empty.
	// +optional
	ContentEncoded string `json:"contentEncoded,omitempty"`
}

// Schema is a JSON schema for the parameters of one OSB request.
type Schema struct {
	// parameters is the JSON schema (draft-04 or draft-06) that the request
	// parameters must satisfy.
	// +kubebuilder:pruning:PreserveUnknownFields
	Parameters *runtime.RawExtension `json:"parameters"`
}

// ServiceInstanceSchema holds the parameter schemas of provision and update
// requests.
type ServiceInstanceSchema struct {
	// create is the schema of provision parameters.
	// +optional
	Create *Schema `json:"create,omitempty"`

	// update is the schema of update parameters.
	// +optional
	Update *Schema `json:"update,omitempty"`
}

// ServiceBindingSchema holds the parameter schema of bind requests. It
// matters only when the plan is bindable.
type ServiceBindingSchema struct {
	// create is the schema of bind parameters.
	// +optional
	Create *Schema `json:"create,omitempty"`
}

// ServiceSchemas holds the parameter schemas of a plan, as served in the OSB
// catalog.
type ServiceSchemas struct {
	// service_instance holds the schemas of provision and update parameters.
	// +optional
	Instance *ServiceInstanceSchema `json:"service_instance,omitempty"`

	// service_binding holds the schema of bind parameters.
	// +optional
	Binding *ServiceBindingSchema `json:"service_binding,omitempty"`
}

// MaintenanceInfo is the OSB maintenance_info of a plan. A provision or
// update request that names another version is refused with
// MaintenanceInfoConflict.
type MaintenanceInfo struct {
	// version is the semantic version of what the plan deploys.
	Version string `json:"version"`

	// description says what changes with this version.
	// +optional
	Description string `json:"description,omitempty"`
}

// SFPlanSpec is an OSB service plan as the broker serves it in the catalog,
// plus the templates and configuration the inter-operator uses to provision
// it.
type SFPlanSpec struct {
	// name is the CLI-friendly name of the plan.
	Name string `json:"name"`

	// id is the OSB plan_id. It cannot change once the plan exists, because
	// instances refer to it.
	ID string `json:"id"`

	// description is the short description shown in the marketplace.
	Description string `json:"description"`

	// metadata is the free-form OSB metadata of the plan (bullets, costs,
	// displayName and so on).
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Metadata *runtime.RawExtension `json:"metadata,omitempty"`

	// maintenance_info is the OSB maintenance_info of the plan.
	// +optional
	MaintenanceInfo *MaintenanceInfo `json:"maintenance_info,omitempty"`

	// maximum_polling_duration is the OSB maximum_polling_duration in seconds:
	// how long a platform should poll last_operation before giving up. At
	// most a year (31536000): OSB sets no bound, and no platform polls one
	// operation for longer.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31536000
	MaximumPollingDuration int32 `json:"maximum_polling_duration,omitempty"`

	// free tells whether the plan is free of charge.
	Free bool `json:"free"`

	// bindable tells whether instances of this plan can be bound.
	Bindable bool `json:"bindable"`

	// planUpdatable tells whether instances may change from this plan to
	// another.
	// +optional
	PlanUpdatable bool `json:"planUpdatable,omitempty"`

	// autoUpdateInstances makes the inter-operator re-apply every instance of
	// the plan when the plan's spec changes.
	// +optional
	AutoUpdateInstances bool `json:"autoUpdateInstances,omitempty"`

	// schemas are the parameter schemas of the plan.
	// +optional
	Schemas *ServiceSchemas `json:"schemas,omitempty"`

	// templates map the actions of the plan to templates. When two templates
	// name the same action, the first one is used.
	Templates []TemplateSpec `json:"templates"`

	// serviceId is the OSB service_id of the SFService this plan belongs to.
	// It cannot change once the plan exists.
	ServiceID string `json:"serviceId"`

	// context is free-form input for the plan's templates, available to them
	// as .plan.spec.context. Its requests field, a resource list, tells the
	// capacity-aware scheduler what an instance needs.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Context *runtime.RawExtension `json:"context,omitempty"`

	// manager is free-form configuration for the broker: async and
	// asyncBinding select asynchronous provisioning and binding, and
	// settings holds dashboard_url_template and update_predecessors.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Manager *runtime.RawExtension `json:"manager,omitempty"`
}

// SFPlanStatus is what the inter-operator observed about an SFPlan.
type SFPlanStatus struct {
	// specHash is the hash of the spec that every instance of the plan has
	// been updated to. It is maintained only when autoUpdateInstances is set.
	// +optional
	SpecHash string `json:"specHash,omitempty"`

	// observedGeneration is the metadata.generation that the conditions
	// describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions describe the plan, for example whether it is served in the
	// broker's catalog (Ready).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SFPlan registers one OSB service plan, with the templates that provision
// it. Its name is conventionally the plan id. It lives on the platform
// cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sfp,categories=servicefabrik
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=platform"
// +kubebuilder:printcolumn:name="display-name",type=string,JSONPath=`.spec.name`
// +kubebuilder:printcolumn:name="serviceid",type=string,JSONPath=`.spec.serviceId`
// +kubebuilder:printcolumn:name="id",type=string,JSONPath=`.spec.id`,priority=1
// +kubebuilder:printcolumn:name="free",type=boolean,JSONPath=`.spec.free`,priority=1
// +kubebuilder:printcolumn:name="ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="age",type=date,JSONPath=`.metadata.creationTimestamp`
type SFPlan struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the service plan.
	// +kubebuilder:validation:XValidation:rule="self.id == oldSelf.id",message="id is immutable: it is the OSB plan_id that instances refer to; register a new SFPlan instead",fieldPath=".id"
	// +kubebuilder:validation:XValidation:rule="self.serviceId == oldSelf.serviceId",message="serviceId is immutable: a plan cannot move to another service; register a new SFPlan instead",fieldPath=".serviceId"
	Spec SFPlanSpec `json:"spec"`

	// status is what the inter-operator observed about the plan.
	// +optional
	Status SFPlanStatus `json:"status,omitempty"`
}

// Template returns the first template of the plan for the given action, and
// false when the plan has none.
func (p *SFPlan) Template(action TemplateAction) (TemplateSpec, bool) {
	for _, t := range p.Spec.Templates {
		if t.Action == action {
			return t, true
		}
	}
	return TemplateSpec{}, false
}

// SFPlanList is a list of SFPlans.
//
// +kubebuilder:object:root=true
type SFPlanList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the SFPlans.
	Items []SFPlan `json:"items"`
}
