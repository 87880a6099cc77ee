package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/deploy"
)

var _ reconcile.Reconciler = &Reconciler[*providerv1alpha1.ServiceProvider]{}

// Reconciler deploys the providers of one kind: ServiceProvider,
// ClusterProvider or PlatformService.
type Reconciler[T client.Object] struct {
	client   client.Client
	deployer deploy.Deployer
	kind     Kind[T]
	opts     options
}

// NewReconciler returns a Reconciler for the providers of kind, which
// writes to the platform cluster with c and runs providers with d.
func NewReconciler[T client.Object](c client.Client, d deploy.Deployer, kind Kind[T], opts ...Option) *Reconciler[T] {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if o.reader == nil {
		o.reader = c
	}
	return &Reconciler[T]{client: c, deployer: d, kind: kind, opts: o}
}

// ControllerName is the name of the controller of a kind, as it appears in
// logs and metrics: the kind in lower case, e.g. "serviceprovider".
func ControllerName(kind string) string { return strings.ToLower(kind) }

// SetupWithManager registers the Reconciler with mgr. It watches the
// provider objects and the Jobs and Deployments they own (through the
// controller references the Kubernetes deployer sets), and re-evaluates
// every provider of its kind when any provider's claim on API groups
// changes, since that can change what the others own.
func (r *Reconciler[T]) SetupWithManager(mgr ctrl.Manager) error {
	enqueueAll := handler.EnqueueRequestsFromMapFunc(r.enqueueAll(mgr.GetClient()))
	enqueueRequester := handler.EnqueueRequestsFromMapFunc(r.enqueueRequester(mgr.GetClient()))
	b := ctrl.NewControllerManagedBy(mgr).
		For(r.kind.New()).
		Owns(&batchv1.Job{}).
		Owns(&appsv1.Deployment{}).
		Watches(&providerv1alpha1.ServiceProvider{}, enqueueAll, builder.WithPredicates(ownershipChanged)).
		Watches(&providerv1alpha1.ClusterProvider{}, enqueueAll, builder.WithPredicates(ownershipChanged)).
		Watches(&providerv1alpha1.PlatformService{}, enqueueAll, builder.WithPredicates(ownershipChanged)).
		Watches(&clustersv1alpha1.AccessRequest{}, enqueueRequester, builder.WithPredicates(requestPhaseChanged)).
		Watches(&clustersv1alpha1.ClusterRequest{}, enqueueRequester, builder.WithPredicates(requestPhaseChanged)).
		Named(ControllerName(r.kind.Name)).
		WithOptions(r.opts.controllerOptions)
	if r.opts.notifier != nil {
		b = b.WatchesRawSource(r.opts.notifier.source(r.kind.Name))
	}
	err := b.Complete(r)
	if err != nil {
		return fmt.Errorf("set up %s controller: %w", r.kind.Name, err)
	}
	return nil
}

// Setup registers Reconcilers for ServiceProviders, ClusterProviders and
// PlatformServices with mgr, all running providers with d. Unless opts
// say otherwise, they read provider objects and Secrets through the
// manager's API reader and record events with its recorder.
func Setup(mgr ctrl.Manager, d deploy.Deployer, opts ...Option) error {
	opts = append([]Option{
		WithAPIReader(mgr.GetAPIReader()),
		WithEventRecorder(mgr.GetEventRecorder(FieldOwner)),
	}, opts...)
	for _, setup := range []func(ctrl.Manager) error{
		NewReconciler(mgr.GetClient(), d, ServiceProviders(), opts...).SetupWithManager,
		NewReconciler(mgr.GetClient(), d, ClusterProviders(), opts...).SetupWithManager,
		NewReconciler(mgr.GetClient(), d, PlatformServices(), opts...).SetupWithManager,
	} {
		if err := setup(mgr); err != nil {
			return err
		}
	}
	return nil
}

