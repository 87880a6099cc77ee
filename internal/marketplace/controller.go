package marketplace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/internal/operator/policy"
)

// FieldOwner is the field manager of every write of the marketplace
// controller.
const FieldOwner = "marketplane-marketplace"

// DefaultControllerName names the controller.
const DefaultControllerName = "marketplace"

// everything is the one request of the controller: each reconcile
// computes the whole set of Offerings, so events of any source only need
// to wake it, and the work queue folds a burst of them into one reconcile.
var everything = reconcile.Request{NamespacedName: client.ObjectKey{Name: "offerings"}}

// Option configures Setup.
type Option func(*options)

type options struct {
	name       string
	controller controller.Options
}

// WithControllerName names the controller (default DefaultControllerName);
// names must be unique per manager, so tests running several use it.
func WithControllerName(name string) Option { return func(o *options) { o.name = name } }

// WithControllerOptions sets controller-runtime's options of the controller.
func WithControllerOptions(c controller.Options) Option {
	return func(o *options) { o.controller = c }
}

// Reconciler keeps the Offerings on the onboarding cluster current with
// the ServiceProviders, SFServices and SFPlans of the platform cluster.
type Reconciler struct {
	platform   client.Reader
	onboarding client.Client
}

var _ reconcile.Reconciler = &Reconciler{}

// Setup registers the marketplace controller with mgr. platform and
// onboarding are the two clusters; each is mgr itself (a Manager is a
// cluster.Cluster) or a cluster the caller added to mgr (mgr.Add), and both
// may be the same API server. A provider built on pkg/providerapp passes
// its manager on the onboarding cluster and Env.Platform. The controller
// watches ServiceProviders (and ClusterProviders and PlatformServices, for
// API group ownership), SFServices and SFPlans on the platform cluster
// and CRDs and Offerings on the onboarding cluster (a deleted or edited
// Offering is put back).
func Setup(mgr ctrl.Manager, platform, onboarding cluster.Cluster, opts ...Option) error {
	if mgr == nil || platform == nil || onboarding == nil {
		return errors.New("setup marketplace controller: a manager, the platform and the onboarding cluster are required")
	}
	o := options{name: DefaultControllerName}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	r := &Reconciler{platform: platform.GetClient(), onboarding: onboarding.GetClient()}
	wake := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{everything}
	})
	// Only a CRD's spec (its schema, names, versions) is described; its
	// status changes are not passed on.
	crdChanged := predicate.GenerationChangedPredicate{}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(o.name).
		WithOptions(o.controller).
		WatchesRawSource(source.Kind(platform.GetCache(), client.Object(&providerv1alpha1.ServiceProvider{}), wake)).
		// The other provider kinds' spec.accessPolicy.apiGroups change
		// which groups the ServiceProviders own.
		WatchesRawSource(source.Kind(platform.GetCache(), client.Object(&providerv1alpha1.ClusterProvider{}), wake)).
		WatchesRawSource(source.Kind(platform.GetCache(), client.Object(&providerv1alpha1.PlatformService{}), wake)).
		WatchesRawSource(source.Kind(platform.GetCache(), client.Object(&osbv1alpha1.SFService{}), wake)).
		WatchesRawSource(source.Kind(platform.GetCache(), client.Object(&osbv1alpha1.SFPlan{}), wake)).
		WatchesRawSource(source.Kind(onboarding.GetCache(), client.Object(&apiextensionsv1.CustomResourceDefinition{}), wake, crdChanged)).
		WatchesRawSource(source.Kind(onboarding.GetCache(), client.Object(&marketplacev1alpha1.Offering{}), wake)).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setup marketplace controller: %w", err)
	}
	return nil
}

