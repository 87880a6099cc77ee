package spruntime

import (
	"fmt"
	"time"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
)

// Annotations and labels on ServiceProviderAPI objects that change how the
// runtime treats them. They use the openmcp.cloud prefix so that tools and
// habits from openMCP carry over.
const (
	// OperationAnnotation asks for a one-off behaviour: OperationIgnore
	// makes the runtime leave the object alone (no reconcile, no status
	// write, deletion included) until the annotation is removed;
	// OperationReconcile forces one reconcile, after which the runtime
	// removes the annotation.
	OperationAnnotation = providerv1alpha1.OperationAnnotation
	// OperationIgnore is the OperationAnnotation value that stops
	// reconciliation.
	OperationIgnore = providerv1alpha1.OperationIgnore
	// OperationReconcile is the OperationAnnotation value that forces one
	// reconcile.
	OperationReconcile = providerv1alpha1.OperationReconcile

	// PausedAnnotation set to "true" pauses the object: the runtime sets
	// Synced=False with reason Paused and does nothing else (deletion
	// included) until the annotation is removed or set to anything else.
	// Unlike OperationIgnore, a paused object says so in its status.
	PausedAnnotation = providerv1alpha1.GroupName + "/paused"

	// PollIntervalAnnotation overrides the poll interval for one object, as
	// a Go duration ("30s", "5m"). It wins over the ProviderConfig's
	// PollInterval; values below the minimum poll interval are raised to
	// it, and a value that does not parse is ignored.
	PollIntervalAnnotation = providerv1alpha1.GroupName + "/poll-interval"

	// DeletionPolicyAnnotation chooses what deleting the object does to
	// the domain service: DeletionPolicyDelete (the default) deletes it,
	// DeletionPolicyOrphan leaves it in place and only stops managing it.
	DeletionPolicyAnnotation = providerv1alpha1.GroupName + "/deletion-policy"

	// EnvironmentLabel names the environment (the provider's
	// --environment) an object belongs to. An object labelled for another
	// environment is ignored; an unlabelled object is served by every
	// environment, and a provider with no environment serves every object.
	EnvironmentLabel = providerv1alpha1.EnvironmentLabel
)

// DeletionPolicy is the value of DeletionPolicyAnnotation.
type DeletionPolicy string

// The deletion policies.
const (
	// DeletionPolicyDelete deletes the domain service with the object.
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyOrphan leaves the domain service in place: the
	// Reconciler's Delete is not called, cluster access is released and
	// the finalizer removed.
	DeletionPolicyOrphan DeletionPolicy = "Orphan"
)

// ReasonInvalidDeletionPolicy is the Synced reason of an object whose
// DeletionPolicyAnnotation has an unknown value. Deletion waits for it to
// be fixed rather than guess, since guessing "Delete" could destroy what the
// user meant to keep.
const ReasonInvalidDeletionPolicy = "InvalidDeletionPolicy"

// deletionPolicy reads DeletionPolicyAnnotation. A missing or empty value
// is DeletionPolicyDelete; an unknown one is an error.
func deletionPolicy(annotations map[string]string) (DeletionPolicy, error) {
	switch v := annotations[DeletionPolicyAnnotation]; v {
	case "", string(DeletionPolicyDelete):
		return DeletionPolicyDelete, nil
	case string(DeletionPolicyOrphan):
		return DeletionPolicyOrphan, nil
	default:
		return "", fmt.Errorf("annotation %s=%q: want %q or %q", DeletionPolicyAnnotation, v, DeletionPolicyDelete, DeletionPolicyOrphan)
	}
}

// paused reports whether PausedAnnotation is "true".
func paused(annotations map[string]string) bool {
	return annotations[PausedAnnotation] == "true"
}

// annotatedPollInterval reads PollIntervalAnnotation: zero and no error
// when it is absent, an error when it does not parse or is not positive.
func annotatedPollInterval(annotations map[string]string) (time.Duration, error) {
	v, ok := annotations[PollIntervalAnnotation]
	if !ok || v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("annotation %s=%q: %w", PollIntervalAnnotation, v, err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("annotation %s=%q: want a positive duration", PollIntervalAnnotation, v)
	}
	return d, nil
}

// otherEnvironment reports whether an object with these labels belongs to
// an environment other than env.
func otherEnvironment(labels map[string]string, env string) bool {
	objEnv := labels[EnvironmentLabel]
	return env != "" && objEnv != "" && objEnv != env
}
