package spruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// APIReconciler is the generic reconciler of one ServiceProviderAPI type T
// with its ProviderConfig type C. It owns everything that is not domain
// logic (see the package documentation) and calls the provider author's
// Reconciler for the rest. Build it with NewAPIReconciler and register it
// with SetupWithManager.
type APIReconciler[T API, C Config] struct {
	providerName string
	newObj       func() T
	newConfig    func() C
	reconciler   Reconciler[T, C]
	access       ClusterAccess[T]
	platform     cluster.Cluster
	opts         options

	// Set by SetupWithManager, from the onboarding manager.
	client    client.Client
	scheme    *runtime.Scheme
	kind      string
	listGVK   schema.GroupVersionKind
	finalizer string
	recorder  events.EventRecorder

	// configEpoch counts the changes of the ProviderConfig and of the
	// Secrets and ConfigMaps it references that the watches saw, and
	// syncedConfig maps an object's key to the epoch it was last in sync
	// with. They only serve to tell a drift from a configuration change;
	// after a restart the map is empty and any difference of a Ready
	// object counts as drift.
	configEpoch  atomic.Int64
	syncedConfig sync.Map
}

var _ reconcile.Reconciler = &APIReconciler[API, Config]{}

// NewAPIReconciler returns the reconciler of the API type T for the provider
// named providerName, whose ProviderConfig (of type C, cluster-scoped) on the
// platform cluster has that name.
//
//   - newObj and newConfig return empty objects of T and C (for example
//     func() *v1alpha1.Foo { return &v1alpha1.Foo{} }).
//   - reconciler is the domain logic; it may also implement Observer and
//     UserResourceChecker.
//   - access obtains the clusters of an object: package clusteraccess for
//     a provider deployed by the operator, NewStaticAccess for development.
//   - platform is the platform cluster, where the ProviderConfig (and the
//     Secrets and ConfigMaps of WithSecretWatch and WithConfigMapWatch)
//     are read and watched. Its scheme must hold C.
//
// It returns an error, never panics, when a required argument is missing.
func NewAPIReconciler[T API, C Config](providerName string, newObj func() T, newConfig func() C, reconciler Reconciler[T, C], access ClusterAccess[T], platform cluster.Cluster, opts ...Option) (*APIReconciler[T, C], error) {
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(providerName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("provider name %q: %s", providerName, strings.Join(msgs, "; ")))
	}
	if newObj == nil || isNil(newObj()) {
		errs = append(errs, errors.New("newObj must return an empty API object"))
	}
	if newConfig == nil || isNil(newConfig()) {
		errs = append(errs, errors.New("newConfig must return an empty ProviderConfig"))
	}
	if isNil(reconciler) {
		errs = append(errs, errors.New("a Reconciler is required"))
	}
	if isNil(access) {
		errs = append(errs, errors.New("a ClusterAccess is required"))
	}
	if isNil(platform) {
		errs = append(errs, errors.New("the platform cluster is required"))
	}
	if len(errs) == 0 && newObj().GetConditions() == nil {
		errs = append(errs, errors.New("GetConditions of the API type returns nil; it must return a pointer to status.conditions"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("new API reconciler: %w", err)
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return &APIReconciler[T, C]{
		providerName: providerName,
		newObj:       newObj,
		newConfig:    newConfig,
		reconciler:   reconciler,
		access:       access,
		platform:     platform,
		opts:         o,
	}, nil
}

// Reconcile implements reconcile.Reconciler. See the package documentation
// for what it does, in order.
func (r *APIReconciler[T, C]) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	if r.client == nil {
		return ctrl.Result{}, errors.New("spruntime: Reconcile called before SetupWithManager")
	}
	start := time.Now()
	result := ResultSkipped
	obj := r.newObj()
	defer func() { r.observe(obj, result, start) }()
	log := logf.FromContext(ctx)

	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.syncedConfig.Delete(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		result = ResultError
		return ctrl.Result{}, fmt.Errorf("get %s %s: %w", r.kind, req.NamespacedName, err)
	}

	// Objects left alone entirely: not even their status is written.
	if otherEnvironment(obj.GetLabels(), r.opts.environment) {
		log.V(1).Info("Ignoring object of another environment", "objectEnvironment", obj.GetLabels()[EnvironmentLabel], "environment", r.opts.environment)
		return ctrl.Result{}, nil
	}
	switch obj.GetAnnotations()[OperationAnnotation] {
	case OperationIgnore:
		log.V(1).Info("Ignoring object", "annotation", OperationAnnotation+"="+OperationIgnore)
		return ctrl.Result{}, nil
	case OperationReconcile:
		err := r.patchMetadata(ctx, obj, func(o T) {
			a := o.GetAnnotations()
			delete(a, OperationAnnotation)
			o.SetAnnotations(a)
		})
		if apierrors.IsConflict(err) {
			res, result, _ = r.retryConflict(ctx, "remove annotation "+OperationAnnotation)
			return res, nil
		}
		if err != nil {
			result = ResultError
			return ctrl.Result{}, fmt.Errorf("remove annotation %s: %w", OperationAnnotation, err)
		}
		log.V(1).Info("Reconcile requested by annotation", "annotation", OperationAnnotation+"="+OperationReconcile)
	}

	before, err := r.snapshot(obj)
	if err != nil {
		result = ResultError
		return ctrl.Result{}, err
	}
	defer func() {
		if result == ResultDeleted && r.opts.keepReleasedStatus != nil && !r.opts.keepReleasedStatus(obj) {
			return
		}
		if err := r.writeStatus(ctx, obj, before); err != nil {
			result = ResultError
			retErr = errors.Join(retErr, err)
		}
	}()

	if paused(obj.GetAnnotations()) {
		log.V(1).Info("Object is paused", "annotation", PausedAnnotation)
		setSynced(obj, metav1.ConditionFalse, ReasonPaused, fmt.Sprintf("Reconciliation is paused by the annotation %s=true", PausedAnnotation))
		return ctrl.Result{}, nil
	}

	if obj.GetDeletionTimestamp() != nil {
		res, result, err = r.reconcileDelete(ctx, obj)
	} else {
		res, result, err = r.reconcileCreateOrUpdate(ctx, obj)
	}
	return res, err
}

// reconcileCreateOrUpdate is the path of an object that is not being
// deleted. It returns the result, the metrics result and an error to retry
// with backoff.
func (r *APIReconciler[T, C]) reconcileCreateOrUpdate(ctx context.Context, obj T) (ctrl.Result, string, error) {
	log := logf.FromContext(ctx)
	wasReady := readyForGeneration(obj)
	epoch := r.configEpoch.Load()
	if obj.GetPhase() == "" {
		obj.SetPhase(PhasePending)
	}

	cfg, ok, err := r.providerConfig(ctx, obj, PhasePending)
	if err != nil || !ok {
		return waitOrFail(err)
	}

	if !r.opts.finalizerByAuthor {
		if res, result, err := r.ensureFinalizer(ctx, obj); result != "" {
			return res, result, err
		}
	}

	clusters, res, result, err := r.clusters(ctx, obj)
	if result != "" {
		return res, result, err
	}

	// A Ready condition the runtime wrote while waiting, or that mirrors
	// an earlier invalid input, says nothing about the service any more.
	if readyOwnedByRuntime(obj) {
		StatusProgressing(obj, ReasonReconciling, "Reconciling")
	}

	drift := ""
	if observer, ok := r.reconciler.(Observer[T, C]); ok {
		obs, err := observer.Observe(ctx, obj, cfg, clusters)
		if err != nil {
			return r.authorFailed(ctx, obj, "observe", err)
		}
		if obs.Exists && obs.UpToDate {
			log.V(1).Info("Service is up to date; skipping CreateOrUpdate")
			if readyOwnedByRuntime(obj) {
				StatusReady(obj)
			}
			setSynced(obj, metav1.ConditionTrue, ReasonReconcileSuccess, "The service is up to date")
			r.syncedConfig.Store(client.ObjectKeyFromObject(obj), epoch)
			return r.pollResult(ctx, obj, cfg, ctrl.Result{}), ResultSuccess, nil
		}
		if wasReady && r.sameConfig(obj, epoch) {
			// Neither the spec nor the ProviderConfig changed since the
			// service was last in sync: something else changed it.
			drift = r.driftDetected(ctx, obj, obs)
		}
	}

	res, err = r.reconciler.CreateOrUpdate(ctx, obj, cfg, clusters)
	if err != nil {
		return r.authorFailed(ctx, obj, "create or update", err)
	}
	if r.opts.finalizerByAuthor {
		// The Reconciler had to add it with its first write; should it
		// not have written the object, the finalizer is added now.
		if res, result, err := r.ensureFinalizer(ctx, obj); result != "" {
			return res, result, err
		}
	}
	msg := "The last reconcile succeeded"
	if drift != "" {
		msg = "Repaired drift: " + drift
	}
	setSynced(obj, metav1.ConditionTrue, ReasonReconcileSuccess, msg)
	r.syncedConfig.Store(client.ObjectKeyFromObject(obj), epoch)
	return r.pollResult(ctx, obj, cfg, res), ResultSuccess, nil
}

// clusters returns the clusters of obj. When they are not to be had (yet)
// it returns the reconcile's outcome (a result other than ""), which the
// caller returns.
func (r *APIReconciler[T, C]) clusters(ctx context.Context, obj T) (ClusterContext, ctrl.Result, string, error) {
	clusters, ready, err := r.access.Clusters(ctx, obj)
	if err != nil {
		_, invalid := AsInvalidUserInput(err)
		if _, waiting := AsWaiting(err); invalid || waiting {
			// For example: no ManagedControlPlane of this name (the MCP
			// watch, WithManagedControlPlaneWatch, reconciles again when
			// it appears), or no cluster to place the object on yet.
			res, result, err := r.authorFailed(ctx, obj, "get clusters", err)
			return clusters, res, result, err
		}
		setSynced(obj, metav1.ConditionFalse, ReasonClusterAccessFailed, fmt.Sprintf("Cannot get access to the clusters: %v", err))
		return clusters, ctrl.Result{}, ResultError, fmt.Errorf("get clusters: %w", err)
	}
	if !ready {
		logf.FromContext(ctx).V(1).Info("Waiting for cluster access")
		setReady(obj, PhaseProgressing, metav1.ConditionFalse, ReasonClusterAccessPending, "Waiting for access to the clusters")
		return clusters, ctrl.Result{RequeueAfter: r.opts.waitInterval}, ResultWaiting, nil
	}
	return clusters, ctrl.Result{}, "", nil
}

// driftDetected records that the service of obj drifted from what obj
// and its ProviderConfig ask for, as obs says, and returns the drift.
func (r *APIReconciler[T, C]) driftDetected(ctx context.Context, obj T, obs Observation) string {
	drift := obs.Drift
	if drift == "" && obs.Exists {
		drift = "the service differs from what the object and its ProviderConfig ask for"
	} else if drift == "" {
		drift = "the service does not exist"
	}
	logf.FromContext(ctx).Info("Drift detected; repairing", "drift", drift)
	driftsTotal.WithLabelValues(r.kind).Inc()
	r.eventf(obj, corev1.EventTypeWarning, ReasonDriftDetected, "Observe", "Drift detected, repairing: %s", drift)
	return drift
}

// ensureFinalizer adds the runtime's finalizer to obj when it lacks it.
// When that fails it returns the reconcile's outcome (a result other than
// ""), which the caller returns.
func (r *APIReconciler[T, C]) ensureFinalizer(ctx context.Context, obj T) (ctrl.Result, string, error) {
	if controllerutil.ContainsFinalizer(obj, r.finalizer) {
		return ctrl.Result{}, "", nil
	}
	if err := r.addFinalizer(ctx, obj); err != nil {
		if apierrors.IsConflict(err) {
			return r.retryConflict(ctx, "add finalizer")
		}
		setSynced(obj, metav1.ConditionFalse, ReasonReconcileError, fmt.Sprintf("Cannot add the finalizer: %v", err))
		return ctrl.Result{}, ResultError, fmt.Errorf("add finalizer %s: %w", r.finalizer, err)
	}
	return ctrl.Result{}, "", nil
}

// FinalizerName is the finalizer the runtime puts on the objects of the API
// group group, and removes once their service is deleted.
func FinalizerName(group string) string { return group + "/finalizer" }

// sameConfig reports whether the configuration is still the one obj was
// last in sync with (epoch is the configEpoch read before the ProviderConfig
// was), or whether that is unknown.
func (r *APIReconciler[T, C]) sameConfig(obj T, epoch int64) bool {
	seen, ok := r.syncedConfig.Load(client.ObjectKeyFromObject(obj))
	return !ok || seen == epoch
}

// reconcileDelete is the path of an object being deleted.
func (r *APIReconciler[T, C]) reconcileDelete(ctx context.Context, obj T) (ctrl.Result, string, error) {
	log := logf.FromContext(ctx)
	if !controllerutil.ContainsFinalizer(obj, r.finalizer) {
		return ctrl.Result{}, ResultSkipped, nil
	}
	policy, err := deletionPolicy(obj.GetAnnotations())
	if err != nil {
		setSynced(obj, metav1.ConditionFalse, ReasonInvalidDeletionPolicy, err.Error())
		return ctrl.Result{}, ResultInvalidInput, nil
	}
	if policy == DeletionPolicyOrphan {
		log.V(1).Info("Deletion policy Orphan: leaving the service in place")
		StatusTerminatingWithReason(obj, ReasonOrphaned, "Deletion policy Orphan: the service is left in place and no longer managed")
		return r.release(ctx, obj, true)
	}
	// Once Delete reported done, access may already be going away:
	// asking for the clusters again would request it anew.
	if readyReason(obj) == ReasonReleasingAccess {
		return r.release(ctx, obj, false)
	}

	cfg, ok, err := r.providerConfig(ctx, obj, PhaseTerminating)
	if err != nil || !ok {
		return waitOrFail(err)
	}
	StatusTerminating(obj)

	clusters, ready, err := r.access.Clusters(ctx, obj)
	if err != nil {
		if uerr, ok := AsInvalidUserInput(err); ok {
			// The clusters are gone for good (for example the
			// ManagedControlPlane was deleted first, and its cluster with
			// it): there is nothing left to delete.
			log.V(1).Info("Clusters are gone; skipping Delete", "reason", uerr.Reason, "message", uerr.Message)
			return r.release(ctx, obj, false)
		}
		setSynced(obj, metav1.ConditionFalse, ReasonClusterAccessFailed, fmt.Sprintf("Cannot get access to the clusters: %v", err))
		return ctrl.Result{}, ResultError, fmt.Errorf("get clusters: %w", err)
	}
	if !ready {
		log.V(1).Info("Waiting for cluster access")
		return ctrl.Result{RequeueAfter: r.opts.waitInterval}, ResultWaiting, nil
	}

	if checker, ok := r.reconciler.(UserResourceChecker[T, C]); ok {
		users, err := checker.UserResources(ctx, obj, cfg, clusters)
		if err != nil {
			return r.authorFailed(ctx, obj, "check user resources", err)
		}
		if len(users) > 0 {
			log.V(1).Info("Deletion blocked by user resources", "count", len(users))
			setCondition(obj, ConditionDeletionBlocked, metav1.ConditionTrue, ReasonUserResourcesPresent,
				"Deletion waits until these are removed: "+listNames(users, 10))
			setSynced(obj, metav1.ConditionTrue, ReasonReconcileSuccess, "Deletion waits for user resources")
			return ctrl.Result{RequeueAfter: r.opts.waitInterval}, ResultWaiting, nil
		}
		if hasCondition(obj, ConditionDeletionBlocked) {
			setCondition(obj, ConditionDeletionBlocked, metav1.ConditionFalse, ReasonDeletionUnblocked, "No user resources are left")
		}
	}

	res, err := r.reconciler.Delete(ctx, obj, cfg, clusters)
	if err != nil {
		return r.authorFailed(ctx, obj, "delete", err)
	}
	setSynced(obj, metav1.ConditionTrue, ReasonReconcileSuccess, "Deleting the service")
	if !res.IsZero() {
		return res, ResultWaiting, nil
	}
	StatusTerminatingWithReason(obj, ReasonReleasingAccess, "The service is deleted; releasing access to the clusters")
	return r.release(ctx, obj, false)
}

// release gives up the object's cluster access and then removes the
// finalizer. orphaned says that the service was left in place.
func (r *APIReconciler[T, C]) release(ctx context.Context, obj T, orphaned bool) (ctrl.Result, string, error) {
	done, err := r.access.Release(ctx, obj)
	if err != nil {
		setSynced(obj, metav1.ConditionFalse, ReasonClusterAccessFailed, fmt.Sprintf("Cannot release access to the clusters: %v", err))
		return ctrl.Result{}, ResultError, fmt.Errorf("release clusters: %w", err)
	}
	if !done {
		logf.FromContext(ctx).V(1).Info("Waiting for cluster access to be released")
		return ctrl.Result{RequeueAfter: r.opts.waitInterval}, ResultWaiting, nil
	}
	if err := r.patchMetadata(ctx, obj, func(o T) { controllerutil.RemoveFinalizer(o, r.finalizer) }); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, ResultDeleted, nil
		}
		if apierrors.IsConflict(err) {
			return r.retryConflict(ctx, "remove finalizer")
		}
		setSynced(obj, metav1.ConditionFalse, ReasonReconcileError, fmt.Sprintf("Cannot remove the finalizer: %v", err))
		return ctrl.Result{}, ResultError, fmt.Errorf("remove finalizer %s: %w", r.finalizer, err)
	}
	r.syncedConfig.Delete(client.ObjectKeyFromObject(obj))
	if orphaned {
		r.eventf(obj, corev1.EventTypeNormal, ReasonOrphaned, "Delete",
			"Deletion policy Orphan: the service was left in place and is no longer managed")
	}
	logf.FromContext(ctx).V(1).Info("Deletion finished; finalizer removed", "orphaned", orphaned)
	return ctrl.Result{}, ResultDeleted, nil
}

