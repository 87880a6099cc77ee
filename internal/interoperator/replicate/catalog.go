package replicate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/clusters"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// ConditionCatalogReplicated is the condition of an SFCluster in mode
// replicate that the catalog mirror writes: whether every SFService and
// SFPlan of the master's catalog namespace is on the sister as it is on
// the master. The mirror writes only this condition.
const ConditionCatalogReplicated = "CatalogReplicated"

// Reasons of the CatalogReplicated condition, besides the replicator's
// ClusterUnreachable and ReplicaConflict and the cluster registry's
// (InvalidKubeconfig).
const (
	// ReasonCatalogReplicated: the sister holds the master's catalog.
	ReasonCatalogReplicated = "Replicated"
	// ReasonCopyInUse: an entry removed from the master's catalog stays on
	// the sister while instances there use it.
	ReasonCopyInUse = "CopyInUse"
	// ReasonCopyPending: a copy is being deleted on the sister; the entry
	// is copied again once it is gone.
	ReasonCopyPending = "CopyPending"
	// ReasonWaitingForReplicas: the SFCluster is deleted or left mode
	// replicate; the copies are removed once this master's replicas are
	// gone from the sister.
	ReasonWaitingForReplicas = "WaitingForReplicas"
	// ReasonCopyFailed: the sister refused a write for another reason
	// than a conflict.
	ReasonCopyFailed = "CopyFailed"
)

// FinalizerCatalogCopies is held by an SFCluster in mode replicate until
// the catalog copies this master made on the sister are removed, after
// the SFCluster was deleted or left mode replicate.
const FinalizerCatalogCopies = "interoperator.marketplane.io/catalog-copies"

// DefaultCatalogMirrorName is the name of the catalog mirror controller.
const DefaultCatalogMirrorName = "sfcatalogmirror"

// Defaults of the catalog mirror's waits.
const (
	// DefaultCatalogResync is how often a sister's catalog is compared
	// with the master's without an event: changes made on the sister
	// (a copy deleted by hand) are not watched.
	DefaultCatalogResync = 10 * time.Minute
	// DefaultCatalogPendingWait is how often a sister whose copies wait
	// (in use, being deleted, replicas left) is looked at again, besides
	// the deletions of the originals, which bring it back at once.
	DefaultCatalogPendingWait = 30 * time.Second
)

// conditionListed bounds how many entries a condition message names.
const conditionListed = 5

// CatalogMirror is Service Fabrik's Service Replicator: for every SFCluster
// in mode replicate of the catalog namespace it keeps, on the sister, a
// copy of every SFService and SFPlan of that namespace, under the same
// names and ownership rules as the replicator's copies (identity.go): an
// entry that is not this master's is never updated, adopted or deleted.
// Copies are created when a sister joins, updated when an entry changes,
// deleted when the entry leaves the master's catalog and no instance on
// the sister uses it, and removed when the SFCluster is deleted or leaves
// mode replicate, once this master's replicas are gone from the sister
// (the SFCluster keeps FinalizerCatalogCopies until then).
type CatalogMirror struct {
	providerName string
	platform     cluster.Cluster
	registry     *clusters.Registry
	replicator   *Replicator
	recorder     events.EventRecorder
	name         string
	options      controller.Options
	backoff      [2]time.Duration
	resync       time.Duration
	pendingWait  time.Duration
}

var _ reconcile.Reconciler = &CatalogMirror{}

// CatalogOption configures a CatalogMirror.
type CatalogOption func(*CatalogMirror)

// WithCatalogControllerName sets the controller's name
// (DefaultCatalogMirrorName).
func WithCatalogControllerName(name string) CatalogOption {
	return func(r *CatalogMirror) {
		if name != "" {
			r.name = name
		}
	}
}

// WithCatalogControllerOptions sets the controller's options; a rate
// limiter among them replaces WithCatalogBackoff's.
func WithCatalogControllerOptions(o controller.Options) CatalogOption {
	return func(r *CatalogMirror) { r.options = o }
}