// Reconcile brings one provider object's deployment in line with its spec,
// or removes it when the object is being deleted.
func (r *Reconciler[T]) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	log := logf.FromContext(ctx)
	obj := r.kind.New()
	if err := r.opts.reader.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get %s %s: %w", r.kind.Name, req.Name, err)
	}
	operation := obj.GetAnnotations()[providerv1alpha1.OperationAnnotation]
	if operation == providerv1alpha1.OperationIgnore {
		log.V(1).Info("Skipping provider: it is annotated to be ignored", "annotation", providerv1alpha1.OperationAnnotation)
		return ctrl.Result{}, nil
	}

	n := newNames(r.kind.Prefix, obj.GetName())
	before := r.kind.Status(obj).DeepCopy()
	removed := false
	defer func() {
		if removed {
			return
		}
		if err := r.patchStatus(ctx, obj, before); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()

	if !obj.GetDeletionTimestamp().IsZero() {
		res, removed, retErr = r.reconcileDelete(ctx, obj, n)
		return res, retErr
	}
	if err := r.ensureFinalizer(ctx, obj); err != nil {
		return ctrl.Result{}, err
	}

	res, retErr = r.reconcileNormal(ctx, obj, n)
	st := r.kind.Status(obj)
	st.ObservedGeneration = obj.GetGeneration()
	setPhase(st, false)

	if retErr == nil && operation == providerv1alpha1.OperationReconcile {
		retErr = r.removeOperationAnnotation(ctx, obj)
	}
	return res, retErr
}

func metricsStatus(svc *types.NamespacedName) *providerv1alpha1.MetricsStatus {
	if svc == nil {
		return nil
	}
	return &providerv1alpha1.MetricsStatus{Service: providerv1alpha1.MetricsService{Name: svc.Name, Namespace: svc.Namespace}}
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ensureFinalizer adds the finalizer, so that the clean-up runs before the
// object goes.
func (r *Reconciler[T]) ensureFinalizer(ctx context.Context, obj T) error {
	if controllerutil.ContainsFinalizer(obj, providerv1alpha1.Finalizer) {
		return nil
	}
	base := obj.DeepCopyObject().(T)
	controllerutil.AddFinalizer(obj, providerv1alpha1.Finalizer)
	if err := r.client.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("add finalizer to %s %s: %w", r.kind.Name, obj.GetName(), err)
	}
	return nil
}

// removeOperationAnnotation removes openmcp.cloud/operation: reconcile after
// the reconcile it asked for. The patch carries the resourceVersion, so an
// annotation changed in the meantime (say, to ignore) is not lost.
func (r *Reconciler[T]) removeOperationAnnotation(ctx context.Context, obj T) error {
	// Patch a copy: the response would overwrite the status computed but
	// not yet written.
	cp := obj.DeepCopyObject().(T)
	base := cp.DeepCopyObject().(T)
	annotations := cp.GetAnnotations()
	delete(annotations, providerv1alpha1.OperationAnnotation)
	cp.SetAnnotations(annotations)
	if err := r.client.Patch(ctx, cp, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("remove %s annotation from %s %s: %w", providerv1alpha1.OperationAnnotation, r.kind.Name, obj.GetName(), err)
	}
	return nil
}

// patchStatus writes the operator's part of the status when it changed
// since before, and records an event per condition transition. The merge
// patch holds only the fields that changed, all of them the operator's,
// so what the provider registered in status.resources is never touched.
func (r *Reconciler[T]) patchStatus(ctx context.Context, obj T, before *providerv1alpha1.DeploymentStatus) error {
	now := r.kind.Status(obj).DeepCopy()
	if equality.Semantic.DeepEqual(before, now) {
		return nil
	}
	base := obj.DeepCopyObject().(T)
	*r.kind.Status(base) = *before
	if err := r.client.Status().Patch(ctx, obj, client.MergeFrom(base)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patch status of %s %s: %w", r.kind.Name, obj.GetName(), err)
	}
	recordTransitions(r.opts.recorder, obj, before.Conditions, now.Conditions)
	return nil
}
