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
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
)

// ControllerName is the default name of the controller, in logs, metrics
// (controller_runtime_reconcile_total{controller="managedcontrolplane"}) and
// as the reporting controller of events.
const ControllerName = "managedcontrolplane"

// ControlPlaneControllerName is the default name of the controller of
// ControlPlanes, the same controller for openMCP's current kind.
const ControlPlaneControllerName = "controlplane"

// DefaultServicePollInterval is how often a ManagedControlPlane being deleted
// checks whether its service objects are gone. Service kinds are registered
// at run time, so they are polled rather than watched.
const DefaultServicePollInterval = 5 * time.Second

// Reconciler reconciles ManagedControlPlanes and ControlPlanes on the
// onboarding cluster and the requests made for them on the platform
// cluster. SetupWithManager registers one controller per kind; both run
// this same code.
type Reconciler struct {
	onboarding cluster.Cluster
	platform   cluster.Cluster

	name                string
	controlPlaneName    string
	servicePollInterval time.Duration
	controllerOptions   controller.Options
	recorder            events.EventRecorder
}

// Option configures a Reconciler.
type Option func(*Reconciler)

// WithControllerName names the controller of ManagedControlPlanes (default
// ControllerName) and, with the suffix "-controlplane", the one of
// ControlPlanes (default ControlPlaneControllerName), for processes that run
// more than one.
func WithControllerName(name string) Option {
	return func(r *Reconciler) { r.name, r.controlPlaneName = name, name+"-controlplane" }
}

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

// NewReconciler returns a Reconciler that watches ManagedControlPlanes and
// ControlPlanes on onboarding and makes their requests on platform. The
// onboarding cluster must serve both kinds (their CRDs are installed
// together). A ctrl.Manager is a
// cluster.Cluster too, so either argument may be the manager itself; the
// other must be a cluster.Cluster added to that manager (mgr.Add), so that
// its cache is started.
func NewReconciler(onboarding, platform cluster.Cluster, opts ...Option) *Reconciler {
	r := &Reconciler{
		onboarding:          onboarding,
		platform:            platform,
		name:                ControllerName,
		controlPlaneName:    ControlPlaneControllerName,
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

// kindReconciler reconciles the control planes of one kind.
type kindReconciler struct {
	r    *Reconciler
	kind kind
}

var _ reconcile.Reconciler = kindReconciler{}

// Reconcile brings one control plane of the kind closer to its desired
// state.
func (k kindReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return k.r.reconcile(ctx, req, k.kind)
}

// reconcile brings one control plane of kind k closer to its desired state.
func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request, k kind) (res ctrl.Result, retErr error) {
	logger := logf.FromContext(ctx)
	m := k.new()
	if err := r.onboarding.GetClient().Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := copyOf(m)
	defer func() {
		if err := r.patchStatus(ctx, before, m); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	if !m.GetDeletionTimestamp().IsZero() {
		logger.V(2).Info("Reconciling deletion")
		return r.reconcileDelete(ctx, m)
	}
	// The finalizer comes first, even for an MCP that is invalid: service
	// objects named like it may exist all the same and are deleted with it.
	if err := r.ensureFinalizer(ctx, m); err != nil {
		return ctrl.Result{}, err
	}
	if len(m.GetName()) > MaxNameLength {
		// Nothing can be created for such an MCP; a new spec will not help
		// either, so it waits for the user without a requeue.
		msg := fmt.Sprintf("The name is %d characters long; a %s name has at most %d.", len(m.GetName()), kindOf(m), MaxNameLength)
		setCondition(m, common.ConditionTypeReady, metav1.ConditionFalse, ReasonInvalidName, msg)
		m.ControlPlaneStatus().Phase = common.StatusPhaseProgressing
		return ctrl.Result{}, nil
	}

	platformNS, err := r.resolvePlatformNamespace(ctx, m)
	if err != nil {
		return ctrl.Result{}, err
	}
	conflict, err := r.claimNamespace(ctx, m, platformNS)
	if err != nil {
		return ctrl.Result{}, err
	}
	if conflict != "" {
		// The other kind's control plane of this namespace/name holds the
		// platform namespace; nothing is created or changed for this one.
		// The watch on platform namespaces brings it back when the holder
		// is gone.
		setCondition(m, common.ConditionTypeReady, metav1.ConditionFalse, ReasonNameConflict, conflict)
		m.ControlPlaneStatus().Phase = common.StatusPhaseProgressing
		return ctrl.Result{}, nil
	}
	if err := r.recordPlatformNamespace(ctx, m, platformNS); err != nil {
		return ctrl.Result{}, err
	}
	cr, err := r.reconcileClusterRequest(ctx, m, platformNS)
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
func (r *Reconciler) ensureFinalizer(ctx context.Context, m object) error {
	if controllerutil.ContainsFinalizer(m, corev2alpha1.MCPFinalizer) {
		return nil
	}
	orig := copyOf(m)
	controllerutil.AddFinalizer(m, corev2alpha1.MCPFinalizer)
	if err := r.onboarding.GetClient().Patch(ctx, m, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("add finalizer: %w", err)
	}
	return nil
}

// removeFinalizer removes the controller's finalizer, the last step of a
// deletion.
func (r *Reconciler) removeFinalizer(ctx context.Context, m object) error {
	if !controllerutil.ContainsFinalizer(m, corev2alpha1.MCPFinalizer) {
		return nil
	}
	orig := copyOf(m)
	controllerutil.RemoveFinalizer(m, corev2alpha1.MCPFinalizer)
	if err := r.onboarding.GetClient().Patch(ctx, m, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("remove finalizer: %w", err))
	}
	return nil
}

// patchStatus writes the status when it changed, always with the current
// generation as observedGeneration, and records an event for each condition
// that changed.
func (r *Reconciler) patchStatus(ctx context.Context, before, m object) error {
	m.ControlPlaneStatus().ObservedGeneration = m.GetGeneration()
	if apiequality.Semantic.DeepEqual(before.ControlPlaneStatus(), m.ControlPlaneStatus()) {
		return nil
	}
	// The merge patch must not carry metadata changes (the finalizer has
	// been patched on its own), only the status.
	base := copyOf(m)
	*base.ControlPlaneStatus() = *before.ControlPlaneStatus()
	if err := r.onboarding.GetClient().Status().Patch(ctx, m, client.MergeFrom(base)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patch status of %s: %w", ref(m), err)
	}
	for _, c := range transitions(before.ControlPlaneStatus().Conditions, m.ControlPlaneStatus().Conditions) {
		r.recorder.Eventf(m, nil, eventType(c), c.Reason, "Reconcile", "%s=%s: %s", c.Type, c.Status, c.Message)
	}
	return nil
}