// WithCatalogBackoff sets the backoff of the retries after an error, such
// as an unreachable sister.
func WithCatalogBackoff(base, maxWait time.Duration) CatalogOption {
	return func(r *CatalogMirror) {
		if base > 0 && maxWait >= base {
			r.backoff = [2]time.Duration{base, maxWait}
		}
	}
}

// WithCatalogWaits sets how often a sister is compared without an event
// (DefaultCatalogResync) and looked at again while copies wait
// (DefaultCatalogPendingWait).
func WithCatalogWaits(resync, pending time.Duration) CatalogOption {
	return func(r *CatalogMirror) {
		if resync > 0 {
			r.resync = resync
		}
		if pending > 0 {
			r.pendingWait = pending
		}
	}
}

// NewCatalogMirror returns the catalog mirror of the inter-operator
// providerName, whose SFClusters, SFServices and SFPlans are on platform
// and whose sisters registry hands out. It installs the CRDs a sister
// lacks as replicator does.
func NewCatalogMirror(replicator *Replicator, providerName string, platform cluster.Cluster, registry *clusters.Registry, opts ...CatalogOption) *CatalogMirror {
	r := &CatalogMirror{
		providerName: providerName,
		platform:     platform,
		registry:     registry,
		replicator:   replicator,
		name:         DefaultCatalogMirrorName,
		backoff:      [2]time.Duration{time.Second, 2 * time.Minute},
		resync:       DefaultCatalogResync,
		pendingWait:  DefaultCatalogPendingWait,
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// SetupWithManager registers the controller with mgr: it watches the
// SFClusters, SFServices and SFPlans on the platform cluster and the
// deletions of SFServiceInstances on the onboarding cluster (mgr's), which
// may free a copy or a leaving sister.
func (r *CatalogMirror) SetupWithManager(mgr ctrl.Manager) error {
	if mgr == nil || r.platform == nil || r.registry == nil || r.replicator == nil {
		return errors.New("setup catalog mirror: manager, platform cluster, registry and replicator are required")
	}
	r.recorder = r.platform.GetEventRecorder(r.name)
	opts := r.options
	if opts.RateLimiter == nil {
		opts.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](r.backoff[0], r.backoff[1])
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(r.name).
		WithOptions(opts).
		WatchesRawSource(source.Kind(r.platform.GetCache(), &resourcev1alpha1.SFCluster{},
			&handler.TypedEnqueueRequestForObject[*resourcev1alpha1.SFCluster]{}, sisterChanged())).
		WatchesRawSource(source.Kind(r.platform.GetCache(), &osbv1alpha1.SFService{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, s *osbv1alpha1.SFService) []reconcile.Request {
				return r.sistersIn(ctx, s.Namespace)
			}), entryChanged[*osbv1alpha1.SFService]())).
		WatchesRawSource(source.Kind(r.platform.GetCache(), &osbv1alpha1.SFPlan{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, p *osbv1alpha1.SFPlan) []reconcile.Request {
				return r.sistersIn(ctx, p.Namespace)
			}), entryChanged[*osbv1alpha1.SFPlan]())).
		WatchesRawSource(source.Kind(mgr.GetCache(), &osbv1alpha1.SFServiceInstance{},
			handler.TypedFuncs[*osbv1alpha1.SFServiceInstance, reconcile.Request]{
				DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[*osbv1alpha1.SFServiceInstance], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
					if req, ok := r.waitingSister(ctx, e.Object.Spec.ClusterID); ok {
						q.Add(req)
					}
				},
			})).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setup catalog mirror: %w", err)
	}
	return nil
}

