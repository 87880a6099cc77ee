package provisioner

import (
	"context"
	"errors"
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	interoperatorv1alpha1 "github.com/marketplane/marketplane/api/interoperator/v1alpha1"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/catalog"
	"github.com/marketplane/marketplane/internal/interoperator/clusters"
	"github.com/marketplane/marketplane/internal/interoperator/scheduling"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// Field indexes on the onboarding cluster's cache, registered by
// IndexFields.
const (
	// IndexPlanID indexes SFServiceInstances by spec.planId.
	IndexPlanID = "spec.planId"
	// IndexServiceID indexes SFServiceInstances by spec.serviceId.
	IndexServiceID = "spec.serviceId"
	// IndexClusterID indexes SFServiceInstances by spec.clusterId.
	IndexClusterID = "spec.clusterId"
	// IndexInstanceID indexes SFServiceBindings by spec.instanceId.
	IndexInstanceID = "spec.instanceId"
)

// IndexFields registers the indexes the controllers' watches use with the
// onboarding cluster's indexer. It must be called before the cache starts.
func IndexFields(ctx context.Context, indexer client.FieldIndexer) error {
	return errors.Join(
		indexer.IndexField(ctx, &osbv1alpha1.SFServiceInstance{}, IndexPlanID, func(o client.Object) []string {
			return []string{o.(*osbv1alpha1.SFServiceInstance).Spec.PlanID}
		}),
		indexer.IndexField(ctx, &osbv1alpha1.SFServiceInstance{}, IndexServiceID, func(o client.Object) []string {
			return []string{o.(*osbv1alpha1.SFServiceInstance).Spec.ServiceID}
		}),
		indexer.IndexField(ctx, &osbv1alpha1.SFServiceInstance{}, IndexClusterID, func(o client.Object) []string {
			return []string{o.(*osbv1alpha1.SFServiceInstance).Spec.ClusterID}
		}),
		indexer.IndexField(ctx, &osbv1alpha1.SFServiceBinding{}, IndexInstanceID, func(o client.Object) []string {
			return []string{o.(*osbv1alpha1.SFServiceBinding).Spec.InstanceID}
		}),
	)
}

// keepReleasedStatus reports whether the status of an instance or binding
// whose deletion the provisioner finished is still worth a write. Not when
// the object went with the provisioner's finalizer, nor when only the
// broker's finalizer is left and no error is recorded: that object is the
// broker's tombstone, which reports the deletion succeeded by itself, and
// the write would cost a request per object. Any other holder, and an
// error (an unbind template that failed), still get the status.
func keepReleasedStatus(obj client.Object) bool {
	for _, f := range obj.GetFinalizers() {
		if f != osbv1alpha1.FinalizerBroker {
			return true
		}
	}
	switch o := obj.(type) {
	case *osbv1alpha1.SFServiceInstance:
		return o.Status.Error != ""
	case *osbv1alpha1.SFServiceBinding:
		return o.Status.Error != ""
	}
	return true
}

// Controllers are what SetupWithManager registered.
type Controllers struct {
	// Instances reconciles SFServiceInstances.
	Instances *spruntime.APIReconciler[*osbv1alpha1.SFServiceInstance, *interoperatorv1alpha1.ProviderConfig]
	// Bindings reconciles SFServiceBindings.
	Bindings *spruntime.APIReconciler[*osbv1alpha1.SFServiceBinding, *interoperatorv1alpha1.ProviderConfig]
}

// SetupWithManager builds the instance and binding controllers of the
// inter-operator named providerName on the provider runtime and registers
// them with mgr, the onboarding cluster's manager, to which platform must
// have been added. The field indexes (IndexFields) must be registered.
// instanceOpts and bindingOpts are passed to the runtime; give each
// controller a name (spruntime.WithControllerName) when several
// inter-operators share a process.
//
// Besides the runtime's watches, instances are reconciled when an SFPlan
// appears, its spec changes or it turns valid or invalid (instances of that
// plan: autoUpdateInstances, or instances that waited for the plan), when
// an SFService appears or takes a new id (instances of that service id,
// which may have waited for it), when an SFCluster appears,
// changes or goes (instances on it, and unscheduled ones), and when a
// source an operation in progress waits on changes (the Engine's source
// watcher); bindings when the state or cluster of their instance changes,
// and when a source they wait on changes.
func SetupWithManager(mgr ctrl.Manager, providerName string, platform cluster.Cluster, engine *Engine, instanceOpts, bindingOpts []spruntime.Option) (*Controllers, error) {
	if mgr == nil || platform == nil || engine == nil {
		return nil, errors.New("setup provisioner: manager, platform cluster and engine are required")
	}
	fresh := newFreshClient(mgr.GetClient(), mgr.GetAPIReader(), &osbv1alpha1.SFServiceInstance{}, &osbv1alpha1.SFServiceBinding{})
	// Before the cache starts, GetInformer registers the informers; it
	// does not wait for them.
	if err := fresh.watchCache(context.Background(), mgr.GetCache(), &osbv1alpha1.SFServiceInstance{}, &osbv1alpha1.SFServiceBinding{}); err != nil {
		return nil, fmt.Errorf("setup provisioner: %w", err)
	}
	newConfig := func() *interoperatorv1alpha1.ProviderConfig { return &interoperatorv1alpha1.ProviderConfig{} }
	placer := scheduling.NewPlacer(platform.GetClient(), platform.GetAPIReader(), mgr.GetCache())

	// The instance reconciler adds the runtime's finalizer in the patch
	// that records the instance's cluster: one write for both.
	instances, err := spruntime.NewAPIReconciler(providerName,
		func() *osbv1alpha1.SFServiceInstance { return &osbv1alpha1.SFServiceInstance{} }, newConfig,
		NewInstanceReconciler(engine, fresh), NewInstanceAccess(providerName, platform, engine, placer), platform,
		append([]spruntime.Option{spruntime.WithFinalizerByReconciler(), spruntime.WithReleasedStatus(keepReleasedStatus)}, instanceOpts...)...)
	if err != nil {
		return nil, err
	}
	instanceController, err := setupController(mgr, fresh, instances, "instance")
	if err != nil {
		return nil, err
	}
	onboarding := mgr.GetClient()
	if err := watchCatalog(instanceController, platform, providerName, onboarding); err != nil {
		return nil, err
	}
	var instanceSources source.Source
	if engine.sources != nil {
		instanceSources = engine.sources.InstanceEvents()
	}
	if err := watchEngine(instanceController, "instance", engine.replicaEvents[0], instanceSources); err != nil {
		return nil, err
	}

	bindings, err := spruntime.NewAPIReconciler(providerName,
		func() *osbv1alpha1.SFServiceBinding { return &osbv1alpha1.SFServiceBinding{} }, newConfig,
		NewBindingReconciler(engine, fresh), NewBindingAccess(providerName, platform, engine.registry, fresh), platform,
		append([]spruntime.Option{spruntime.WithReleasedStatus(keepReleasedStatus)}, bindingOpts...)...)
	if err != nil {
		return nil, err
	}
	bindingController, err := setupController(mgr, fresh, bindings, "binding")
	if err != nil {
		return nil, err
	}
	if err := bindingController.Watch(source.Kind(mgr.GetCache(), &osbv1alpha1.SFServiceInstance{},
		handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, inst *osbv1alpha1.SFServiceInstance) []reconcile.Request {
			return bindingsOf(ctx, onboarding, inst)
		}),
		instanceProgressed())); err != nil {
		return nil, fmt.Errorf("setup provisioner: watch instances for bindings: %w", err)
	}
	var bindingSources source.Source
	if engine.sources != nil {
		bindingSources = engine.sources.BindingEvents()
	}
	if err := watchEngine(bindingController, "binding", engine.replicaEvents[1], bindingSources); err != nil {
		return nil, err
	}
	return &Controllers{Instances: instances, Bindings: bindings}, nil
}

