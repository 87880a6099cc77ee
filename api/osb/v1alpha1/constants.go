/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

// State is the lifecycle state that Service Fabrik records in status.state of
// an SFServiceInstance or SFServiceBinding. It doubles as the object's phase:
// the broker writes the state that starts an operation, the provisioner moves
// it to StateInProgress, and the plan's status template ends it in
// StateSucceeded or StateFailed.
type State string

// States of an SFServiceInstance or SFServiceBinding, spelled exactly as
// Service Fabrik spells them (note the space in "in progress").
const (
	// StateInQueue is written by the broker when it records a provision or
	// bind request; nothing has been applied yet.
	StateInQueue State = "in_queue"
	// StateUpdate is written by the broker when it records an update request,
	// and by the plan updater when a changed plan must be re-applied.
	StateUpdate State = "update"
	// StateDelete is written by the broker when it records a deprovision or
	// unbind request.
	StateDelete State = "delete"
	// StateInProgress is written by the provisioner once it has picked up an
	// operation and is waiting for the status template to report an outcome.
	StateInProgress State = "in progress"
	// StateSucceeded is the terminal state of an operation that worked.
	StateSucceeded State = "succeeded"
	// StateFailed is the terminal state of an operation that did not work.
	StateFailed State = "failed"
)

// IsTerminal reports whether s ends an operation. Service Fabrik does not
// reconcile an object again once its state is terminal, until the broker
// starts a new operation.
func (s State) IsTerminal() bool {
	return s == StateSucceeded || s == StateFailed
}

// TemplateAction names the step of an SFPlan's life cycle that a template
// renders.
// +kubebuilder:validation:Enum=provision;bind;unbind;sources;status;clusterSelector
type TemplateAction string

// Template actions. There is no deprovision action: deprovisioning deletes
// every resource recorded in status.resources.
const (
	// ActionProvision renders the resources of an instance; an update renders
	// it again.
	ActionProvision TemplateAction = "provision"
	// ActionBind renders the resources of a binding.
	ActionBind TemplateAction = "bind"
	// ActionUnbind renders what to apply instead of deleting the bind
	// resources, for plans whose bind template edits a provisioned object.
	ActionUnbind TemplateAction = "unbind"
	// ActionSources renders a map of name to resource reference. The rendered
	// resources become variables of the status template and are watched.
	ActionSources TemplateAction = "sources"
	// ActionStatus renders the state, response, error and dashboard URL of the
	// current operation from the sources.
	ActionStatus TemplateAction = "status"
	// ActionClusterSelector renders a label selector that restricts the
	// SFClusters an instance may be scheduled on.
	ActionClusterSelector TemplateAction = "clusterSelector"
)

// TemplateType names the engine that renders a template.
// +kubebuilder:validation:Enum=gotemplate;helm
type TemplateType string

// Template types.
const (
	// TypeGoTemplate is a Go text/template with the Sprig functions; it
	// renders one resource.
	TypeGoTemplate TemplateType = "gotemplate"
	// TypeHelm is a Helm chart fetched from the template's url and rendered
	// client side; the template's content renders the chart's values.
	TypeHelm TemplateType = "helm"
)

// Labels that Service Fabrik puts on its objects. Tools written for Service
// Fabrik select on them, so Marketplane writes the same keys.
const (
	// LabelLastOperation holds the state that started the latest operation
	// of an SFServiceInstance or SFServiceBinding (for example in_queue,
	// update or delete).
	LabelLastOperation = "interoperator.servicefabrik.io/lastoperation"
	// LabelErrorCount counts the consecutive errors of the current operation.
	// Once it exceeds ErrorCountThreshold the operation fails.
	LabelErrorCount = "interoperator.servicefabrik.io/error"
	// LabelServiceID holds the OSB service id on an SFPlan.
	LabelServiceID = "serviceId"
	// LabelPlanID holds the OSB plan id on an SFPlan.
	LabelPlanID = "planId"
)

// Annotations that Service Fabrik puts on its objects.
const (
	// AnnotationPlanHash records, on an SFServiceInstance, the hash of the
	// SFPlan spec that was last applied to it. An SFPlan with
	// autoUpdateInstances re-applies every instance whose hash differs from
	// the plan's status.specHash.
	AnnotationPlanHash = "interoperator.servicefabrik.io/planhash"
)

// Finalizers that Service Fabrik components put on SFServiceInstances and
// SFServiceBindings. Each component removes only its own.
const (
	// FinalizerInteroperator is held by the provisioner until every resource
	// it created for the object is gone.
	FinalizerInteroperator = "interoperator.servicefabrik.io"
	// FinalizerProvisioner is held by Marketplane's provisioner (the
	// inter-operator, built on the service provider runtime, whose
	// finalizer for the group osb.servicefabrik.io this is) until every
	// resource it created for the object is gone. The broker puts it on
	// the SFServiceBindings it creates, so that the provisioner need not
	// spend a write of its own adding it.
	FinalizerProvisioner = "osb.servicefabrik.io/finalizer"
	// FinalizerBroker is held by the broker until it has reported the outcome
	// of a deprovision or unbind to the OSB client.
	FinalizerBroker = "broker.servicefabrik.io"
	// FinalizerInstanceCounter is held by the scheduler's instance counter
	// until it has taken the instance off its cluster's count.
	FinalizerInstanceCounter = "sfserviceinstancecounter.servicefabrik.io"
)

// ErrorCountThreshold is how many consecutive errors, counted in
// LabelErrorCount, an operation survives before its state becomes
// StateFailed.
const ErrorCountThreshold = 10

// BindingSecretResponseKey is the key, in the Secret named by a binding's
// status.response.secretRef, that holds the OSB bind response body as JSON.
const BindingSecretResponseKey = "response"
