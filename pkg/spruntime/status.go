package spruntime

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/api/common"
)

// Phase summarises an object's state in status.phase. It is an alias of
// common.Phase, which API packages use so that they need not import the
// runtime; providers may write either name.
type Phase = common.Phase

// The phases of a ServiceProviderAPI object (the velero provider's set),
// re-exported from api/common so that provider code written against the
// runtime's names keeps compiling.
const (
	PhasePending     = common.PhasePending
	PhaseProgressing = common.PhaseProgressing
	PhaseReady       = common.PhaseReady
	PhaseFailed      = common.PhaseFailed
	PhaseTerminating = common.PhaseTerminating
)

// Condition types the runtime maintains.
const (
	// ConditionReady is True when the domain service is ready for use.
	ConditionReady = "Ready"
	// ConditionSynced is True when the last reconcile worked, False with
	// the error's reason when it did not.
	ConditionSynced = "Synced"
	// ConditionDeletionBlocked is True while deletion waits for users to
	// remove their objects.
	ConditionDeletionBlocked = "DeletionBlocked"
)

// Condition reasons the runtime sets.
const (
	ReasonReconcileSuccess       = "ReconcileSuccess"
	ReasonReconcileError         = "ReconcileError"
	ReasonReconciling            = "Reconciling"
	ReasonInvalidUserInput       = "InvalidUserInput"
	ReasonProviderConfigMissing  = "ProviderConfigMissing"
	ReasonClusterAccessPending   = "ClusterAccessPending"
	ReasonTerminating            = "Terminating"
	ReasonUserResourcesPresent   = "UserResourcesPresent"
	ReasonDeletionUnblocked      = "NoUserResources"
	ReasonDriftDetected          = "DriftDetected"
	ReasonPaused                 = "Paused"
	ReasonOrphaned               = "Orphaned"
	ReasonUpToDate               = "UpToDate"
	ReasonClusterAccessFailed    = "ClusterAccessFailed"
	ReasonProviderConfigDeleting = "ProviderConfigDeleting"
	// ReasonInvalidProviderConfig says that the ProviderConfig holds a
	// value its type's Validate refuses (see ConfigValidator), typically
	// one stored before the API server's validation rule existed.
	ReasonInvalidProviderConfig = "InvalidProviderConfig"
	// ReasonReleasingAccess is the Ready reason while the runtime releases
	// cluster access after Delete finished; it also tells the next
	// reconcile not to ask for the clusters again.
	ReasonReleasingAccess = "ReleasingClusterAccess"
)

// StatusProgressing marks obj as being worked on: phase Progressing and
// Ready=False with reason and message.
func StatusProgressing(obj API, reason, message string) {
	setReady(obj, PhaseProgressing, metav1.ConditionFalse, reason, message)
}

// StatusReady marks obj ready: phase Ready and Ready=True.
func StatusReady(obj API) {
	setReady(obj, PhaseReady, metav1.ConditionTrue, ReasonReconcileSuccess, "The service is ready")
}

// StatusFailed marks obj failed: phase Failed and Ready=False.
func StatusFailed(obj API, reason, message string) {
	setReady(obj, PhaseFailed, metav1.ConditionFalse, reason, message)
}

// StatusTerminating marks obj as being deleted: phase Terminating and
// Ready=False.
func StatusTerminating(obj API) {
	StatusTerminatingWithReason(obj, ReasonTerminating, "The service is being deleted")
}

// StatusTerminatingWithReason is StatusTerminating with a specific reason and
// message.
func StatusTerminatingWithReason(obj API, reason, message string) {
	setReady(obj, PhaseTerminating, metav1.ConditionFalse, reason, message)
}

func setReady(obj API, phase Phase, status metav1.ConditionStatus, reason, message string) {
	obj.SetPhase(phase)
	obj.SetObservedGeneration(obj.GetGeneration())
	apimeta.SetStatusCondition(obj.GetConditions(), metav1.Condition{
		Type:               ConditionReady,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: obj.GetGeneration(),
	})
}