// sisterChanged passes the events of an SFCluster that change what the
// mirror does: creation, deletion, a new spec (mode, kubeconfig), the
// deletion timestamp or the finalizers; the Ready condition turning True
// (the sister answers again: catch up at once); and the loss of the
// CatalogReplicated condition (a status write that did not know it),
// which is written again.
func sisterChanged() predicate.TypedPredicate[*resourcev1alpha1.SFCluster] {
	return predicate.TypedFuncs[*resourcev1alpha1.SFCluster]{
		UpdateFunc: func(e event.TypedUpdateEvent[*resourcev1alpha1.SFCluster]) bool {
			o, n := e.ObjectOld, e.ObjectNew
			oldReady := apimeta.IsStatusConditionTrue(o.Status.Conditions, resourcev1alpha1.SFClusterConditionReady)
			newReady := apimeta.IsStatusConditionTrue(n.Status.Conditions, resourcev1alpha1.SFClusterConditionReady)
			lost := apimeta.FindStatusCondition(o.Status.Conditions, ConditionCatalogReplicated) != nil &&
				apimeta.FindStatusCondition(n.Status.Conditions, ConditionCatalogReplicated) == nil
			return o.Generation != n.Generation ||
				(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
				!slices.Equal(o.Finalizers, n.Finalizers) ||
				(!oldReady && newReady) || lost
		},
	}
}

// entryChanged passes the creation and deletion of a catalog entry and the
// changes of what is copied: its spec and labels.
func entryChanged[T client.Object]() predicate.TypedPredicate[T] {
	return predicate.TypedFuncs[T]{
		UpdateFunc: func(e event.TypedUpdateEvent[T]) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return o.GetGeneration() != n.GetGeneration() || !apiequality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels())
		},
	}
}

// catalogNamespace returns the catalog namespace of the inter-operator.
func (r *CatalogMirror) catalogNamespace(ctx context.Context) (string, bool) {
	cfg := &interoperatorv1alpha1.ProviderConfig{}
	if err := r.platform.GetClient().Get(ctx, client.ObjectKey{Name: r.providerName}, cfg); err != nil {
		return "", false
	}
	return cfg.CatalogNamespace(), true
}

// sistersIn returns the SFClusters whose copies a change of the catalog
// namespace ns touches: those in mode replicate, and those whose copies
// are still to be removed.
func (r *CatalogMirror) sistersIn(ctx context.Context, ns string) []reconcile.Request {
	if catalog, ok := r.catalogNamespace(ctx); !ok || catalog != ns {
		return nil
	}
	list := &resourcev1alpha1.SFClusterList{}
	if err := r.platform.GetClient().List(ctx, list, client.InNamespace(ns)); err != nil {
		logf.FromContext(ctx).Error(err, "Cannot list the SFClusters for a catalog change", "namespace", ns)
		return nil
	}
	var out []reconcile.Request
	for _, sfc := range list.Items {
		if sfc.Spec.ProvisioningMode == resourcev1alpha1.ProvisioningReplicate || controllerutil.ContainsFinalizer(&sfc, FinalizerCatalogCopies) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: sfc.Namespace, Name: sfc.Name}})
		}
	}
	return out
}

// waitingSister returns the SFCluster clusterID when its copies wait for
// instances to go (CopyInUse, WaitingForReplicas): the deletion of an
// original placed there may free them.
func (r *CatalogMirror) waitingSister(ctx context.Context, clusterID string) (reconcile.Request, bool) {
	catalog, ok := r.catalogNamespace(ctx)
	if !ok || clusterID == "" {
		return reconcile.Request{}, false
	}
	key := types.NamespacedName{Namespace: catalog, Name: clusterID}
	sfc := &resourcev1alpha1.SFCluster{}
	if err := r.platform.GetClient().Get(ctx, key, sfc); err != nil {
		return reconcile.Request{}, false
	}
	c := apimeta.FindStatusCondition(sfc.Status.Conditions, ConditionCatalogReplicated)
	if c == nil || (c.Reason != ReasonCopyInUse && c.Reason != ReasonWaitingForReplicas) {
		return reconcile.Request{}, false
	}
	return reconcile.Request{NamespacedName: key}, true
}

