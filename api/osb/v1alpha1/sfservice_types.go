/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// DashboardClient holds what a platform needs to set up single sign-on for
// the service's dashboard (the OSB dashboard_client object).
// +kubebuilder:validation:XValidation:rule="!has(self.redirectURI) || !has(self.redirectUri) || self.redirectURI == self.redirectUri",message="redirectURI is the deprecated spelling of redirectUri; set only redirectUri, or give both the same value"
type DashboardClient struct {
	// id is the OAuth client id the dashboard uses.
	// +optional
	ID string `json:"id,omitempty"`

	// secret is the OAuth client secret the dashboard uses.
	// +optional
	Secret string `json:"secret,omitempty"`

	// redirectUri is the URI the OAuth server redirects to after a login.
	// +optional
	RedirectURI string `json:"redirectUri,omitempty"`

	// redirectURI is the older spelling of redirectUri, used in
	// Service Fabrik's design document. It is accepted so that such manifests
	// apply unchanged; Go code reads the effective value with
	// DashboardClient.RedirectURIOrAlias.
	//
	// Deprecated: use redirectUri.
	// +optional
	DeprecatedRedirectURI string `json:"redirectURI,omitempty"`
}

// RedirectURIOrAlias returns redirectUri, or the deprecated redirectURI when
// redirectUri is empty.
func (c *DashboardClient) RedirectURIOrAlias() string {
	if c == nil {
		return ""
	}
	if c.RedirectURI != "" {
		return c.RedirectURI
	}
	return c.DeprecatedRedirectURI
}

// SFServiceSpec is an OSB service offering as the broker serves it in the
// catalog, plus the context that the plans' templates read.
// +kubebuilder:validation:XValidation:rule="!has(self.instanceRetrievable) || !has(self.instancesRetrievable) || self.instanceRetrievable == self.instancesRetrievable",message="instanceRetrievable is the deprecated spelling of instancesRetrievable; set only instancesRetrievable, or give both the same value"
// +kubebuilder:validation:XValidation:rule="!has(self.bindingRetrievable) || !has(self.bindingsRetrievable) || self.bindingRetrievable == self.bindingsRetrievable",message="bindingRetrievable is the deprecated spelling of bindingsRetrievable; set only bindingsRetrievable, or give both the same value"
type SFServiceSpec struct {
	// name is the CLI-friendly name of the service offering.
	Name string `json:"name"`

	// id is the OSB service_id. It cannot change once the service exists,
	// because instances and plans refer to it.
	ID string `json:"id"`

	// description is the short description shown in the marketplace.
	Description string `json:"description"`

	// tags are the OSB tags of the service offering.
	// +optional
	Tags []string `json:"tags,omitempty"`

	// requires lists the platform permissions the service needs
	// (syslog_drain, route_forwarding or volume_mount).
	// +optional
	Requires []string `json:"requires,omitempty"`

	// bindable tells whether instances of this service can be bound.
	Bindable bool `json:"bindable"`

	// instancesRetrievable tells whether the broker serves
	// GET /v2/service_instances/:id.
	// +optional
	InstancesRetrievable bool `json:"instancesRetrievable,omitempty"`

	// instanceRetrievable is the older spelling of
	// instancesRetrievable, used in Service Fabrik's design document. It is
	// accepted so that such manifests apply unchanged; Go code reads the
	// effective value with SFServiceSpec.InstancesRetrievableOrAlias.
	//
	// Deprecated: use instancesRetrievable.
	// +optional
	DeprecatedInstanceRetrievable *bool `json:"instanceRetrievable,omitempty"`

	// bindingsRetrievable tells whether the broker serves
	// GET /v2/service_instances/:id/service_bindings/:binding_id.
	// +optional
	BindingsRetrievable bool `json:"bindingsRetrievable,omitempty"`

	// bindingRetrievable is the older spelling of
	// bindingsRetrievable, used in Service Fabrik's design document. It is
	// accepted so that such manifests apply unchanged; Go code reads the
	// effective value with SFServiceSpec.BindingsRetrievableOrAlias.
	//
	// Deprecated: use bindingsRetrievable.
	// +optional
	DeprecatedBindingRetrievable *bool `json:"bindingRetrievable,omitempty"`

	// allowContextUpdates tells whether an update that changes only the OSB
	// context is accepted.
	// +optional
	AllowContextUpdates bool `json:"allowContextUpdates,omitempty"`

	// metadata is the free-form OSB metadata of the service offering
	// (displayName, longDescription, documentationUrl and so on).
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Metadata *runtime.RawExtension `json:"metadata,omitempty"`

	// dashboardClient configures single sign-on for the service dashboard.
	// +optional
	DashboardClient *DashboardClient `json:"dashboardClient,omitempty"`

	// planUpdatable tells whether instances may change plan.
	// +optional
	PlanUpdatable bool `json:"planUpdatable,omitempty"`

	// context is free-form input for the templates of the service's plans,
	// available to them as .service.spec.context.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Context *runtime.RawExtension `json:"context,omitempty"`
}

// InstancesRetrievableOrAlias returns the effective instancesRetrievable:
// the value of the deprecated instanceRetrievable when only that is set, and
// instancesRetrievable otherwise.
func (s *SFServiceSpec) InstancesRetrievableOrAlias() bool {
	if !s.InstancesRetrievable && s.DeprecatedInstanceRetrievable != nil {
		return *s.DeprecatedInstanceRetrievable
	}
	return s.InstancesRetrievable
}

// BindingsRetrievableOrAlias returns the effective bindingsRetrievable: the
// value of the deprecated bindingRetrievable when only that is set, and
// bindingsRetrievable otherwise.
func (s *SFServiceSpec) BindingsRetrievableOrAlias() bool {
	if !s.BindingsRetrievable && s.DeprecatedBindingRetrievable != nil {
		return *s.DeprecatedBindingRetrievable
	}
	return s.BindingsRetrievable
}

// SFServiceStatus is what Marketplane observed about an SFService. Service
// Fabrik keeps no status on services; these fields are Marketplane's.
type SFServiceStatus struct {
	// observedGeneration is the metadata.generation that the conditions
	// describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions describe the service, for example whether it is served in
	// the broker's catalog (Ready).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SFService registers one OSB service offering with the broker. Its name is
// conventionally the service id. It lives on the platform cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sfsvc,categories=servicefabrik
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=platform"
// +kubebuilder:printcolumn:name="display-name",type=string,JSONPath=`.spec.name`
// +kubebuilder:printcolumn:name="id",type=string,JSONPath=`.spec.id`,priority=1
// +kubebuilder:printcolumn:name="bindable",type=boolean,JSONPath=`.spec.bindable`
// +kubebuilder:printcolumn:name="ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="age",type=date,JSONPath=`.metadata.creationTimestamp`
type SFService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the service offering.
	// +kubebuilder:validation:XValidation:rule="self.id == oldSelf.id",message="id is immutable: it is the OSB service_id that plans and instances refer to; register a new SFService instead",fieldPath=".id"
	Spec SFServiceSpec `json:"spec"`

	// status is what Marketplane observed about the service.
	// +optional
	Status SFServiceStatus `json:"status,omitempty"`
}

// SFServiceList is a list of SFServices.
//
// +kubebuilder:object:root=true
type SFServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the SFServices.
	Items []SFService `json:"items"`
}
