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
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
)

// ConditionReady is the condition that says whether a catalog entry is
// valid and served.
const ConditionReady = "Ready"

// Reconciler validates the catalog of one inter-operator: the SFServices
// and SFPlans in the catalog namespace its ProviderConfig names, on the
// platform cluster. A reconcile request names a namespace (the request's
// name is empty): every entry of the namespace is validated together,
// because an entry's validity depends on the others (ids, services).
//
// It also keeps the entries that instances use: its finalizer (Finalizer)
// is on every entry that instances use (only those), and an entry being
// deleted keeps it, with Ready=False
// and reason DeletionBlocked naming the instances, until no instance of
// the inter-operator uses it any more (deletion.go).
type Reconciler struct {
	providerName string
	platform     cluster.Cluster
	name         string
	options      controller.Options
	recorder     events.EventRecorder
	finalizer    string
	users        entryUsers
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

// WithInstances names the field indexes, on the SFServiceInstances of the
// manager's cache (the onboarding cluster's), of spec.planId and
// spec.serviceId: the catalog keeps the entries those instances use.
// environment is the inter-operator's (its --environment): instances
// labelled for another environment are not its own. Required.
func WithInstances(planIndex, serviceIndex, environment string) Option {
	return func(r *Reconciler) {
		r.users.planIndex, r.users.serviceIndex, r.users.environment = planIndex, serviceIndex, environment
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
	r.finalizer = Finalizer(providerName, r.users.environment)
	return r
}

// SetupWithManager registers the controller with mgr, the onboarding
// cluster's manager, to which the platform cluster must have been added.
// It watches SFServices, SFPlans and the ProviderConfig on the platform
// cluster, and the SFServiceInstances of mgr's cache, which decide which
// entries are held.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.platform == nil {
		return errors.New("setup catalog controller: no platform cluster")
	}
	if r.users.planIndex == "" || r.users.serviceIndex == "" {
		return errors.New("setup catalog controller: the instance indexes are required (WithInstances)")
	}
	r.users.reader = mgr.GetClient()
	r.recorder = r.platform.GetEventRecorder(r.name)
	byNamespace := func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace()}}}
	}
	byConfig := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], configs ...*interoperatorv1alpha1.ProviderConfig) {
		for _, c := range configs {
			if c.Name == r.providerName {
				q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: c.CatalogNamespace()}})
			}
		}
	}
	type configEvents = handler.TypedFuncs[*interoperatorv1alpha1.ProviderConfig, reconcile.Request]
	type instanceEvents = handler.TypedFuncs[*osbv1alpha1.SFServiceInstance, reconcile.Request]
	err := ctrl.NewControllerManagedBy(mgr).
		Named(r.name).
		WithOptions(r.options).
		WatchesRawSource(source.Kind(r.platform.GetCache(), client.Object(&osbv1alpha1.SFService{}),
			handler.EnqueueRequestsFromMapFunc(byNamespace), r.entryChanged())).
		WatchesRawSource(source.Kind(r.platform.GetCache(), client.Object(&osbv1alpha1.SFPlan{}),
			handler.EnqueueRequestsFromMapFunc(byNamespace), r.entryChanged())).
		// The old catalog namespace too: a moved catalog releases the
		// entries it kept there.
		WatchesRawSource(source.Kind(r.platform.GetCache(), &interoperatorv1alpha1.ProviderConfig{}, configEvents{
			CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*interoperatorv1alpha1.ProviderConfig], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				byConfig(q, e.Object)
			},
			UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*interoperatorv1alpha1.ProviderConfig], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				byConfig(q, e.ObjectOld, e.ObjectNew)
			},
			DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*interoperatorv1alpha1.ProviderConfig], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				byConfig(q, e.Object)
			},
		})).
		// An instance that comes, goes or changes its plan may change
		// which entries are held and what a deletion waits for.
		WatchesRawSource(source.Kind(mgr.GetCache(), &osbv1alpha1.SFServiceInstance{}, instanceEvents{
			CreateFunc: func(ctx context.Context, _ event.TypedCreateEvent[*osbv1alpha1.SFServiceInstance], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				r.enqueueCatalog(ctx, q)
			},
			UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[*osbv1alpha1.SFServiceInstance], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				o, n := e.ObjectOld, e.ObjectNew
				if o.Spec.PlanID != n.Spec.PlanID || o.Spec.ServiceID != n.Spec.ServiceID ||
					o.Labels[providerv1alpha1.EnvironmentLabel] != n.Labels[providerv1alpha1.EnvironmentLabel] {
					r.enqueueCatalog(ctx, q)
				}
			},
			DeleteFunc: func(ctx context.Context, _ event.TypedDeleteEvent[*osbv1alpha1.SFServiceInstance], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				r.enqueueCatalog(ctx, q)
			},
		})).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setup catalog controller: %w", err)
	}
	return nil
}

