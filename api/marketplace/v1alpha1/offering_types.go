/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

import (
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SourceKind names the kind of object an Offering describes.
// +kubebuilder:validation:Enum=ServiceProvider;SFService
type SourceKind string

// Kinds of sources.
const (
	// SourceServiceProvider: a ServiceProvider (openmcp.cloud) and the
	// kinds it serves on the onboarding cluster.
	SourceServiceProvider SourceKind = "ServiceProvider"
	// SourceSFService: a Service Fabrik SFService (osb.servicefabrik.io)
	// with its valid SFPlans.
	SourceSFService SourceKind = "SFService"
)

// Labels on every Offering, which find the Offerings of one source again.
const (
	// LabelSourceKind holds spec.source.kind.
	LabelSourceKind = "marketplace.services.openmcp.cloud/source-kind"
	// LabelSourceName holds spec.source.name, shortened with a hash when it
	// does not fit a label value.
	LabelSourceName = "marketplace.services.openmcp.cloud/source-name"
	// LabelSourceNamespace holds spec.source.namespace (SFServices only).
	LabelSourceNamespace = "marketplace.services.openmcp.cloud/source-namespace"
)

// Annotations a platform operator may set on a ServiceProvider to describe
// its offering; a ServiceProvider has no spec field for either.
const (
	// AnnotationDisplayName is the offering's display name (default: the
	// ServiceProvider's name).
	AnnotationDisplayName = "marketplace.services.openmcp.cloud/display-name"
	// AnnotationDescription is the offering's description.
	AnnotationDescription = "marketplace.services.openmcp.cloud/description"
	// AnnotationOSB set to "true" opts the ServiceProvider's offering into
	// the OSB broker's catalog (spec.osb.enabled). Any other value, or
	// none, leaves it out: a provider is ordered through OSB only when the
	// platform operator says so.
	AnnotationOSB = "marketplace.services.openmcp.cloud/osb"
	// AnnotationBindingRules is a JSON list of RBAC PolicyRules
	// (rbac.authorization.k8s.io/v1): what the credentials of an OSB
	// binding may do on the tenant's ManagedControlPlane
	// (spec.osb.bindingRules). Without it, the offering's instances cannot
	// be bound.
	AnnotationBindingRules = "marketplace.services.openmcp.cloud/binding-rules"
)

// ConditionReady is the condition of an Offering that mirrors the health of
// its source: a ServiceProvider's Ready condition, or the catalog's
// validation of an SFService.
const ConditionReady = "Ready"

// Source names the object an Offering describes.
type Source struct {
	// kind is ServiceProvider or SFService.
	// +required
	Kind SourceKind `json:"kind"`
	// name of the source object.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// namespace of the source object on the platform cluster (SFService
	// only; ServiceProviders are cluster-scoped).
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// OfferedKind is one kind a ServiceProvider serves on the onboarding
// cluster: what a tenant creates to order the service.
type OfferedKind struct {
	// group of the kind.
	// +required
	Group string `json:"group"`
	// version of the kind whose schema is shown (the CRD's storage version
	// when status.resources names none that the CRD serves).
	// +required
	Version string `json:"version"`
	// kind is the kind's name.
	// +required
	Kind string `json:"kind"`
	// plural is the resource name (kubectl get <plural>); empty when the
	// CRD is not (yet) on the onboarding cluster.
	// +optional
	Plural string `json:"plural,omitempty"`
	// scope is Namespaced or Cluster; empty when the CRD is missing.
	// +optional
	Scope string `json:"scope,omitempty"`
	// schema is the OpenAPI v3 schema of the kind's spec, as the CRD on
	// the onboarding cluster declares it; absent when the CRD is missing or
	// declares no spec.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Schema *apiextensionsv1.JSON `json:"schema,omitempty"`
}

// OSBSettings say whether and how the OSB broker serves a ServiceProvider's
// offering, as the platform operator declared it in the ServiceProvider's
// annotations (AnnotationOSB, AnnotationBindingRules).
type OSBSettings struct {
	// enabled is true when the broker lists the offering in its catalog.
	// +optional
	Enabled bool `json:"enabled"`
	// bindingRules are the RBAC rules a binding's credentials get on the
	// ManagedControlPlane of the instance, as one ClusterRole there. Empty:
	// the offering is not bindable.
	// +optional
	// +listType=atomic
	BindingRules []rbacv1.PolicyRule `json:"bindingRules,omitempty"`
	// message says why the offering is not served through OSB although the
	// ServiceProvider asks for it (e.g. binding rules that are not a JSON
	// list of PolicyRules).
	// +optional
	Message string `json:"message,omitempty"`
}

// PlanSchemas are the JSON Schemas of a plan's parameters (OSB's
// schemas.service_instance.create/update and service_binding.create).
type PlanSchemas struct {
	// instanceCreate is the schema of the parameters of a provision.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	InstanceCreate *apiextensionsv1.JSON `json:"instanceCreate,omitempty"`
	// instanceUpdate is the schema of the parameters of an update.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	InstanceUpdate *apiextensionsv1.JSON `json:"instanceUpdate,omitempty"`
	// bindingCreate is the schema of the parameters of a bind.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	BindingCreate *apiextensionsv1.JSON `json:"bindingCreate,omitempty"`
}

// Plan is one valid SFPlan of an SFService.
type Plan struct {
	// id is the plan's OSB id.
	// +required
	ID string `json:"id"`
	// name is the plan's OSB name.
	// +required
	Name string `json:"name"`
	// description of the plan.
	// +optional
	Description string `json:"description,omitempty"`
	// free says whether the plan costs nothing.
	// +optional
	Free bool `json:"free"`
	// bindable says whether instances of the plan can be bound.
	// +optional
	Bindable bool `json:"bindable"`
	// planUpdatable says whether an instance can change to another plan.
	// +optional
	PlanUpdatable bool `json:"planUpdatable"`
	// metadata is the plan's OSB metadata.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Metadata *apiextensionsv1.JSON `json:"metadata,omitempty"`
	// schemas of the plan's parameters.
	// +optional
	Schemas *PlanSchemas `json:"schemas,omitempty"`
}

// OfferingSpec describes one offering. The marketplace controller generates
// it, like an EndpointSlice: it is not a desired state, and nothing a user
// writes here stays.
type OfferingSpec struct {
	// source is the object the offering describes.
	// +required
	Source Source `json:"source"`
	// displayName is a short human name.
	// +optional
	DisplayName string `json:"displayName,omitempty"`
	// description says what the offering is.
	// +optional
	Description string `json:"description,omitempty"`
	// version is the provider's version (its image tag) for a
	// ServiceProvider; empty for an SFService.
	// +optional
	Version string `json:"version,omitempty"`
	// ready mirrors the source's health: a ServiceProvider's Ready
	// condition; true for an SFService the catalog accepts.
	// +optional
	Ready bool `json:"ready"`

	// kinds are the kinds a ServiceProvider serves (status.resources).
	// +optional
	// +listType=atomic
	Kinds []OfferedKind `json:"kinds,omitempty"`
	// osb says whether and how the OSB broker serves the kinds of a
	// ServiceProvider (absent for SFServices, which the broker serves
	// anyway, and for providers that did not opt in).
	// +optional
	OSB *OSBSettings `json:"osb,omitempty"`

	// serviceId is an SFService's OSB id.
	// +optional
	ServiceID string `json:"serviceId,omitempty"`
	// bindable says whether instances of the service can be bound.
	// +optional
	Bindable bool `json:"bindable,omitempty"`
	// planUpdatable says whether instances can change plans.
	// +optional
	PlanUpdatable bool `json:"planUpdatable,omitempty"`
	// tags are the service's OSB tags.
	// +optional
	// +listType=atomic
	Tags []string `json:"tags,omitempty"`
	// metadata is the service's OSB metadata.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Metadata *apiextensionsv1.JSON `json:"metadata,omitempty"`
	// plans are the service's valid SFPlans, sorted by name.
	// +optional
	// +listType=atomic
	Plans []Plan `json:"plans,omitempty"`
}

// OfferingStatus is what the marketplace controller observed.
type OfferingStatus struct {
	// observedGeneration is the generation of the spec the status
	// describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready mirrors the source's health, with its reason and
	// message.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Offering is one offering of the marketplace: a ServiceProvider's kinds or
// an SFService with its plans, with the schemas of what a tenant fills in.
// It is read-only for tenants; the marketplace controller keeps it current.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=off,categories=marketplane
// +kubebuilder:metadata:labels="openmcp.cloud/cluster=onboarding"
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=".spec.source.kind"
// +kubebuilder:printcolumn:name="Display name",type=string,JSONPath=".spec.displayName"
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=".spec.version"
// +kubebuilder:printcolumn:name="Ready",type=boolean,JSONPath=".spec.ready"
// +kubebuilder:printcolumn:name="Source namespace",type=string,JSONPath=".spec.source.namespace",priority=1
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=".spec.source.name",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type Offering struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec describes the offering.
	// +required
	Spec OfferingSpec `json:"spec"`
	// Status is what the controller observed.
	// +optional
	Status OfferingStatus `json:"status,omitempty"`
}

// OfferingList is a list of Offerings.
//
// +kubebuilder:object:root=true
type OfferingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Offerings.
	Items []Offering `json:"items"`
}