// outcome is what one pass over a sister found: the condition to write,
// when to look again, an error to retry with backoff, and, when leaving,
// whether the copies are gone.
type outcome struct {
	cond   metav1.Condition
	result ctrl.Result
	err    error
	done   bool
}

// Reconcile keeps the catalog of one SFCluster's sister, or removes it.
func (r *CatalogMirror) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := r.platform.GetClient()
	cfg := &interoperatorv1alpha1.ProviderConfig{}
	if err := c.Get(ctx, client.ObjectKey{Name: r.providerName}, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get ProviderConfig %s: %w", r.providerName, err)
	}
	if req.Namespace != cfg.CatalogNamespace() {
		return ctrl.Result{}, nil
	}
	sfc := &resourcev1alpha1.SFCluster{}
	if err := c.Get(ctx, req.NamespacedName, sfc); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get SFCluster %s: %w", req.NamespacedName, err)
	}
	mirrored := sfc.DeletionTimestamp == nil && sfc.Spec.ProvisioningMode == resourcev1alpha1.ProvisioningReplicate
	if !mirrored && !controllerutil.ContainsFinalizer(sfc, FinalizerCatalogCopies) {
		// Never a sister of this mirror, or its copies are removed.
		return ctrl.Result{}, r.writeCondition(ctx, sfc, nil)
	}
	m, err := masterOf(cfg)
	if err != nil {
		return ctrl.Result{}, err
	}
	if mirrored {
		if err := r.patchFinalizer(ctx, sfc, controllerutil.AddFinalizer); err != nil {
			return ctrl.Result{}, err
		}
	}
	out := r.pass(ctx, cfg.CatalogNamespace(), m, sfc, mirrored)
	if out.done {
		if sfc.DeletionTimestamp == nil {
			if err := r.writeCondition(ctx, sfc, nil); err != nil {
				return r.conditionNotWritten(ctx, err, ctrl.Result{}, nil)
			}
		}
		if err := r.patchFinalizer(ctx, sfc, controllerutil.RemoveFinalizer); err != nil {
			return ctrl.Result{}, err
		}
		r.recorder.Eventf(sfc, nil, corev1.EventTypeNormal, "CatalogCopiesRemoved", "Offboard", "the catalog copies of this inter-operator are removed from the cluster")
		logf.FromContext(ctx).Info("Removed the catalog copies from a sister", "sfcluster", sfc.Name)
		return ctrl.Result{}, nil
	}
	if err := r.writeCondition(ctx, sfc, &out.cond); err != nil {
		return r.conditionNotWritten(ctx, err, out.result, out.err)
	}
	return out.result, out.err
}

// conditionNotWritten returns the result of a reconcile whose condition
// write failed: a conflict (the status controller wrote the SFCluster
// since it was read) is tried again soon, without an error; the pass's
// own error comes first.
func (r *CatalogMirror) conditionNotWritten(ctx context.Context, err error, result ctrl.Result, passErr error) (ctrl.Result, error) {
	if passErr != nil {
		return result, passErr
	}
	if apierrors.IsConflict(err) {
		logf.FromContext(ctx).V(1).Info("The SFCluster changed since it was read; writing the condition again")
		return ctrl.Result{RequeueAfter: r.backoff[0]}, nil
	}
	return result, err
}

// pass mirrors the catalog to the sister of sfc (mirrored), or removes
// the copies from it.
func (r *CatalogMirror) pass(ctx context.Context, catalog string, m master, sfc *resourcev1alpha1.SFCluster, mirrored bool) outcome {
	services, plans := &osbv1alpha1.SFServiceList{}, &osbv1alpha1.SFPlanList{}
	for _, l := range []client.ObjectList{services, plans} {
		if err := r.platform.GetClient().List(ctx, l, client.InNamespace(catalog)); err != nil {
			return outcome{cond: falseCondition(ReasonCopyFailed, "cannot read the catalog"), err: fmt.Errorf("list the catalog %s: %w", catalog, err)}
		}
	}
	t, err := r.registry.Target(ctx, sfc.Namespace, sfc.Name)
	if err != nil {
		return r.failed(sfc.Name, err)
	}
	c := t.Client()
	if !mirrored {
		return r.removeCopies(ctx, c, catalog, m, sfc.Name, masterUIDs(services, plans))
	}
	return r.mirror(ctx, c, catalog, m, sfc.Name, services, plans)
}