// entryChanged passes the changes of an SFService or SFPlan the catalog
// acts on: creation, deletion and changes of generation (the spec, and the
// start of a deletion), labels, deletion timestamp or of whether it holds
// the finalizer; not the controller's own status writes.
func (r *Reconciler) entryChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return o.GetGeneration() != n.GetGeneration() ||
				!equality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels()) ||
				(o.GetDeletionTimestamp() == nil) != (n.GetDeletionTimestamp() == nil) ||
				controllerutil.ContainsFinalizer(o, r.finalizer) != controllerutil.ContainsFinalizer(n, r.finalizer)
		},
	}
}

// enqueueCatalog enqueues the catalog namespace: an instance that came,
// went or changed its plan may change which entries are held (hold).
func (r *Reconciler) enqueueCatalog(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	cfg := &interoperatorv1alpha1.ProviderConfig{}
	if err := r.platform.GetClient().Get(ctx, client.ObjectKey{Name: r.providerName}, cfg); err != nil {
		return
	}
	q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: cfg.CatalogNamespace()}})
}

// Reconcile validates every SFService and SFPlan of the requested
// namespace, when it is the catalog namespace, writes the status of those
// whose result changed, and keeps or releases those being deleted. In a
// namespace that is not the catalog's (any more), or when the
// ProviderConfig is gone or being deleted, it releases the entries it
// kept: the inter-operator is torn down, nothing of it is left to wait for.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx).WithValues("catalogNamespace", req.Namespace)
	c := r.platform.GetClient()
	cfg := &interoperatorv1alpha1.ProviderConfig{}
	if err := c.Get(ctx, client.ObjectKey{Name: r.providerName}, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			log.V(1).Info("No ProviderConfig; the catalog is not served", "providerConfig", r.providerName)
			return ctrl.Result{}, r.release(ctx, req.Namespace)
		}
		return ctrl.Result{}, fmt.Errorf("get ProviderConfig %s: %w", r.providerName, err)
	}
	if req.Namespace != cfg.CatalogNamespace() || cfg.DeletionTimestamp != nil {
		return ctrl.Result{}, r.release(ctx, req.Namespace)
	}
	services := &osbv1alpha1.SFServiceList{}
	if err := c.List(ctx, services, client.InNamespace(req.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("list SFServices in %s: %w", req.Namespace, err)
	}
	plans := &osbv1alpha1.SFPlanList{}
	if err := c.List(ctx, plans, client.InNamespace(req.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("list SFPlans in %s: %w", req.Namespace, err)
	}
	serviceEntries := make([]metav1.Object, len(services.Items))
	for i := range services.Items {
		serviceEntries[i] = &services.Items[i]
	}
	planEntries := make([]metav1.Object, len(plans.Items))
	for i := range plans.Items {
		planEntries[i] = &plans.Items[i]
	}

	var errs []error
	for i := range services.Items {
		errs = append(errs, r.reconcileService(ctx, &services.Items[i], services.Items, serviceEntries))
	}
	for i := range plans.Items {
		errs = append(errs, r.reconcilePlan(ctx, &plans.Items[i], services.Items, plans.Items, planEntries))
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// reconcileService keeps or releases svc, validates it against the other
// services of its namespace and writes its status when it changed.
func (r *Reconciler) reconcileService(ctx context.Context, svc *osbv1alpha1.SFService, services []osbv1alpha1.SFService, entries []metav1.Object) error {
	id := svc.Spec.ID
	isCurrent := current(svc, id, entries, func(o metav1.Object) string { return o.(*osbv1alpha1.SFService).Spec.ID })
	before := svc.DeepCopy()
	if svc.DeletionTimestamp != nil {
		done, err := r.deletion(ctx, svc, &svc.Status.Conditions, "service", r.users.serviceIndex, id, isCurrent)
		if err == nil && !done {
			err = r.writeStatus(ctx, before, svc, before.Status, svc.Status, svc.Status.Conditions, before.Status.Conditions)
		}
		return err
	}
	holdErr := r.hold(ctx, svc, r.users.serviceIndex, id, isCurrent)
	before = svc.DeepCopy()
	setReady(&svc.Status.Conditions, svc.Generation, ValidateService(svc, services))
	svc.Status.ObservedGeneration = svc.Generation
	return errors.Join(holdErr, r.writeStatus(ctx, before, svc, before.Status, svc.Status, svc.Status.Conditions, before.Status.Conditions))
}

// reconcilePlan keeps or releases plan, validates it against the services
// and plans of its namespace and writes its status when it changed.
func (r *Reconciler) reconcilePlan(ctx context.Context, plan *osbv1alpha1.SFPlan, services []osbv1alpha1.SFService, plans []osbv1alpha1.SFPlan, entries []metav1.Object) error {
	id := plan.Spec.ID
	isCurrent := current(plan, id, entries, func(o metav1.Object) string { return o.(*osbv1alpha1.SFPlan).Spec.ID })
	before := plan.DeepCopy()
	if plan.DeletionTimestamp != nil {
		done, err := r.deletion(ctx, plan, &plan.Status.Conditions, "plan", r.users.planIndex, id, isCurrent)
		if err == nil && !done {
			err = r.writeStatus(ctx, before, plan, before.Status, plan.Status, plan.Status.Conditions, before.Status.Conditions)
		}
		return err
	}
	holdErr := r.hold(ctx, plan, r.users.planIndex, id, isCurrent)
	before = plan.DeepCopy()
	problem := ValidatePlan(plan, services, plans)
	setReady(&plan.Status.Conditions, plan.Generation, problem)
	plan.Status.ObservedGeneration = plan.Generation
	// Only a valid plan has a specHash: one that turns invalid (a
	// second plan with its id appeared) loses the hash of its last
	// valid spec.
	plan.Status.SpecHash = ""
	if problem == nil {
		plan.Status.SpecHash = SpecHash(plan)
	}
	return errors.Join(holdErr, r.writeStatus(ctx, before, plan, before.Status, plan.Status, plan.Status.Conditions, before.Status.Conditions))
}

// hold puts the finalizer on an entry that instances use (it is the
// current entry of its id and instances name that id) and takes it off one
// they do not: an entry nobody uses carries none, so that an
// inter-operator uninstalled before its catalog leaves nothing stuck.
func (r *Reconciler) hold(ctx context.Context, obj client.Object, index, id string, isCurrent bool) error {
	used := false
	if isCurrent {
		users, err := r.users.of(ctx, index, id)
		if err != nil {
			return err
		}
		used = len(users) > 0
	}
	change := controllerutil.RemoveFinalizer
	if used {
		change = controllerutil.AddFinalizer
	}
	return patchFinalizer(ctx, r.platform.GetClient(), obj, r.finalizer, change)
}

// deletion handles an entry being deleted: while it is current (the
// entry the instances with its id use) and such instances exist, it stays,
// with Ready=False, reason DeletionBlocked, naming them in conditions;
// else the finalizer is removed, and done reports that nothing is left to
// write.
func (r *Reconciler) deletion(ctx context.Context, obj client.Object, conditions *[]metav1.Condition, kind, index, id string, isCurrent bool) (done bool, err error) {
	if !controllerutil.ContainsFinalizer(obj, r.finalizer) {
		return true, nil
	}
	var users []string
	if isCurrent {
		if users, err = r.users.of(ctx, index, id); err != nil {
			return false, err
		}
	}
	if len(users) == 0 {
		if err := patchFinalizer(ctx, r.platform.GetClient(), obj, r.finalizer, controllerutil.RemoveFinalizer); err != nil {
			return false, err
		}
		logf.FromContext(ctx).V(1).Info("Catalog entry released", "kind", kindOf(obj), "name", obj.GetName())
		return true, nil
	}
	apimeta.SetStatusCondition(conditions, metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse,
		Reason: string(ReasonDeletionBlocked), Message: blockedMessage(kind, users), ObservedGeneration: obj.GetGeneration()})
	return false, nil
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
