package spruntime

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// maxMessageLength bounds condition messages; errors from clients can be
// long, and the API allows 32768 bytes.
const maxMessageLength = 4096

// runtimeReadyReasons are the Ready reasons the runtime writes while it
// waits; they say nothing about the service itself.
var runtimeReadyReasons = map[string]bool{
	ReasonProviderConfigMissing:  true,
	ReasonProviderConfigDeleting: true,
	ReasonInvalidProviderConfig:  true,
	ReasonClusterAccessPending:   true,
	ReasonReconciling:            true,
}

// setCondition sets a condition of obj for its current generation.
func setCondition(obj API, condType string, status metav1.ConditionStatus, reason, message string) {
	if len(message) > maxMessageLength {
		message = message[:maxMessageLength-3] + "..."
	}
	apimeta.SetStatusCondition(obj.GetConditions(), metav1.Condition{
		Type:               condType,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: obj.GetGeneration(),
	})
}

// setSynced sets the Synced condition: did the last reconcile work?
func setSynced(obj API, status metav1.ConditionStatus, reason, message string) {
	setCondition(obj, ConditionSynced, status, reason, message)
}

func findCondition(obj API, condType string) *metav1.Condition {
	return apimeta.FindStatusCondition(*obj.GetConditions(), condType)
}

func hasCondition(obj API, condType string) bool {
	return findCondition(obj, condType) != nil
}

// readyReason is the reason of the Ready condition, or "" without one.
func readyReason(obj API) string {
	if c := findCondition(obj, ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

// readyForGeneration reports whether obj was Ready for its current
// generation: the service existed as the spec asks.
func readyForGeneration(obj API) bool {
	c := findCondition(obj, ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == obj.GetGeneration()
}

// readyOwnedByRuntime reports whether the Ready condition is absent or was
// written by the runtime rather than the author: a waiting reason, or the
// status mirroring an invalid input (phase Failed) or a WaitingError (phase
// Pending or Progressing) that Synced still reports.
func readyOwnedByRuntime(obj API) bool {
	ready := findCondition(obj, ConditionReady)
	if ready == nil || runtimeReadyReasons[ready.Reason] {
		return true
	}
	synced := findCondition(obj, ConditionSynced)
	switch obj.GetPhase() {
	case PhaseFailed, PhasePending, PhaseProgressing:
		return ready.Status == metav1.ConditionFalse &&
			synced != nil && synced.Status == metav1.ConditionFalse && synced.Reason == ready.Reason
	}
	return false
}

// statusSnapshot is the status of an object before a reconcile changed it.
type statusSnapshot struct {
	status     any
	phase      Phase
	conditions []metav1.Condition
}

// snapshot records obj's status, to compare with after the reconcile.
func (r *APIReconciler[T, C]) snapshot(obj T) (statusSnapshot, error) {
	st, err := statusOf(obj)
	if err != nil {
		return statusSnapshot{}, err
	}
	return statusSnapshot{status: st, phase: obj.GetPhase(), conditions: slices.Clone(*obj.GetConditions())}, nil
}

// writeStatus sets observedGeneration and, when the status differs from the
// snapshot, patches the status subresource with only the status difference
// and records an event for every condition transition a user looks for
// (recordTransitions). A NotFound (the object went away after its
// finalizer was removed) is not an error.
func (r *APIReconciler[T, C]) writeStatus(ctx context.Context, obj T, before statusSnapshot) error {
	obj.SetObservedGeneration(obj.GetGeneration())
	after, err := statusOf(obj)
	if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(before.status, after) {
		return nil
	}
	base, err := r.withStatus(obj, before.status)
	if err != nil {
		return err
	}
	conditions := slices.Clone(*obj.GetConditions())
	phase := obj.GetPhase()
	if err := r.client.Status().Patch(ctx, obj, client.MergeFrom(base)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patch status of %s %s/%s: %w", r.kind, obj.GetNamespace(), obj.GetName(), err)
	}
	recordTransitions(r.recorder, obj, transition{phase: before.phase, conditions: before.conditions}, transition{phase: phase, conditions: conditions})
	return nil
}

// withStatus returns a copy of obj whose status is st: the base of a merge
// patch that carries only the status difference.
func (r *APIReconciler[T, C]) withStatus(obj T, st any) (T, error) {
	base := r.newObj()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return base, fmt.Errorf("convert %s to unstructured: %w", r.kind, err)
	}
	if st == nil {
		delete(u, "status")
	} else {
		u["status"] = st
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, base); err != nil {
		return base, fmt.Errorf("convert %s from unstructured: %w", r.kind, err)
	}
	return base, nil
}

// statusOf returns the status field of obj in unstructured form, or nil.
func statusOf(obj runtime.Object) (any, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %T to unstructured: %w", obj, err)
	}
	return u["status"], nil
}

// transitionTypes are the conditions whose transitions are events.
var transitionTypes = []string{ConditionReady, ConditionSynced, ConditionDeletionBlocked}

// transition is one side of a status write: the phase and conditions.
type transition struct {
	phase      Phase
	conditions []metav1.Condition
}

// recordTransitions records an event for every condition of transitionTypes
// whose status or reason differs between before and now, when that is a
// transition a user looks for: into a warning (something broke, or the
// user has to act), or out of one (it recovered). A transition between
// normal states, such as a first success (Ready and Synced turning True)
// or progress, is no event: the conditions already record it, and every
// event is one more write to the API server per object (two per
// successful provisioning before). Messages come from the conditions,
// which never hold secrets.
func recordTransitions(rec events.EventRecorder, obj runtime.Object, before, now transition) {
	if rec == nil {
		return
	}
	for _, t := range transitionTypes {
		c := apimeta.FindStatusCondition(now.conditions, t)
		if c == nil {
			continue
		}
		old := apimeta.FindStatusCondition(before.conditions, t)
		if old != nil && old.Status == c.Status && old.Reason == c.Reason {
			continue
		}
		typ := eventType(*c, now.phase, now.conditions)
		if typ == corev1.EventTypeNormal && (old == nil || eventType(*old, before.phase, before.conditions) != corev1.EventTypeWarning) {
			continue
		}
		rec.Eventf(obj, nil, typ, c.Reason, c.Type, "%s=%s: %s", c.Type, c.Status, c.Message)
	}
}

// eventType says whether a transition to c is a warning: something broke
// or the user has to act.
func eventType(c metav1.Condition, phase Phase, all []metav1.Condition) string {
	failing := func() bool {
		s := apimeta.FindStatusCondition(all, ConditionSynced)
		return s != nil && s.Status == metav1.ConditionFalse && s.Reason != ReasonPaused
	}
	warning := false
	switch c.Type {
	case ConditionSynced:
		warning = c.Status == metav1.ConditionFalse && c.Reason != ReasonPaused
	case ConditionReady:
		warning = c.Status == metav1.ConditionFalse && (phase == PhaseFailed || failing())
	case ConditionDeletionBlocked:
		warning = c.Status == metav1.ConditionTrue
	}
	if warning {
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}