// providerConfig gets the ProviderConfig. When it is missing, being deleted
// or invalid (ConfigValidator) it sets Ready (with phase) and Synced to say
// so and returns false: there is nothing to retry, the ProviderConfig watch
// enqueues every object when it appears or changes.
func (r *APIReconciler[T, C]) providerConfig(ctx context.Context, obj T, phase Phase) (C, bool, error) {
	cfg := r.newConfig()
	if err := r.platform.GetClient().Get(ctx, client.ObjectKey{Name: r.providerName}, cfg); err != nil {
		if !apierrors.IsNotFound(err) {
			setSynced(obj, metav1.ConditionFalse, ReasonReconcileError, fmt.Sprintf("Cannot read the ProviderConfig %q: %v", r.providerName, err))
			return cfg, false, fmt.Errorf("get ProviderConfig %q: %w", r.providerName, err)
		}
		logf.FromContext(ctx).V(1).Info("ProviderConfig missing", "providerConfig", r.providerName)
		msg := fmt.Sprintf("The ProviderConfig %q does not exist on the platform cluster", r.providerName)
		setReady(obj, phase, metav1.ConditionFalse, ReasonProviderConfigMissing, msg)
		setSynced(obj, metav1.ConditionFalse, ReasonProviderConfigMissing, msg)
		return cfg, false, nil
	}
	if cfg.GetDeletionTimestamp() != nil {
		logf.FromContext(ctx).V(1).Info("ProviderConfig being deleted", "providerConfig", r.providerName)
		msg := fmt.Sprintf("The ProviderConfig %q is being deleted", r.providerName)
		setReady(obj, phase, metav1.ConditionFalse, ReasonProviderConfigDeleting, msg)
		setSynced(obj, metav1.ConditionFalse, ReasonProviderConfigDeleting, msg)
		return cfg, false, nil
	}
	// The ProviderConfig decoded, but a value the API server would refuse
	// today may have been stored before its rule existed: it configures
	// nothing until it is fixed, and the ProviderConfig watch brings every
	// object back then. Other providers' ProviderConfigs are not read here,
	// so a bad one of theirs does not stop this provider.
	if v, ok := any(cfg).(ConfigValidator); ok {
		if err := v.Validate(); err != nil {
			logf.FromContext(ctx).V(1).Info("ProviderConfig invalid", "providerConfig", r.providerName, "error", err.Error())
			msg := fmt.Sprintf("The ProviderConfig %q is invalid: %v", r.providerName, err)
			if phase == PhasePending {
				phase = PhaseFailed
			}
			setReady(obj, phase, metav1.ConditionFalse, ReasonInvalidProviderConfig, msg)
			setSynced(obj, metav1.ConditionFalse, ReasonInvalidProviderConfig, msg)
			return cfg, false, nil
		}
	}
	return cfg, true, nil
}