// setupController sets r up with mgr, its reads going through fresh, and
// returns the one controller the runtime added for it (what names its
// kind in errors).
func setupController(mgr ctrl.Manager, fresh client.Client, r interface{ SetupWithManager(ctrl.Manager) error }, what string) (controller.Controller, error) {
	hooked := &hookedManager{Manager: mgr, client: fresh}
	if err := r.SetupWithManager(hooked); err != nil {
		return nil, err
	}
	if len(hooked.controllers) != 1 {
		return nil, fmt.Errorf("setup provisioner: the runtime added %d %s controllers, want 1", len(hooked.controllers), what)
	}
	return hooked.controllers[0], nil
}

// watchCatalog has the instance controller c watch the platform's plans,
// services and clusters for the instances they concern.
func watchCatalog(c controller.Controller, platform cluster.Cluster, providerName string, onboarding client.Reader) error {
	if err := errors.Join(
		c.Watch(source.Kind(platform.GetCache(), &osbv1alpha1.SFPlan{},
			instancesOf(platform, providerName, onboarding, func(p *osbv1alpha1.SFPlan) []client.MatchingFields {
				return []client.MatchingFields{{IndexPlanID: p.Spec.ID}}
			}),
			planChanged())),
		// The catalog's kinds come through separate watches, in no
		// order: an instance may have found its plan in the cache, but
		// not yet the service created before it.
		c.Watch(source.Kind(platform.GetCache(), &osbv1alpha1.SFService{},
			instancesOf(platform, providerName, onboarding, func(svc *osbv1alpha1.SFService) []client.MatchingFields {
				return []client.MatchingFields{{IndexServiceID: svc.Spec.ID}}
			}),
			serviceAppeared())),
		c.Watch(source.Kind(platform.GetCache(), &resourcev1alpha1.SFCluster{},
			instancesOf(platform, providerName, onboarding, func(c *resourcev1alpha1.SFCluster) []client.MatchingFields {
				return []client.MatchingFields{{IndexClusterID: c.Name}, {IndexClusterID: ""}}
			}),
			clusterChanged())),
	); err != nil {
		return fmt.Errorf("setup provisioner: watch the catalog: %w", err)
	}
	return nil
}