// masterUIDs returns the UIDs of the master's catalog entries.
func masterUIDs(services *osbv1alpha1.SFServiceList, plans *osbv1alpha1.SFPlanList) map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, s := range services.Items {
		out[s.UID] = true
	}
	for _, p := range plans.Items {
		out[p.UID] = true
	}
	return out
}

// failed returns the outcome of an error: a configuration error of the
// cluster (InvalidKubeconfig) waits for a change of the SFCluster, which
// the status controller's Ready condition brings; any other is retried
// with backoff, an unreachable sister saying so.
func (r *CatalogMirror) failed(cluster string, err error) outcome {
	if cerr, ok := clusters.AsError(err); ok {
		return outcome{cond: falseCondition(cerr.Reason, cerr.Message), result: ctrl.Result{RequeueAfter: r.resync}}
	}
	if clusters.Unreachable(err) {
		return outcome{cond: falseCondition(ReasonClusterUnreachable, fmt.Sprintf("The SFCluster %s is unreachable; retrying: %v", cluster, err)), err: err}
	}
	return outcome{cond: falseCondition(ReasonCopyFailed, err.Error()), err: err}
}

// mirror brings the catalog namespace on the sister c up to the master's:
// services before plans, then removes the copies of entries the master no
// longer has.
func (r *CatalogMirror) mirror(ctx context.Context, c client.Client, catalog string, m master, cluster string, services *osbv1alpha1.SFServiceList, plans *osbv1alpha1.SFPlanList) outcome {
	if err := r.replicator.installCRDs(ctx, c); err != nil {
		return r.failed(cluster, err)
	}
	if err := ensureCatalogNamespace(ctx, c, catalog); err != nil {
		return r.failed(cluster, err)
	}
	onSister, err := listCatalog(ctx, c, catalog)
	if err != nil {
		return r.failed(cluster, err)
	}
	var conflicts, pending []string
	copyEntry := func(e catalogCopy, existing client.Object) error {
		found := existing != nil
		if found {
			copyInto(existing, e.obj)
		}
		err := m.writeCopy(ctx, c, e, found)
		switch uerr, ok := spruntime.AsInvalidUserInput(err); {
		case err == nil:
			return nil
		case ok:
			conflicts = append(conflicts, uerr.Message)
			return nil
		case errors.Is(err, errCopyBeingDeleted):
			pending = append(pending, err.Error())
			return nil
		}
		return err
	}
	wantServices, wantPlans := map[string]bool{}, map[string]bool{}
	for i := range services.Items {
		svc := &services.Items[i]
		wantServices[svc.Name] = true
		if err := copyEntry(serviceCopy(cluster, catalog, svc), onSister.service(svc.Name)); err != nil {
			return r.failed(cluster, err)
		}
	}
	for i := range plans.Items {
		plan := &plans.Items[i]
		wantPlans[plan.Name] = true
		if err := copyEntry(planCopy(cluster, catalog, plan), onSister.plan(plan.Name)); err != nil {
			return r.failed(cluster, err)
		}
	}
	inUse, err := m.deleteCopies(ctx, c, onSister, masterUIDs(services, plans), func(kind, name string) bool {
		if kind == "SFService" {
			return wantServices[name]
		}
		return wantPlans[name]
	})
	if err != nil {
		return r.failed(cluster, err)
	}
	switch {
	case len(conflicts) > 0:
		return outcome{cond: falseCondition(ReasonReplicaConflict, listed(conflicts)), result: ctrl.Result{RequeueAfter: r.resync}}
	case len(pending) > 0:
		return outcome{cond: falseCondition(ReasonCopyPending, listed(pending)), result: ctrl.Result{RequeueAfter: r.pendingWait}}
	case len(inUse) > 0:
		return outcome{cond: falseCondition(ReasonCopyInUse, "removed from the catalog, kept on the sister while instances there use them: "+listed(inUse)), result: ctrl.Result{RequeueAfter: r.pendingWait}}
	}
	return outcome{
		cond: metav1.Condition{Type: ConditionCatalogReplicated, Status: metav1.ConditionTrue, Reason: ReasonCatalogReplicated,
			Message: fmt.Sprintf("%d SFServices and %d SFPlans of namespace %s are on the cluster", len(services.Items), len(plans.Items), catalog)},
		result: ctrl.Result{RequeueAfter: r.resync},
	}
}

