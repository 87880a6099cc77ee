package common

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Phases a Status reports. A controller sets exactly one of them; the
// conditions carry the detail.
const (
	// StatusPhaseReady means that every condition is met (status "True").
	StatusPhaseReady = "Ready"
	// StatusPhaseProgressing means that the object is being created or
	// updated and at least one condition is not met yet.
	StatusPhaseProgressing = "Progressing"
	// StatusPhaseTerminating means that the object is being deleted and its
	// clean-up has not finished.
	StatusPhaseTerminating = "Terminating"
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