// watchEngine has c watch the Engine's events for its kind (what): the
// replicas' and the sources', each when the Engine has it.
func watchEngine(c controller.Controller, what string, replicas, sources source.Source) error {
	if replicas != nil {
		if err := c.Watch(replicas); err != nil {
			return fmt.Errorf("setup provisioner: watch the %s replicas: %w", what, err)
		}
	}
	if sources != nil {
		if err := c.Watch(sources); err != nil {
			return fmt.Errorf("setup provisioner: watch the sources of %ss: %w", what, err)
		}
	}
	return nil
}

// inCatalog reports whether obj lives in the catalog namespace of the
// inter-operator's ProviderConfig: plans and clusters elsewhere are not
// its own.
func inCatalog(ctx context.Context, platform cluster.Cluster, providerName string, obj client.Object) bool {
	cfg, err := providerConfig(ctx, platform, providerName)
	return err == nil && obj.GetNamespace() == cfg.CatalogNamespace()
}

// instancesOf maps an event of an object of the platform cluster (an
// SFPlan, SFService or SFCluster) to the instances that selects names:
// those matching any of its field sets. Objects outside the
// inter-operator's catalog namespace concern none.
func instancesOf[O client.Object](platform cluster.Cluster, providerName string, onboarding client.Reader, selects func(O) []client.MatchingFields) handler.TypedEventHandler[O, reconcile.Request] {
	return handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, obj O) []reconcile.Request {
		if !inCatalog(ctx, platform, providerName, obj) {
			return nil
		}
		var reqs []reconcile.Request
		for _, fields := range selects(obj) {
			reqs = append(reqs, instancesMatching(ctx, onboarding, fields)...)
		}
		return reqs
	})
}