// removeCopies removes this master's copies from the sister c of an
// SFCluster that is deleted or left mode replicate, once no replica of
// this master is left there; copies that other instances on the sister
// still use are kept, and said so.
func (r *CatalogMirror) removeCopies(ctx context.Context, c client.Client, catalog string, m master, cluster string, own map[types.UID]bool) outcome {
	selector := client.MatchingLabels{LabelReplica: "true", LabelMaster: string(m)}
	var left []string
	for _, l := range []client.ObjectList{&osbv1alpha1.SFServiceInstanceList{}, &osbv1alpha1.SFServiceBindingList{}} {
		if err := c.List(ctx, l, selector); err != nil {
			if apimeta.IsNoMatchError(err) {
				continue
			}
			return r.failed(cluster, fmt.Errorf("list the replicas: %w", err))
		}
		_ = apimeta.EachListItem(l, func(o runtime.Object) error {
			if obj, ok := o.(client.Object); ok {
				left = append(left, obj.GetNamespace()+"/"+obj.GetName())
			}
			return nil
		})
	}
	if len(left) > 0 {
		return outcome{cond: falseCondition(ReasonWaitingForReplicas, "the catalog copies are removed once the replicas of this inter-operator are gone from the cluster: "+listed(left)),
			result: ctrl.Result{RequeueAfter: r.pendingWait}}
	}
	onSister, err := listCatalog(ctx, c, catalog)
	if err != nil {
		if apimeta.IsNoMatchError(err) {
			return outcome{done: true}
		}
		return r.failed(cluster, err)
	}
	inUse, err := m.deleteCopies(ctx, c, onSister, own, func(string, string) bool { return false })
	if err != nil {
		return r.failed(cluster, err)
	}
	if len(inUse) > 0 {
		return outcome{cond: falseCondition(ReasonCopyInUse, "kept on the cluster while instances there use them: "+listed(inUse)), result: ctrl.Result{RequeueAfter: r.pendingWait}}
	}
	for _, e := range onSister.entries() {
		if m.catalogEntryOf(e.GetLabels()) == mine && !own[e.GetUID()] {
			// Deleted, and held by a finalizer on the sister.
			return outcome{cond: falseCondition(ReasonCopyPending, "waiting for the catalog copies to be deleted on the cluster"), result: ctrl.Result{RequeueAfter: r.pendingWait}}
		}
	}
	return outcome{done: true}
}

// sisterCatalog is the catalog namespace of a sister.
type sisterCatalog struct {
	services []osbv1alpha1.SFService
	plans    []osbv1alpha1.SFPlan
}

// listCatalog reads the catalog namespace on the sister c.
func listCatalog(ctx context.Context, c client.Client, catalog string) (*sisterCatalog, error) {
	services, plans := &osbv1alpha1.SFServiceList{}, &osbv1alpha1.SFPlanList{}
	for _, l := range []client.ObjectList{services, plans} {
		if err := c.List(ctx, l, client.InNamespace(catalog)); err != nil {
			return nil, fmt.Errorf("list the catalog %s on the sister cluster: %w", catalog, err)
		}
	}
	return &sisterCatalog{services: services.Items, plans: plans.Items}, nil
}

