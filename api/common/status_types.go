package common

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Phase summarises an object's state in status.phase, in one word. The
// provider runtime (pkg/spruntime) reads and writes it through the GetPhase
// and SetPhase methods of every ServiceProviderAPI type; it lives here, and
// not in the runtime, so that API packages need import nothing but api/
// and libraries.
type Phase string

// The phases of a reconciled object. Objects that embed Status use Ready,
// Progressing and Terminating; a ServiceProviderAPI object may also be
// Pending (not reconciled yet) or Failed (the last reconcile failed).
const (
	// PhasePending means that the object has not been reconciled yet.
	PhasePending Phase = "Pending"
	// PhaseProgressing means that the object is being created or updated
	// and at least one condition is not met yet.
	PhaseProgressing Phase = "Progressing"
	// PhaseReady means that every condition is met (status "True").
	PhaseReady Phase = "Ready"
	// PhaseFailed means that the last reconcile failed; the Ready
	// condition says why.
	PhaseFailed Phase = "Failed"
	// PhaseTerminating means that the object is being deleted and its
	// clean-up has not finished.
	PhaseTerminating Phase = "Terminating"
)

// Phases a Status reports, as strings for Status.Phase. A controller sets
// exactly one of them; the conditions carry the detail. They are the words
// of the Phase constants.
const (
	// StatusPhaseReady is PhaseReady.
	StatusPhaseReady = string(PhaseReady)
	// StatusPhaseProgressing is PhaseProgressing.
	StatusPhaseProgressing = string(PhaseProgressing)
	// StatusPhaseTerminating is PhaseTerminating.
	StatusPhaseTerminating = string(PhaseTerminating)
)

// ConditionTypeReady is the condition every reconciled object reports. It is
// "True" when the object is fully reconciled and usable.
const ConditionTypeReady = "Ready"

// Status is the observed state every reconciled object reports. Embed it
// inline in a kind's status struct so that the object gets
// status.observedGeneration, status.phase and status.conditions.
type Status struct {
	// ObservedGeneration is the metadata.generation the controller last
	// reconciled. A value below metadata.generation means that the status
	// does not yet reflect the latest spec.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration"`

	// Phase summarises the conditions in one word, such as Ready,
	// Progressing or Terminating, for printing and quick filtering.
	// +optional
	Phase string `json:"phase"`

	// Conditions describe the current state in detail, one entry per
	// condition type.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