// waitOrFail turns the outcome of a step that set its own conditions into a
// reconcile result: an error is retried with backoff, no error means
// waiting for a watch.
func waitOrFail(err error) (ctrl.Result, string, error) {
	if err != nil {
		return ctrl.Result{}, ResultError, err
	}
	return ctrl.Result{}, ResultWaiting, nil
}

// authorFailed handles an error from the provider author's code. Invalid
// user input sets Ready=False (phase Failed) and Synced=False with its
// reason and is not retried: a change of the object or its ProviderConfig
// triggers the next reconcile. A WaitingError does the same with phase
// Pending or Progressing: the provider's watch triggers it. Any other
// error sets Synced=False and is returned, so controller-runtime retries
// it with backoff.
//
//nolint:unparam // it returns a reconcile step's outcome, so that each step ends in one return
func (r *APIReconciler[T, C]) authorFailed(ctx context.Context, obj T, step string, err error) (ctrl.Result, string, error) {
	if w, ok := AsWaiting(err); ok {
		logf.FromContext(ctx).V(1).Info("Waiting for a change", "step", step, "reason", w.Reason, "message", w.Message)
		phase := PhasePending
		switch {
		case obj.GetDeletionTimestamp() != nil:
			phase = PhaseTerminating
		case obj.GetPhase() == PhaseReady || obj.GetPhase() == PhaseProgressing:
			phase = PhaseProgressing
		}
		setReady(obj, phase, metav1.ConditionFalse, w.Reason, w.Message)
		setSynced(obj, metav1.ConditionFalse, w.Reason, w.Message)
		return ctrl.Result{}, ResultWaiting, nil
	}
	if uerr, ok := AsInvalidUserInput(err); ok {
		logf.FromContext(ctx).V(1).Info("Invalid user input; waiting for a change", "step", step, "reason", uerr.Reason, "message", uerr.Message)
		phase := PhaseFailed
		if obj.GetDeletionTimestamp() != nil {
			phase = PhaseTerminating
		}
		setReady(obj, phase, metav1.ConditionFalse, uerr.Reason, uerr.Message)
		setSynced(obj, metav1.ConditionFalse, uerr.Reason, uerr.Message)
		return ctrl.Result{}, ResultInvalidInput, nil
	}
	setSynced(obj, metav1.ConditionFalse, ReasonReconcileError, fmt.Sprintf("%s: %v", step, err))
	return ctrl.Result{}, ResultError, fmt.Errorf("%s %s %s: %w", step, r.kind, client.ObjectKeyFromObject(obj), err)
}