// service returns the SFService name on the sister, or nil.
func (s *sisterCatalog) service(name string) client.Object {
	for i := range s.services {
		if s.services[i].Name == name {
			return &s.services[i]
		}
	}
	return nil
}

// plan returns the SFPlan name on the sister, or nil.
func (s *sisterCatalog) plan(name string) client.Object {
	for i := range s.plans {
		if s.plans[i].Name == name {
			return &s.plans[i]
		}
	}
	return nil
}

// entries returns the plans, then the services: the order of deletion.
func (s *sisterCatalog) entries() []client.Object {
	var out []client.Object
	for i := range s.plans {
		out = append(out, &s.plans[i])
	}
	for i := range s.services {
		out = append(out, &s.services[i])
	}
	return out
}

// deleteCopies deletes this master's copies on the sister c that keep
// does not name, plans before services, and returns those it keeps
// because an instance on the sister (anyone's: its deprovision needs
// them) uses them, or, for a service, a plan that stays. An entry whose
// UID is one of the master's own (the sister is the master's platform
// cluster) is never deleted.
func (m master) deleteCopies(ctx context.Context, c client.Client, s *sisterCatalog, masterUIDs map[types.UID]bool, keep func(kind, name string) bool) ([]string, error) {
	plans, services := m.unwantedCopies(s, masterUIDs, keep)
	if len(plans)+len(services) == 0 {
		return nil, nil
	}
	usedPlans, usedServices, err := instanceUse(ctx, c)
	if err != nil {
		return nil, err
	}
	var kept []string
	deleted := map[string]bool{}
	for _, plan := range plans {
		if n := usedPlans[plan.Spec.ID]; n > 0 {
			kept = append(kept, fmt.Sprintf("SFPlan %s (%d instances)", plan.Name, n))
			continue
		}
		if err := deleteCopy(ctx, c, plan); err != nil {
			return nil, err
		}
		deleted[plan.Name] = true
	}
	for _, svc := range services {
		n := usedServices[svc.Spec.ID]
		for _, p := range s.plans {
			if p.Spec.ServiceID == svc.Spec.ID && p.DeletionTimestamp == nil && !deleted[p.Name] {
				n++
			}
		}
		if n > 0 {
			kept = append(kept, fmt.Sprintf("SFService %s (%d instances or plans)", svc.Name, n))
			continue
		}
		if err := deleteCopy(ctx, c, svc); err != nil {
			return nil, err
		}
	}
	return kept, nil
}

// unwantedCopies returns this master's copies on the sister that keep
// does not name, are not the master's own entries (masterUIDs) and are
// not being deleted.
func (m master) unwantedCopies(s *sisterCatalog, masterUIDs map[types.UID]bool, keep func(kind, name string) bool) ([]*osbv1alpha1.SFPlan, []*osbv1alpha1.SFService) {
	var plans []*osbv1alpha1.SFPlan
	var services []*osbv1alpha1.SFService
	for _, e := range s.entries() {
		if m.catalogEntryOf(e.GetLabels()) != mine || masterUIDs[e.GetUID()] || e.GetDeletionTimestamp() != nil {
			continue
		}
		switch e := e.(type) {
		case *osbv1alpha1.SFPlan:
			if !keep("SFPlan", e.GetName()) {
				plans = append(plans, e)
			}
		case *osbv1alpha1.SFService:
			if !keep("SFService", e.GetName()) {
				services = append(services, e)
			}
		}
	}
	return plans, services
}