// instancesMatching returns requests for the instances that match fields.
func instancesMatching(ctx context.Context, c client.Reader, fields client.MatchingFields) []reconcile.Request {
	list := &osbv1alpha1.SFServiceInstanceList{}
	if err := c.List(ctx, list, fields); err != nil {
		logf.FromContext(ctx).Error(err, "Cannot list the instances to reconcile", "fields", fields)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// bindingsOf returns requests for the bindings of inst.
func bindingsOf(ctx context.Context, c client.Reader, inst *osbv1alpha1.SFServiceInstance) []reconcile.Request {
	seen := map[types.NamespacedName]bool{}
	var reqs []reconcile.Request
	for _, id := range []string{inst.Name, inst.Spec.InstanceID} {
		if id == "" {
			continue
		}
		list := &osbv1alpha1.SFServiceBindingList{}
		if err := c.List(ctx, list, client.InNamespace(inst.Namespace), client.MatchingFields{IndexInstanceID: id}); err != nil {
			logf.FromContext(ctx).Error(err, "Cannot list the bindings of an instance", "instance", inst.Name)
			return nil
		}
		for i := range list.Items {
			key := client.ObjectKeyFromObject(&list.Items[i])
			if !seen[key] {
				seen[key] = true
				reqs = append(reqs, reconcile.Request{NamespacedName: key})
			}
		}
	}
	return reqs
}

// specChanged passes creations and spec changes (new generations).
func specChanged[O client.Object]() predicate.TypedPredicate[O] {
	return predicate.TypedFuncs[O]{
		CreateFunc:  func(event.TypedCreateEvent[O]) bool { return true },
		DeleteFunc:  func(event.TypedDeleteEvent[O]) bool { return false },
		GenericFunc: func(event.TypedGenericEvent[O]) bool { return false },
		UpdateFunc: func(e event.TypedUpdateEvent[O]) bool {
			return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration()
		},
	}
}

// serviceAppeared passes an SFService that appears or takes a new id: what
// an instance that did not find its service waits for. Other changes of a
// service do not concern its instances, and would wake all of them.
func serviceAppeared() predicate.TypedPredicate[*osbv1alpha1.SFService] {
	return predicate.TypedFuncs[*osbv1alpha1.SFService]{
		CreateFunc:  func(event.TypedCreateEvent[*osbv1alpha1.SFService]) bool { return true },
		DeleteFunc:  func(event.TypedDeleteEvent[*osbv1alpha1.SFService]) bool { return false },
		GenericFunc: func(event.TypedGenericEvent[*osbv1alpha1.SFService]) bool { return false },
		UpdateFunc: func(e event.TypedUpdateEvent[*osbv1alpha1.SFService]) bool {
			return e.ObjectOld.Spec.ID != e.ObjectNew.Spec.ID
		},
	}
}

// planChanged passes an SFPlan that appears, changes its spec, or turns
// valid or invalid: the catalog controller validates a plan after it
// appears (its Ready condition, a status change), and an instance that
// found it invalid waits for that.
func planChanged() predicate.TypedPredicate[*osbv1alpha1.SFPlan] {
	spec := specChanged[*osbv1alpha1.SFPlan]()
	return predicate.TypedFuncs[*osbv1alpha1.SFPlan]{
		CreateFunc:  spec.Create,
		DeleteFunc:  spec.Delete,
		GenericFunc: spec.Generic,
		UpdateFunc: func(e event.TypedUpdateEvent[*osbv1alpha1.SFPlan]) bool {
			return spec.Update(e) || (invalidVerdict(e.ObjectOld) == nil) != (invalidVerdict(e.ObjectNew) == nil)
		},
	}
}

// invalidVerdict returns the catalog controller's Ready condition of plan
// when it found the plan's current generation invalid, nil otherwise: what
// fails or holds the instances of the plan (catalogEntries). A plan whose
// deletion waits for its instances (DeletionBlocked) is no longer served
// to new requests but still serves those instances.
func invalidVerdict(plan *osbv1alpha1.SFPlan) *metav1.Condition {
	c := apimeta.FindStatusCondition(plan.Status.Conditions, catalog.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.ObservedGeneration != plan.Generation ||
		c.Reason == string(catalog.ReasonDeletionBlocked) {
		return nil
	}
	return c
}

// clusterChanged passes what may let an instance waiting for a cluster go
// on, or concern the instances on it: an SFCluster that appears, changes
// its spec, starts being deleted (deletionTimestamp set; with a finalizer
// that is all a deletion shows at first) or is gone. A deletion wakes the
// unscheduled instances, which may now find a single cluster left.
func clusterChanged() predicate.TypedPredicate[*resourcev1alpha1.SFCluster] {
	return predicate.TypedFuncs[*resourcev1alpha1.SFCluster]{
		CreateFunc:  func(event.TypedCreateEvent[*resourcev1alpha1.SFCluster]) bool { return true },
		DeleteFunc:  func(event.TypedDeleteEvent[*resourcev1alpha1.SFCluster]) bool { return true },
		GenericFunc: func(event.TypedGenericEvent[*resourcev1alpha1.SFCluster]) bool { return false },
		UpdateFunc: func(e event.TypedUpdateEvent[*resourcev1alpha1.SFCluster]) bool {
			return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
				(e.ObjectOld.GetDeletionTimestamp() == nil) != (e.ObjectNew.GetDeletionTimestamp() == nil) ||
				// The components the cluster needs got installed (or
				// broke), or why they keep instances away changed (not
				// installed yet, then InstallFailed): instances waiting
				// for it may go on, and those that still wait say why.
				clusters.ComponentsPending(e.ObjectOld) != clusters.ComponentsPending(e.ObjectNew) ||
				// The cluster became reachable again (or stopped being):
				// instances that retry with backoff, and unscheduled ones
				// the scheduler skipped it for, go on at once.
				clusterReady(e.ObjectOld) != clusterReady(e.ObjectNew)
		},
	}
}

// clusterReady returns the status of an SFCluster's Ready condition, or ""
// before it was checked.
func clusterReady(c *resourcev1alpha1.SFCluster) metav1.ConditionStatus {
	if r := apimeta.FindStatusCondition(c.Status.Conditions, resourcev1alpha1.SFClusterConditionReady); r != nil {
		return r.Status
	}
	return ""
}

// instanceProgressed passes changes of an instance's state or cluster:
// what a binding may be waiting for.
func instanceProgressed() predicate.TypedPredicate[*osbv1alpha1.SFServiceInstance] {
	return predicate.TypedFuncs[*osbv1alpha1.SFServiceInstance]{
		CreateFunc:  func(event.TypedCreateEvent[*osbv1alpha1.SFServiceInstance]) bool { return false },
		DeleteFunc:  func(event.TypedDeleteEvent[*osbv1alpha1.SFServiceInstance]) bool { return true },
		GenericFunc: func(event.TypedGenericEvent[*osbv1alpha1.SFServiceInstance]) bool { return false },
		UpdateFunc: func(e event.TypedUpdateEvent[*osbv1alpha1.SFServiceInstance]) bool {
			return e.ObjectOld.Status.State != e.ObjectNew.Status.State || e.ObjectOld.Spec.ClusterID != e.ObjectNew.Spec.ClusterID
		},
	}
}