// pollResult is the result after success: the author's RequeueAfter when
// set, else the poll interval with jitter.
func (r *APIReconciler[T, C]) pollResult(ctx context.Context, obj T, cfg C, res ctrl.Result) ctrl.Result {
	if res.RequeueAfter > 0 {
		return res
	}
	d, err := pollInterval(obj.GetAnnotations(), cfg, r.opts.pollInterval, r.opts.minPollInterval)
	if err != nil {
		logf.FromContext(ctx).V(1).Info("Ignoring the poll interval annotation", "error", err.Error())
	}
	return ctrl.Result{RequeueAfter: jitter(d, r.opts.pollJitter, randFloat)}
}

// conflictRetryInterval is how soon a reconcile whose metadata patch
// conflicted (usually because the cache was behind) is retried.
const conflictRetryInterval = 100 * time.Millisecond

// retryConflict retries shortly, without a condition or event: a conflict
// means that the cache was behind, not that anything is wrong.
//
//nolint:unparam // it returns a reconcile step's outcome, so that each step ends in one return
func (r *APIReconciler[T, C]) retryConflict(ctx context.Context, step string) (ctrl.Result, string, error) {
	logf.FromContext(ctx).V(1).Info("Conflict; retrying", "step", step)
	return ctrl.Result{RequeueAfter: conflictRetryInterval}, ResultWaiting, nil
}