// instanceUse counts the instances on the sister (anyone's) by plan id
// and by service id.
func instanceUse(ctx context.Context, c client.Client) (plans, services map[string]int, err error) {
	instances := &osbv1alpha1.SFServiceInstanceList{}
	if err := c.List(ctx, instances); err != nil && !apimeta.IsNoMatchError(err) {
		return nil, nil, fmt.Errorf("list the instances on the sister cluster: %w", err)
	}
	plans, services = map[string]int{}, map[string]int{}
	for _, inst := range instances.Items {
		plans[inst.Spec.PlanID]++
		services[inst.Spec.ServiceID]++
	}
	return plans, services, nil
}

// deleteCopy deletes the copy obj on the sister, with a UID precondition:
// an entry that replaced it since it was read is not deleted in its place.
func deleteCopy(ctx context.Context, c client.Client, obj client.Object) error {
	uid := obj.GetUID()
	if err := c.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete %T %s on the sister cluster: %w", obj, obj.GetName(), err)
	}
	logf.FromContext(ctx).V(1).Info("Deleted a catalog copy on the sister cluster", "kind", fmt.Sprintf("%T", obj), "name", obj.GetName())
	return nil
}

// copyInto copies the listed entry from into to, an empty object of its
// kind.
func copyInto(from, to client.Object) {
	switch f := from.(type) {
	case *osbv1alpha1.SFService:
		f.DeepCopyInto(to.(*osbv1alpha1.SFService))
	case *osbv1alpha1.SFPlan:
		f.DeepCopyInto(to.(*osbv1alpha1.SFPlan))
	}
}

// falseCondition returns a CatalogReplicated=False condition.
func falseCondition(reason, message string) metav1.Condition {
	return metav1.Condition{Type: ConditionCatalogReplicated, Status: metav1.ConditionFalse, Reason: reason, Message: message}
}

// listed joins up to conditionListed items and says how many more there
// are.
func listed(items []string) string {
	slices.Sort(items)
	if len(items) <= conditionListed {
		return strings.Join(items, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(items[:conditionListed], "; "), len(items)-conditionListed)
}

// writeCondition sets (or, when cond is nil, removes) the CatalogReplicated
// condition of sfc with a patch that fails when the SFCluster changed since
// it was read: the conditions are one list, and a patch from a stale copy
// would drop the status controller's. It records an event when the
// condition's reason changes.
func (r *CatalogMirror) writeCondition(ctx context.Context, sfc *resourcev1alpha1.SFCluster, cond *metav1.Condition) error {
	before := sfc.DeepCopy()
	old := apimeta.FindStatusCondition(before.Status.Conditions, ConditionCatalogReplicated)
	if cond == nil {
		if !apimeta.RemoveStatusCondition(&sfc.Status.Conditions, ConditionCatalogReplicated) {
			return nil
		}
	} else {
		cond.ObservedGeneration = sfc.Generation
		if !apimeta.SetStatusCondition(&sfc.Status.Conditions, *cond) {
			return nil
		}
	}
	if err := r.platform.GetClient().Status().Patch(ctx, sfc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patch the %s condition of SFCluster %s/%s: %w", ConditionCatalogReplicated, sfc.Namespace, sfc.Name, err)
	}
	if cond != nil && (old == nil || old.Reason != cond.Reason) {
		eventType := corev1.EventTypeNormal
		if cond.Status != metav1.ConditionTrue {
			eventType = corev1.EventTypeWarning
		}
		r.recorder.Eventf(sfc, nil, eventType, cond.Reason, "ReplicateCatalog", "%s", cond.Message)
	}
	return nil
}

// patchFinalizer adds or removes FinalizerCatalogCopies with a patch that
// fails on conflict, so that other finalizers are never lost.
func (r *CatalogMirror) patchFinalizer(ctx context.Context, sfc *resourcev1alpha1.SFCluster, change func(client.Object, string) bool) error {
	before := sfc.DeepCopy()
	if !change(sfc, FinalizerCatalogCopies) {
		return nil
	}
	if err := r.platform.GetClient().Patch(ctx, sfc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("update the finalizers of SFCluster %s/%s: %w", sfc.Namespace, sfc.Name, err)
	}
	return nil
}
