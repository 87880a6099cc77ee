package provider

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/policy"
)

// Reasons that docs/operator.md names but the API package does not define
// (yet). They are of the API's reason type so that they mix with the
// others.
const (
	// ReasonInvalidSpec means that the spec cannot be deployed as it is,
	// for example because two environment variables share a name. The
	// operator waits for the spec to change.
	ReasonInvalidSpec providerv1alpha1.ConditionReason = "InvalidSpec"
)

// warningReasons are the reasons whose events are warnings: the ones a user
// has to act on or that mean something broke.
var warningReasons = map[providerv1alpha1.ConditionReason]bool{
	providerv1alpha1.ReasonInitFailed:                 true,
	providerv1alpha1.ReasonProviderCrashing:           true,
	ReasonInvalidSpec:                                 true,
	providerv1alpha1.ReasonInitJobCreationFailed:      true,
	providerv1alpha1.ReasonProviderInstallationFailed: true,
	providerv1alpha1.ReasonUninstallFailed:            true,
	policy.ReasonGroupReserved:                        true,
	policy.ReasonGroupNotOwned:                        true,
	policy.ReasonGroupConflict:                        true,
	policy.ReasonGroupInvalid:                         true,
}

// setConditionf sets a condition of the given type on st for generation.
func setConditionf(st *providerv1alpha1.DeploymentStatus, generation int64, t providerv1alpha1.ConditionType, status metav1.ConditionStatus, reason providerv1alpha1.ConditionReason, format string, args ...any) {
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type:               string(t),
		Status:             status,
		ObservedGeneration: generation,
		Reason:             string(reason),
		Message:            fmt.Sprintf(format, args...),
	})
}

// setPhase derives status.phase from the conditions: Uninstalling while the
// object is deleted, Ready when Ready is true, Progressing otherwise.
func setPhase(st *providerv1alpha1.DeploymentStatus, deleting bool) {
	switch {
	case deleting:
		st.Phase = providerv1alpha1.PhaseUninstalling
	case apimeta.IsStatusConditionTrue(st.Conditions, string(providerv1alpha1.ConditionReady)):
		st.Phase = providerv1alpha1.PhaseReady
	default:
		st.Phase = providerv1alpha1.PhaseProgressing
	}
}

// recordTransitions records an event for every condition of now whose
// status or reason differs from before. Messages come from the conditions,
// which never hold secrets.
func recordTransitions(rec events.EventRecorder, obj runtime.Object, before, now []metav1.Condition) {
	if rec == nil {
		return
	}
	for _, c := range now {
		old := apimeta.FindStatusCondition(before, c.Type)
		// A change of the rejected entries is worth a new warning even when
		// the reason stays the same: it names a new group.
		messageMatters := c.Type == string(ConditionResourcesAccepted) && c.Status == metav1.ConditionFalse
		if old != nil && old.Status == c.Status && old.Reason == c.Reason && (!messageMatters || old.Message == c.Message) {
			continue
		}
		eventType := corev1.EventTypeNormal
		if warningReasons[providerv1alpha1.ConditionReason(c.Reason)] {
			eventType = corev1.EventTypeWarning
		}
		rec.Eventf(obj, nil, eventType, c.Reason, c.Type, "%s=%s: %s", c.Type, c.Status, c.Message)
	}
}