// patchMetadata applies mutate to a copy of obj and patches the difference
// (metadata only: annotations, finalizers) with optimistic locking, then
// copies the new metadata back, so that status changes made to obj in
// memory survive.
func (r *APIReconciler[T, C]) patchMetadata(ctx context.Context, obj T, mutate func(T)) error {
	base, ok := obj.DeepCopyObject().(T)
	if !ok {
		return fmt.Errorf("deep copy of %T is not a %T", obj, obj)
	}
	changed, _ := obj.DeepCopyObject().(T)
	mutate(changed)
	if err := r.client.Patch(ctx, changed, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	obj.SetAnnotations(changed.GetAnnotations())
	obj.SetFinalizers(changed.GetFinalizers())
	obj.SetResourceVersion(changed.GetResourceVersion())
	return nil
}

// addFinalizer adds the runtime's finalizer to obj on the API server.
//
// When obj has finalizers already (an SFServiceInstance has the broker's),
// it sends a JSON patch that tests them and appends the runtime's, instead
// of a merge patch locked by resourceVersion: a write since obj was read
// that left the finalizers alone, such as the status the broker writes
// right after creating an object, does not make it conflict (a conflict
// costs a failed write, a status write and a retry 100 ms later), while a
// change of the finalizers still does. obj gets the new finalizers; it gets
// the new resourceVersion only when its spec (generation) and the rest of
// its metadata are still the server's, so that a later write locked by
// resourceVersion cannot undo a change made since obj was read (its status
// may be behind: the runtime writes status with a merge patch of its own
// changes). When the test fails, or obj has no finalizers (a test cannot
// tell a missing list from an empty one), it falls back to patchMetadata,
// whose conflicts the caller retries.
func (r *APIReconciler[T, C]) addFinalizer(ctx context.Context, obj T) error {
	current := obj.GetFinalizers()
	if len(current) > 0 {
		patch, err := json.Marshal([]jsonPatchOp{
			{Op: "test", Path: "/metadata/finalizers", Value: current},
			{Op: "add", Path: "/metadata/finalizers/-", Value: r.finalizer},
		})
		if err != nil {
			return fmt.Errorf("encode the finalizer patch: %w", err)
		}
		changed, _ := obj.DeepCopyObject().(T)
		err = r.client.Patch(ctx, changed, client.RawPatch(types.JSONPatchType, patch))
		if err == nil {
			if sameMetadata(obj, changed) {
				obj.SetResourceVersion(changed.GetResourceVersion())
			}
			obj.SetFinalizers(changed.GetFinalizers())
			return nil
		}
		if !apierrors.IsInvalid(err) {
			return err
		}
		// The test failed (the finalizers changed), or the patch is
		// invalid for another reason: the locked merge patch tells which.
	}
	return r.patchMetadata(ctx, obj, func(o T) { controllerutil.AddFinalizer(o, r.finalizer) })
}

// sameMetadata reports whether a and b have the same generation, labels,
// annotations, owner references and deletion timestamp.
func sameMetadata(a, b client.Object) bool {
	return a.GetGeneration() == b.GetGeneration() &&
		maps.Equal(a.GetLabels(), b.GetLabels()) && maps.Equal(a.GetAnnotations(), b.GetAnnotations()) &&
		reflect.DeepEqual(a.GetOwnerReferences(), b.GetOwnerReferences()) &&
		a.GetDeletionTimestamp().Equal(b.GetDeletionTimestamp())
}

// jsonPatchOp is one operation of a JSON patch (RFC 6902).
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// observe records the metrics of one reconcile.
func (r *APIReconciler[T, C]) observe(obj T, result string, start time.Time) {
	reconcilesTotal.WithLabelValues(r.kind, result).Inc()
	reconcileDuration.WithLabelValues(r.kind).Observe(time.Since(start).Seconds())
	switch result {
	case ResultError:
		reason := ReasonReconcileError
		if c := findCondition(obj, ConditionSynced); c != nil && c.Status == metav1.ConditionFalse &&
			(c.Reason == ReasonClusterAccessFailed || c.Reason == ReasonReconcileError) {
			reason = c.Reason
		}
		reconcileErrorsTotal.WithLabelValues(r.kind, reason).Inc()
	case ResultInvalidInput:
		reconcileErrorsTotal.WithLabelValues(r.kind, ReasonInvalidUserInput).Inc()
	}
}

// eventf records an event on obj, when there is a recorder.
func (r *APIReconciler[T, C]) eventf(obj T, eventType, reason, action, format string, args ...any) {
	if r.recorder == nil {
		return
	}
	r.recorder.Eventf(obj, nil, eventType, reason, action, format, args...)
}

// listNames joins names for a message, at most limit of them.
func listNames(names []string, limit int) string {
	if len(names) <= limit {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:limit], ", "), len(names)-limit)
}

// isNil reports whether v is nil or a nil pointer, map, func, ... in an
// interface.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Interface, reflect.Chan:
		return rv.IsNil()
	}
	return false
}
