package mcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
)

// ControllerName is the default name of the controller, in logs, metrics
// (controller_runtime_reconcile_total{controller="managedcontrolplane"}) and
// as the reporting controller of events.
const ControllerName = "managedcontrolplane"

// DefaultServicePollInterval is how often a ManagedControlPlane being deleted
// checks whether its service objects are gone. Service kinds are registered
// at run time, so they are polled rather than watched.
const DefaultServicePollInterval = 5 * time.Second

// Reconciler reconciles ManagedControlPlanes on the onboarding cluster and
// the requests made for them on the platform cluster.
type Reconciler struct {
	onboarding cluster.Cluster
	platform   cluster.Cluster

	name                string
	servicePollInterval time.Duration
	controllerOptions   controller.Options
	recorder            events.EventRecorder
}

var _ reconcile.Reconciler = &Reconciler{}

// Option configures a Reconciler.
type Option func(*Reconciler)

// WithControllerName names the controller (default ControllerName), for
// processes that run more than one.
func WithControllerName(name string) Option { return func(r *Reconciler) { r.name = name } }

// WithServicePollInterval sets how often a ManagedControlPlane being deleted
// checks whether its service objects are gone (default
// DefaultServicePollInterval).
func WithServicePollInterval(d time.Duration) Option {
	return func(r *Reconciler) { r.servicePollInterval = d }
}

// WithControllerOptions sets the controller-runtime options of the
// controller, such as MaxConcurrentReconciles or SkipNameValidation.
func WithControllerOptions(o controller.Options) Option {
	return func(r *Reconciler) { r.controllerOptions = o }
}

// WithEventRecorder replaces the event recorder (default: one of the
// onboarding cluster, named after the controller).
func WithEventRecorder(rec events.EventRecorder) Option {
	return func(r *Reconciler) { r.recorder = rec }
}

// NewReconciler returns a Reconciler that watches ManagedControlPlanes on
// onboarding and makes their requests on platform. A ctrl.Manager is a
// cluster.Cluster too, so either argument may be the manager itself; the
// other must be a cluster.Cluster added to that manager (mgr.Add), so that
// its cache is started.
func NewReconciler(onboarding, platform cluster.Cluster, opts ...Option) *Reconciler {
	r := &Reconciler{
		onboarding:          onboarding,
		platform:            platform,
		name:                ControllerName,
		servicePollInterval: DefaultServicePollInterval,
	}
	for _, o := range opts {
		o(r)
	}
	if r.recorder == nil {
		r.recorder = onboarding.GetEventRecorder(r.name)
	}
	return r
}

// Reconcile brings one ManagedControlPlane closer to its desired state.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	logger := log.FromContext(ctx)
	m := &corev2alpha1.ManagedControlPlane{}
	if err := r.onboarding.GetClient().Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := m.DeepCopy()
	defer func() {
		if err := r.patchStatus(ctx, before, m); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	if !m.DeletionTimestamp.IsZero() {
		logger.V(2).Info("reconciling deletion")
		return r.reconcileDelete(ctx, m)
	}
	// The finalizer comes first, even for an MCP that is invalid: service
	// objects named like it may exist all the same and are deleted with it.
	if err := r.ensureFinalizer(ctx, m); err != nil {
		return ctrl.Result{}, err
	}
	if len(m.Name) > MaxNameLength {
		// Nothing can be created for such an MCP; a new spec will not help
		// either, so it waits for the user without a requeue.
		msg := fmt.Sprintf("The name is %d characters long; a ManagedControlPlane name has at most %d.", len(m.Name), MaxNameLength)
		setCondition(m, common.ConditionTypeReady, metav1.ConditionFalse, ReasonInvalidName, msg)
		m.Status.Phase = common.StatusPhaseProgressing
		return ctrl.Result{}, nil
	}

	if err := r.ensureNamespace(ctx, m); err != nil {
		return ctrl.Result{}, err
	}
	cr, err := r.reconcileClusterRequest(ctx, m)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.reconcileAccess(ctx, m, cr); err != nil {
		return ctrl.Result{}, err
	}
	summarize(m)
	return ctrl.Result{}, nil
}

// ensureFinalizer adds the controller's finalizer before anything is created
// for the MCP, so that nothing is left behind when it is deleted.
func (r *Reconciler) ensureFinalizer(ctx context.Context, m *corev2alpha1.ManagedControlPlane) error {
	if controllerutil.ContainsFinalizer(m, corev2alpha1.MCPFinalizer) {
		return nil
	}
	orig := m.DeepCopy()
	controllerutil.AddFinalizer(m, corev2alpha1.MCPFinalizer)
	if err := r.onboarding.GetClient().Patch(ctx, m, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("add finalizer: %w", err)
	}
	return nil
}

// removeFinalizer removes the controller's finalizer, the last step of a
// deletion.
func (r *Reconciler) removeFinalizer(ctx context.Context, m *corev2alpha1.ManagedControlPlane) error {
	if !controllerutil.ContainsFinalizer(m, corev2alpha1.MCPFinalizer) {
		return nil
	}
	orig := m.DeepCopy()
	controllerutil.RemoveFinalizer(m, corev2alpha1.MCPFinalizer)
	if err := r.onboarding.GetClient().Patch(ctx, m, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("remove finalizer: %w", err))
	}
	return nil
}

// patchStatus writes the status when it changed, always with the current
// generation as observedGeneration, and records an event for each condition
// that changed.
func (r *Reconciler) patchStatus(ctx context.Context, before, m *corev2alpha1.ManagedControlPlane) error {
	m.Status.ObservedGeneration = m.Generation
	if apiequality.Semantic.DeepEqual(before.Status, m.Status) {
		return nil
	}
	// The merge patch must not carry metadata changes (the finalizer has
	// been patched on its own), only the status.
	base := m.DeepCopy()
	base.Status = before.Status
	if err := r.onboarding.GetClient().Status().Patch(ctx, m, client.MergeFrom(base)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patch status of ManagedControlPlane %s/%s: %w", m.Namespace, m.Name, err)
	}
	for _, c := range transitions(before.Status.Conditions, m.Status.Conditions) {
		r.recorder.Eventf(m, nil, eventType(c), c.Reason, "Reconcile", "%s=%s: %s", c.Type, c.Status, c.Message)
	}
	return nil
}
