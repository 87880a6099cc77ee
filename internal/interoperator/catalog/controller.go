package catalog

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// ConditionReady is the condition that says whether a catalog entry is
// valid and served.
const ConditionReady = "Ready"

// Reconciler validates the catalog of one inter-operator: the SFServices
// and SFPlans in the catalog namespace its ProviderConfig names, on the
// platform cluster. A reconcile request names a namespace (the request's
// name is empty): every entry of the namespace is validated together,
// because an entry's validity depends on the others (ids, services).
type Reconciler struct {
	providerName string
	platform     cluster.Cluster
	name         string
	options      controller.Options
	recorder     events.EventRecorder
}

var _ reconcile.Reconciler = &Reconciler{}

// Option configures a Reconciler.
type Option func(*Reconciler)

// WithControllerName names the controller (default "sfcatalog"); names must
// be unique within a manager.
func WithControllerName(name string) Option {
	return func(r *Reconciler) {
		if name != "" {
			r.name = name
		}
	}
}

// WithControllerOptions sets controller-runtime's options of the controller.
func WithControllerOptions(o controller.Options) Option {
	return func(r *Reconciler) { r.options = o }
}

// NewReconciler returns the catalog Reconciler of the inter-operator named
// providerName, whose ProviderConfig, SFServices and SFPlans live on
// platform.
func NewReconciler(providerName string, platform cluster.Cluster, opts ...Option) *Reconciler {
	r := &Reconciler{providerName: providerName, platform: platform, name: "sfcatalog"}
	for _, o := range opts {
		o(r)
	}
	return r
}

// SetupWithManager registers the controller with mgr, to which the platform
// cluster must have been added. It watches SFServices, SFPlans and the
// ProviderConfig on the platform cluster.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.platform == nil {
		return errors.New("setup catalog controller: no platform cluster")
	}
	r.recorder = r.platform.GetEventRecorder(r.name)
	byNamespace := func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace()}}}
	}
	// Status writes of this controller change neither generation nor
	// labels: they are not passed on.
	changed := predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{})
	err := ctrl.NewControllerManagedBy(mgr).
		Named(r.name).
		WithOptions(r.options).
		WatchesRawSource(source.Kind(r.platform.GetCache(), client.Object(&osbv1alpha1.SFService{}),
			handler.EnqueueRequestsFromMapFunc(byNamespace), changed)).
		WatchesRawSource(source.Kind(r.platform.GetCache(), client.Object(&osbv1alpha1.SFPlan{}),
			handler.EnqueueRequestsFromMapFunc(byNamespace), changed)).
		WatchesRawSource(source.Kind(r.platform.GetCache(), &interoperatorv1alpha1.ProviderConfig{},
			handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, c *interoperatorv1alpha1.ProviderConfig) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: c.CatalogNamespace()}}}
			}),
			predicate.NewTypedPredicateFuncs(func(c *interoperatorv1alpha1.ProviderConfig) bool { return c.Name == r.providerName }))).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setup catalog controller: %w", err)
	}
	return nil
}

// Reconcile validates every SFService and SFPlan of the requested
// namespace, when it is the catalog namespace, and writes the status of
// those whose result changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx).WithValues("catalogNamespace", req.Namespace)
	c := r.platform.GetClient()
	cfg := &interoperatorv1alpha1.ProviderConfig{}
	if err := c.Get(ctx, client.ObjectKey{Name: r.providerName}, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			log.V(1).Info("No ProviderConfig; the catalog is not served", "providerConfig", r.providerName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get ProviderConfig %s: %w", r.providerName, err)
	}
	if req.Namespace != cfg.CatalogNamespace() {
		return ctrl.Result{}, nil
	}
	services := &osbv1alpha1.SFServiceList{}
	if err := c.List(ctx, services, client.InNamespace(req.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("list SFServices in %s: %w", req.Namespace, err)
	}
	plans := &osbv1alpha1.SFPlanList{}
	if err := c.List(ctx, plans, client.InNamespace(req.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("list SFPlans in %s: %w", req.Namespace, err)
	}

	var errs []error
	for i := range services.Items {
		svc := &services.Items[i]
		if svc.DeletionTimestamp != nil {
			continue
		}
		before := svc.DeepCopy()
		setReady(&svc.Status.Conditions, svc.Generation, ValidateService(svc, services.Items))
		svc.Status.ObservedGeneration = svc.Generation
		if err := r.writeStatus(ctx, before, svc, before.Status, svc.Status, svc.Status.Conditions, before.Status.Conditions); err != nil {
			errs = append(errs, err)
		}
	}
	for i := range plans.Items {
		plan := &plans.Items[i]
		if plan.DeletionTimestamp != nil {
			continue
		}
		before := plan.DeepCopy()
		problem := ValidatePlan(plan, services.Items, plans.Items)
		setReady(&plan.Status.Conditions, plan.Generation, problem)
		plan.Status.ObservedGeneration = plan.Generation
		// Only a valid plan has a specHash: one that turns invalid (a
		// second plan with its id appeared) loses the hash of its last
		// valid spec.
		plan.Status.SpecHash = ""
		if problem == nil {
			plan.Status.SpecHash = SpecHash(plan)
		}
		if err := r.writeStatus(ctx, before, plan, before.Status, plan.Status, plan.Status.Conditions, before.Status.Conditions); err != nil {
			errs = append(errs, err)
		}
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// writeStatus patches the status of obj (whose unchanged copy is before)
// when it differs, and records an event when Ready changed.
func (r *Reconciler) writeStatus(ctx context.Context, before, obj client.Object, oldStatus, newStatus any, now, was []metav1.Condition) error {
	if equality.Semantic.DeepEqual(oldStatus, newStatus) {
		return nil
	}
	if err := r.platform.GetClient().Status().Patch(ctx, obj, client.MergeFrom(before)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patch status of %s %s/%s: %w", kindOf(obj), obj.GetNamespace(), obj.GetName(), err)
	}
	cur := apimeta.FindStatusCondition(now, ConditionReady)
	old := apimeta.FindStatusCondition(was, ConditionReady)
	if cur != nil && (old == nil || old.Status != cur.Status || old.Reason != cur.Reason) {
		eventType := corev1.EventTypeNormal
		if cur.Status != metav1.ConditionTrue {
			eventType = corev1.EventTypeWarning
		}
		r.recorder.Eventf(obj, nil, eventType, cur.Reason, "Validate", "%s", cur.Message)
	}
	logf.FromContext(ctx).V(1).Info("Catalog entry validated", "kind", kindOf(obj), "name", obj.GetName(), "ready", cur != nil && cur.Status == metav1.ConditionTrue)
	return nil
}

// setReady sets the Ready condition from the outcome of a validation.
func setReady(conditions *[]metav1.Condition, generation int64, p *Problem) {
	c := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: string(ReasonValid),
		Message: "The entry is valid and served in the catalog", ObservedGeneration: generation}
	if p != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, string(p.Reason), p.Message
	}
	apimeta.SetStatusCondition(conditions, c)
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *osbv1alpha1.SFService:
		return "SFService"
	case *osbv1alpha1.SFPlan:
		return "SFPlan"
	}
	return fmt.Sprintf("%T", obj)
}