// Reconcile computes every wanted Offering from the sources, applies those
// that differ from what the onboarding cluster holds, and deletes the
// Offerings whose source is gone.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	src, err := r.read(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	want := wantedOfferings(src)

	existing := &marketplacev1alpha1.OfferingList{}
	if err := r.onboarding.List(ctx, existing); err != nil {
		return ctrl.Result{}, fmt.Errorf("list Offerings: %w", err)
	}
	have := map[string]*marketplacev1alpha1.Offering{}
	for i := range existing.Items {
		have[existing.Items[i].Name] = &existing.Items[i]
	}

	var errs []error
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := r.ensure(ctx, want[name], have[name]); err != nil {
			// One Offering the API server refuses must not hold up the
			// others; the error requeues the whole set with backoff.
			errs = append(errs, err)
		}
	}
	for name, o := range have {
		if _, ok := want[name]; ok || !ours(o) {
			continue
		}
		if err := r.onboarding.Delete(ctx, o, client.Preconditions{UID: &o.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("delete Offering %s: %w", name, err))
			continue
		}
		log.V(1).Info("Offering deleted: its source is gone", "offering", name)
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// read lists the sources.
func (r *Reconciler) read(ctx context.Context) (sources, error) {
	var src sources
	providers := &providerv1alpha1.ServiceProviderList{}
	if err := r.platform.List(ctx, providers); err != nil {
		return src, fmt.Errorf("list ServiceProviders: %w", err)
	}
	services := &osbv1alpha1.SFServiceList{}
	if err := r.platform.List(ctx, services); err != nil {
		return src, fmt.Errorf("list SFServices: %w", err)
	}
	plans := &osbv1alpha1.SFPlanList{}
	if err := r.platform.List(ctx, plans); err != nil {
		return src, fmt.Errorf("list SFPlans: %w", err)
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := r.onboarding.List(ctx, crds); err != nil {
		return src, fmt.Errorf("list CustomResourceDefinitions: %w", err)
	}
	owners, err := policy.LoadOwnershipOf(ctx, r.platform, providers.Items)
	if err != nil {
		return src, fmt.Errorf("compute API group ownership: %w", err)
	}
	src.providers, src.services, src.plans, src.crds, src.owners = providers.Items, services.Items, plans.Items, crds.Items, owners
	return src, nil
}

// ours reports whether o carries the labels the controller puts on every
// Offering; others (none should exist: tenants cannot write Offerings) are
// left alone.
func ours(o *marketplacev1alpha1.Offering) bool {
	_, ok := o.Labels[marketplacev1alpha1.LabelSourceKind]
	return ok
}

// ensure applies w's spec and labels, then its status, each only when the
// current object (have, nil when absent) differs.
func (r *Reconciler) ensure(ctx context.Context, w wanted, have *marketplacev1alpha1.Offering) error {
	o := w.offering
	if have == nil || !labelsContain(have.Labels, o.Labels) || !sameJSON(have.Spec, o.Spec) {
		if err := r.applySpec(ctx, o); err != nil {
			return err
		}
		logf.FromContext(ctx).V(1).Info("Offering applied", "offering", o.Name, "source", o.Spec.Source)
	} else {
		o.Generation, o.UID = have.Generation, have.UID
		o.Status = have.Status
	}
	cond := w.ready
	cond.ObservedGeneration = o.Generation
	cur := apimeta.FindStatusCondition(o.Status.Conditions, cond.Type)
	if o.Status.ObservedGeneration == o.Generation && cur != nil && cur.Status == cond.Status &&
		cur.Reason == cond.Reason && cur.Message == cond.Message && cur.ObservedGeneration == cond.ObservedGeneration {
		return nil
	}
	cond.LastTransitionTime = metav1.Now()
	if cur != nil && cur.Status == cond.Status {
		cond.LastTransitionTime = cur.LastTransitionTime
	}
	status := &marketplacev1alpha1.Offering{
		TypeMeta:   o.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: o.Name},
		Status: marketplacev1alpha1.OfferingStatus{
			ObservedGeneration: o.Generation,
			Conditions:         []metav1.Condition{cond},
		},
	}
	u, err := toUnstructured(status)
	if err != nil {
		return fmt.Errorf("apply status of Offering %s: %w", o.Name, err)
	}
	unstructured.RemoveNestedField(u.Object, "spec")
	if err := r.onboarding.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply status of Offering %s: %w", o.Name, err)
	}
	return nil
}

// applySpec server-side applies o's labels and spec and reads the result
// (generation, status) back into o.
func (r *Reconciler) applySpec(ctx context.Context, o *marketplacev1alpha1.Offering) error {
	u, err := toUnstructured(o)
	if err != nil {
		return fmt.Errorf("apply Offering %s: %w", o.Name, err)
	}
	unstructured.RemoveNestedField(u.Object, "status")
	if err := r.onboarding.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply Offering %s: %w", o.Name, err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, o); err != nil {
		return fmt.Errorf("read back Offering %s: %w", o.Name, err)
	}
	return nil
}

// toUnstructured converts o for an apply, without the fields a typed object
// always serialises but the controller does not own.
func toUnstructured(o *marketplacev1alpha1.Offering) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(marketplacev1alpha1.GroupVersion.WithKind("Offering"))
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// labelsContain reports whether have holds every label of want.
func labelsContain(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// sameJSON reports whether a and b serialise to the same JSON document,
// key order and formatting of embedded raw JSON aside.
func sameJSON(a, b any) bool {
	var x, y any
	for _, p := range []struct {
		in  any
		out *any
	}{{a, &x}, {b, &y}} {
		raw, err := json.Marshal(p.in)
		if err != nil {
			return false
		}
		if err := json.Unmarshal(raw, p.out); err != nil {
			return false
		}
	}
	return reflect.DeepEqual(x, y)
}
