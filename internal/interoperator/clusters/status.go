package clusters

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/marketplane/marketplane/internal/interoperator/catalog"
)

// Defaults of the StatusReconciler.
const (
	// DefaultStatusControllerName names the controller.
	DefaultStatusControllerName = "sfcluster"
	// DefaultReadyCheckInterval is how often a reachable cluster is looked
	// at again.
	DefaultReadyCheckInterval = 30 * time.Second
	// DefaultMinCheckBackoff and DefaultMaxCheckBackoff bound the backoff
	// with which an unreachable cluster is looked at again.
	DefaultMinCheckBackoff = time.Second
	DefaultMaxCheckBackoff = time.Minute
	// DefaultCountDelay is how long a change of the instances on a
	// cluster waits before the cluster's status is written, so that the
	// changes of a burst are written together.
	DefaultCountDelay = 5 * time.Second
	// DefaultProbeTimeout is how long the reachability check waits for the
	// cluster's API server.
	DefaultProbeTimeout = 5 * time.Second
	// drainReportNames is how many instances a drain report names.
	drainReportNames = 5
	// nodePageSize is the page size of the node list of the probe.
	nodePageSize = 500
)

// StatusReconciler keeps the status of the SFClusters of one inter-operator
// (those in its ProviderConfig's catalog namespace, on the platform
// cluster) live: the instances placed there and what their plans
// request, the capacity of the cluster's nodes, and whether its API server
// answers (Ready). It also offboards SFClusters: it puts the
// SFClusterFinalizer on them, so that deleting one that instances still run
// on waits, with a drain report, until they are gone, and then forgets the
// cluster's client.
//
// An SFCluster is looked at again when it changes (spec, labels,
// annotations, deletion), when an instance is placed on it, moves or
// goes, when a plan changes, every DefaultReadyCheckInterval while it is
// Ready, and with a backoff (DefaultMinCheckBackoff doubling up to
// DefaultMaxCheckBackoff, measured from the Ready condition's last
// transition, so that it survives restarts) while it is not. The status is
// written only when it changed.
type StatusReconciler struct {
	providerName string
	platform     cluster.Cluster
	instances    client.Reader
	clusterIndex string
	registry     *Registry

	name         string
	options      controller.Options
	readyEvery   time.Duration
	minBackoff   time.Duration
	maxBackoff   time.Duration
	probeTimeout time.Duration
	countDelay   time.Duration
	now          func() time.Time
	// probes remembers the last successful reachability check of each
	// SFCluster, so that a status update for its instances does not list
	// its nodes again before readyEvery.
	probes sync.Map // types.NamespacedName → probe
	// unanswered holds the Ready SFClusters whose last probe got no answer
	// in time: one such probe of a Ready cluster is tried again at once
	// rather than reported (a loaded API server, not a gone one).
	unanswered sync.Map // types.NamespacedName → struct{}
	recorder   events.EventRecorder
	// installer installs the SFClusters' spec.components (components.go).
	installer *installer
}

var _ reconcile.Reconciler = &StatusReconciler{}

// StatusOption configures a StatusReconciler.
type StatusOption func(*StatusReconciler)

// WithStatusControllerName names the controller (DefaultStatusControllerName);
// names must be unique within a manager.
func WithStatusControllerName(name string) StatusOption {
	return func(r *StatusReconciler) {
		if name != "" {
			r.name = name
		}
	}
}

// WithStatusControllerOptions sets controller-runtime's options of the
// controller.
func WithStatusControllerOptions(o controller.Options) StatusOption {
	return func(r *StatusReconciler) { r.options = o }
}

// WithCheckIntervals sets how often a Ready cluster is checked again
// (DefaultReadyCheckInterval) and the backoff of the checks of a cluster
// that is not Ready (DefaultMinCheckBackoff to DefaultMaxCheckBackoff).
// Zero keeps a default.
func WithCheckIntervals(ready, minBackoff, maxBackoff time.Duration) StatusOption {
	return func(r *StatusReconciler) {
		if ready > 0 {
			r.readyEvery = ready
		}
		if minBackoff > 0 {
			r.minBackoff = minBackoff
		}
		if maxBackoff > 0 {
			r.maxBackoff = maxBackoff
		}
	}
}

// WithCountDelay sets how long a change of a cluster's instances waits
// before its status is written (DefaultCountDelay).
func WithCountDelay(d time.Duration) StatusOption {
	return func(r *StatusReconciler) {
		if d > 0 {
			r.countDelay = d
		}
	}
}

// WithProbeTimeout sets how long the reachability check waits
// (DefaultProbeTimeout).
func WithProbeTimeout(d time.Duration) StatusOption {
	return func(r *StatusReconciler) {
		if d > 0 {
			r.probeTimeout = d
		}
	}
}

// WithComponentHTTPClient sets the client that fetches http(s) chart urls
// of SFCluster components.
func WithComponentHTTPClient(c *http.Client) StatusOption {
	return func(r *StatusReconciler) { r.installer.httpClient = c }
}

// NewStatusReconciler returns the SFCluster status controller of the
// inter-operator named providerName. platform holds its ProviderConfig,
// SFClusters and SFPlans; instances reads SFServiceInstances on the
// onboarding cluster through a cache with a field index, named
// clusterIndex, of spec.clusterId; registry hands out the clusters' clients.
func NewStatusReconciler(providerName string, platform cluster.Cluster, instances client.Reader, clusterIndex string, registry *Registry, opts ...StatusOption) *StatusReconciler {
	r := &StatusReconciler{
		providerName: providerName,
		platform:     platform,
		instances:    instances,
		clusterIndex: clusterIndex,
		registry:     registry,
		name:         DefaultStatusControllerName,
		readyEvery:   DefaultReadyCheckInterval,
		minBackoff:   DefaultMinCheckBackoff,
		maxBackoff:   DefaultMaxCheckBackoff,
		probeTimeout: DefaultProbeTimeout,
		countDelay:   DefaultCountDelay,
		now:          time.Now,
	}
	if platform != nil {
		r.installer = newInstaller(platform.GetAPIReader())
	} else {
		r.installer = newInstaller(nil)
	}
	for _, o := range opts {
		if o != nil {
			o(r)
		}
	}
	if r.maxBackoff < r.minBackoff {
		r.maxBackoff = r.minBackoff
	}
	return r
}

// SetupWithManager registers the controller with mgr, the onboarding
// cluster's manager, to which the platform cluster must have been added.
// It watches SFClusters, SFPlans and the ProviderConfig on the platform
// cluster and SFServiceInstances on the onboarding cluster.
func (r *StatusReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if mgr == nil || r.platform == nil || r.instances == nil || r.registry == nil {
		return errors.New("setup SFCluster status controller: manager, platform cluster, instance reader and registry are required")
	}
	r.recorder = r.platform.GetEventRecorder(r.name)
	err := ctrl.NewControllerManagedBy(mgr).
		Named(r.name).
		WithOptions(r.options).
		WatchesRawSource(source.Kind(r.platform.GetCache(), &resourcev1alpha1.SFCluster{},
			&handler.TypedEnqueueRequestForObject[*resourcev1alpha1.SFCluster]{}, clusterChanged())).
		WatchesRawSource(source.Kind(mgr.GetCache(), &osbv1alpha1.SFServiceInstance{},
			handler.TypedFuncs[*osbv1alpha1.SFServiceInstance, reconcile.Request]{
				CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[*osbv1alpha1.SFServiceInstance], q handlerQueue) {
					r.enqueueClusterOf(ctx, q, e.Object)
				},
				UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[*osbv1alpha1.SFServiceInstance], q handlerQueue) {
					o, n := e.ObjectOld, e.ObjectNew
					if o.PlacedCluster() != n.PlacedCluster() || o.Spec.PlanID != n.Spec.PlanID {
						r.enqueueClusterOf(ctx, q, o)
						r.enqueueClusterOf(ctx, q, n)
					}
				},
				DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[*osbv1alpha1.SFServiceInstance], q handlerQueue) {
					r.enqueueClusterOf(ctx, q, e.Object)
				},
			})).
		WatchesRawSource(source.Kind(r.platform.GetCache(), &osbv1alpha1.SFPlan{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, p *osbv1alpha1.SFPlan) []reconcile.Request {
				return r.clustersIn(ctx, p.Namespace)
			}),
			predicate.TypedGenerationChangedPredicate[*osbv1alpha1.SFPlan]{})).
		WatchesRawSource(source.Kind(r.platform.GetCache(), &interoperatorv1alpha1.ProviderConfig{},
			handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, c *interoperatorv1alpha1.ProviderConfig) []reconcile.Request {
				return r.clustersIn(ctx, c.CatalogNamespace())
			}),
			predicate.NewTypedPredicateFuncs(func(c *interoperatorv1alpha1.ProviderConfig) bool { return c.Name == r.providerName }))).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setup SFCluster status controller: %w", err)
	}
	return nil
}

// handlerQueue is the queue the instance watch adds requests to.
type handlerQueue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// Reconcile brings the status of one SFCluster up to date and handles its
// deletion.
func (r *StatusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	cfg, sfc, err := r.get(ctx, req)
	if err != nil || sfc == nil {
		return ctrl.Result{}, err
	}
	deleting := sfc.DeletionTimestamp != nil
	if !deleting && !controllerutil.ContainsFinalizer(sfc, resourcev1alpha1.SFClusterFinalizer) {
		if err := r.patchFinalizer(ctx, sfc, controllerutil.AddFinalizer); err != nil {
			return ctrl.Result{}, err
		}
	}

	load, err := r.load(ctx, sfc)
	if err != nil {
		return ctrl.Result{}, err
	}
	if deleting {
		if len(load.instances) == 0 && len(sfc.Status.Components) == 0 {
			return ctrl.Result{}, r.offboard(ctx, sfc)
		}
		log.V(1).Info("SFCluster deletion waits for its instances", "instances", len(load.instances))
	}

	before := sfc.DeepCopy()
	ready, capacity, probed, retry := r.check(ctx, sfc)
	st := &sfc.Status
	st.ServiceInstanceCount = int32(len(load.instances))
	st.Requests = boundForStatus(load.requests)
	if probed {
		st.CurrentCapacity = boundForStatus(capacity)
	}
	st.TotalCapacity = st.CurrentCapacity
	if len(sfc.Spec.TotalCapacity) > 0 {
		st.TotalCapacity = sfc.Spec.TotalCapacity.DeepCopy()
	}
	st.ObservedGeneration = sfc.Generation
	ready.ObservedGeneration = sfc.Generation
	apimeta.SetStatusCondition(&st.Conditions, ready)
	// Components: installed while the cluster is in use, removed once a
	// deleted SFCluster has no instance left (components.go).
	removeAll := deleting && len(load.instances) == 0
	comps := r.reconcileComponents(ctx, cfg, sfc, r.reachableTarget(ctx, sfc, ready), removeAll)
	setOrRemoveCondition(sfc, resourcev1alpha1.SFClusterConditionComponentsReady, comps.condition)
	var offboarding *metav1.Condition
	if off, ok := offboardingCondition(sfc, load); ok {
		offboarding = &off
	}
	setOrRemoveCondition(sfc, resourcev1alpha1.SFClusterConditionOffboarding, offboarding)
	if err := r.writeStatus(ctx, before, sfc); err != nil {
		return ctrl.Result{}, err
	}
	if removeAll && len(sfc.Status.Components) == 0 {
		return ctrl.Result{}, r.offboard(ctx, sfc)
	}
	return ctrl.Result{RequeueAfter: r.requeueAfter(sfc, retry, comps.pending)}, nil
}

// get reads the ProviderConfig and the SFCluster of req; the SFCluster
// is nil when there is nothing to do: no ProviderConfig, a namespace
// other than its catalog's, or an SFCluster that is gone (then it is
// forgotten).
func (r *StatusReconciler) get(ctx context.Context, req ctrl.Request) (*interoperatorv1alpha1.ProviderConfig, *resourcev1alpha1.SFCluster, error) {
	c := r.platform.GetClient()
	cfg := &interoperatorv1alpha1.ProviderConfig{}
	if err := c.Get(ctx, client.ObjectKey{Name: r.providerName}, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("get ProviderConfig %s: %w", r.providerName, err)
	}
	if req.Namespace != cfg.CatalogNamespace() {
		return nil, nil, nil
	}
	sfc := &resourcev1alpha1.SFCluster{}
	if err := c.Get(ctx, req.NamespacedName, sfc); err != nil {
		if apierrors.IsNotFound(err) {
			r.registry.Forget(req.Namespace, req.Name)
			r.probes.Delete(req.NamespacedName)
			r.unanswered.Delete(req.NamespacedName)
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("get SFCluster %s: %w", req.NamespacedName, err)
	}
	return cfg, sfc, nil
}

// setOrRemoveCondition sets cond, at sfc's generation, or removes the
// condition of type typ when cond is nil.
func setOrRemoveCondition(sfc *resourcev1alpha1.SFCluster, typ string, cond *metav1.Condition) {
	if cond == nil {
		apimeta.RemoveStatusCondition(&sfc.Status.Conditions, typ)
		return
	}
	cond.ObservedGeneration = sfc.Generation
	apimeta.SetStatusCondition(&sfc.Status.Conditions, *cond)
}

// requeueAfter is when sfc is looked at next: when its Ready condition
// is due for a check, sooner after a failed check that is retried or
// while components are pending.
func (r *StatusReconciler) requeueAfter(sfc *resourcev1alpha1.SFCluster, retry, componentsPending bool) time.Duration {
	conds := sfc.Status.Conditions
	next := r.nextCheck(apimeta.FindStatusCondition(conds, resourcev1alpha1.SFClusterConditionReady))
	if retry {
		next = min(next, r.minBackoff)
	}
	if componentsPending {
		next = min(next, r.nextCheck(apimeta.FindStatusCondition(conds, resourcev1alpha1.SFClusterConditionComponentsReady)))
	}
	return next
}

// reachableTarget returns the cluster's Target when the check found it
// Ready, nil otherwise.
func (r *StatusReconciler) reachableTarget(ctx context.Context, sfc *resourcev1alpha1.SFCluster, ready metav1.Condition) *Target {
	if ready.Status != metav1.ConditionTrue {
		return nil
	}
	t, err := r.registry.Target(ctx, sfc.Namespace, sfc.Name)
	if err != nil {
		return nil
	}
	return t
}

// load is what the instances scheduled on a cluster take.
type load struct {
	// instances are the namespace/name of each instance, sorted.
	instances []string
	// requests is the sum of their plans' context.requests; nil when none.
	requests corev1.ResourceList
}

// load lists the instances placed on sfc and sums their plans' requests.
// An instance counts when the inter-operator placed it there or accepted
// its spec.clusterId (PlacedCluster): a clusterId nobody accepted fills no
// cluster and holds up no deletion. Instances of plans that do not exist
// (any more) or whose requests do not parse count with no requests: the
// plan's problem is reported on the instance and the plan, not here.
func (r *StatusReconciler) load(ctx context.Context, sfc *resourcev1alpha1.SFCluster) (load, error) {
	list := &osbv1alpha1.SFServiceInstanceList{}
	if err := r.instances.List(ctx, list, client.MatchingFields{r.clusterIndex: sfc.Name}); err != nil {
		return load{}, fmt.Errorf("list the instances on SFCluster %s: %w", sfc.Name, err)
	}
	var l load
	plans := map[string]corev1.ResourceList{}
	for i := range list.Items {
		inst := &list.Items[i]
		if inst.PlacedCluster() != sfc.Name {
			continue
		}
		l.instances = append(l.instances, inst.Namespace+"/"+inst.Name)
		req, seen := plans[inst.Spec.PlanID]
		if !seen {
			plan, err := catalog.Plan(ctx, r.platform.GetClient(), sfc.Namespace, inst.Spec.PlanID)
			if err != nil {
				return load{}, err
			}
			if req, err = PlanRequests(plan); err != nil {
				logf.FromContext(ctx).V(1).Info("Plan requests ignored", "plan", inst.Spec.PlanID, "error", err.Error())
			}
			plans[inst.Spec.PlanID] = req
		}
		l.requests = AddResources(l.requests, req)
	}
	sort.Strings(l.instances)
	return l, nil
}

// check reports whether the cluster's API server answers with the
// SFCluster's kubeconfig, as its Ready condition, and, when it does, the
// sum of the allocatable resources of its nodes (probed is then true).
// Condition messages never quote the kubeconfig. A cluster found reachable
// less than readyEvery ago, for the same generation, is not probed again:
// its Ready condition stands, and only its instances are counted. A Ready
// cluster turns Unreachable for want of an answer only when two probes in
// a row got none: after the first, Ready stands and retry asks for the
// second one after minBackoff. A refused connection or an error answer
// counts at once.
func (r *StatusReconciler) check(ctx context.Context, sfc *resourcev1alpha1.SFCluster) (ready metav1.Condition, capacity corev1.ResourceList, probed, retry bool) {
	key := client.ObjectKeyFromObject(sfc)
	cur := apimeta.FindStatusCondition(sfc.Status.Conditions, resourcev1alpha1.SFClusterConditionReady)
	wasReady := cur != nil && cur.Status == metav1.ConditionTrue
	if wasReady {
		if p, ok := r.probes.Load(key); ok && p.(probe).generation == sfc.Generation && p.(probe).annotations == annotationsKey(sfc) && r.now().Sub(p.(probe).at) < r.readyEvery {
			// Reachable a moment ago, for the same spec: only the
			// instances changed.
			return *cur, nil, false, false
		}
	}
	ready, capacity, probed, unanswered := r.probe(ctx, sfc)
	if ready.Status == metav1.ConditionTrue {
		r.probes.Store(key, probe{at: r.now(), generation: sfc.Generation, annotations: annotationsKey(sfc)})
		r.unanswered.Delete(key)
		return ready, capacity, probed, false
	}
	r.probes.Delete(key)
	if unanswered && wasReady {
		if _, again := r.unanswered.LoadOrStore(key, struct{}{}); !again {
			return *cur, nil, false, true
		}
		ready.Message += ", twice in a row"
	}
	r.unanswered.Delete(key)
	return ready, capacity, probed, false
}

// probe is a successful reachability check of an SFCluster's generation
// and annotations: annotating an SFCluster asks for a check at once.
type probe struct {
	at          time.Time
	generation  int64
	annotations string
}

// annotationsKey returns the annotations of sfc but the round-robin
// scheduler's, which changes with every placement, in a comparable form.
func annotationsKey(sfc *resourcev1alpha1.SFCluster) string {
	keys := make([]string, 0, len(sfc.Annotations))
	for k, v := range sfc.Annotations {
		if k != resourcev1alpha1.AnnotationRoundRobinSequence {
			keys = append(keys, k+"="+v)
		}
	}
	sort.Strings(keys)
	return strings.Join(keys, "\x00")
}

// probe checks whether the cluster's API server answers, and reads the
// capacity of its nodes; unanswered says that it got no answer in time, or
// one of an overloaded API server (a timeout, 429).
func (r *StatusReconciler) probe(ctx context.Context, sfc *resourcev1alpha1.SFCluster) (ready metav1.Condition, capacity corev1.ResourceList, probed, unanswered bool) {
	ready = metav1.Condition{Type: resourcev1alpha1.SFClusterConditionReady, Status: metav1.ConditionFalse}
	t, err := r.registry.Target(ctx, sfc.Namespace, sfc.Name)
	if err != nil {
		if ce, ok := AsError(err); ok {
			ready.Reason, ready.Message = ce.Reason, ce.Message
			return ready, nil, false, false
		}
		ready.Reason = resourcev1alpha1.SFClusterReasonUnreachable
		ready.Message = fmt.Sprintf("the kubeconfig of SFCluster %s cannot be read: %s", sfc.Name, describe(err))
		return ready, nil, false, false
	}
	server := serverHost(t.Server)
	ctx, cancel := context.WithTimeout(ctx, r.probeTimeout)
	defer cancel()
	capacity, err = nodeCapacity(ctx, t.Client())
	switch {
	case err == nil:
		ready.Status, ready.Reason = metav1.ConditionTrue, resourcev1alpha1.SFClusterReasonReachable
		ready.Message = fmt.Sprintf("the API server %s answers", server)
		return ready, capacity, true, false
	case apierrors.IsForbidden(err):
		// The API server answered; the kubeconfig just may not list nodes.
		ready.Status, ready.Reason = metav1.ConditionTrue, resourcev1alpha1.SFClusterReasonReachable
		ready.Message = fmt.Sprintf("the API server %s answers; the kubeconfig may not list nodes, so the capacity of the nodes is not known", server)
		return ready, nil, true, false
	case apierrors.IsUnauthorized(err):
		// Read the Secret again at the next check: it may have been
		// rotated.
		r.registry.Forget(sfc.Namespace, sfc.Name)
		ready.Reason = resourcev1alpha1.SFClusterReasonUnauthorized
		ready.Message = fmt.Sprintf("the API server %s refused the credentials of the kubeconfig", server)
		return ready, nil, false, false
	}
	ready.Reason = resourcev1alpha1.SFClusterReasonUnreachable
	ready.Message = fmt.Sprintf("the API server %s cannot be reached: %s", server, describe(err))
	return ready, nil, false, isTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err)
}

// nodeCapacity returns the sum of the allocatable resources of the nodes
// c sees, nil when there are none. It lists the nodes in pages.
func nodeCapacity(ctx context.Context, c client.Reader) (corev1.ResourceList, error) {
	var sum corev1.ResourceList
	cont := ""
	for {
		list := &corev1.NodeList{}
		if err := c.List(ctx, list, client.Limit(nodePageSize), client.Continue(cont)); err != nil {
			return nil, err
		}
		for i := range list.Items {
			sum = AddResources(sum, list.Items[i].Status.Allocatable)
		}
		if cont = list.Continue; cont == "" {
			return sum, nil
		}
	}
}

// describe says why a request failed without the request's URL: the URL
// holds nothing secret, but the reason is what a reader needs, and it stays
// the same from one check to the next (no status write per check).
func describe(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if isTimeout(err) {
		return "no answer in time"
	}
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		return fmt.Sprintf("the API server answered %d %s", se.Status().Code, se.Status().Reason)
	}
	return err.Error()
}

// isTimeout reports whether err is a request that got no answer in time.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// serverHost returns the host (and port) of an API server URL, without
// anything else the URL may hold.
func serverHost(server string) string {
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		return "of the kubeconfig"
	}
	return u.Host
}

// nextCheck is when the cluster is looked at again: every readyEvery while
// it is Ready, otherwise after as long as it has been not Ready (so the
// wait doubles), between minBackoff and maxBackoff.
func (r *StatusReconciler) nextCheck(ready *metav1.Condition) time.Duration {
	if ready != nil && ready.Status == metav1.ConditionTrue {
		return r.readyEvery
	}
	var wait time.Duration
	if ready != nil {
		wait = r.now().Sub(ready.LastTransitionTime.Time)
	}
	return min(max(wait, r.minBackoff), r.maxBackoff)
}

// writeStatus patches the status of sfc, whose unchanged copy is before,
// when it changed, and records events for changes of the Ready and
// Offboarding conditions.
func (r *StatusReconciler) writeStatus(ctx context.Context, before, sfc *resourcev1alpha1.SFCluster) error {
	if equality.Semantic.DeepEqual(before.Status, sfc.Status) {
		return nil
	}
	if err := r.platform.GetClient().Status().Patch(ctx, sfc, client.MergeFrom(before)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patch status of SFCluster %s/%s: %w", sfc.Namespace, sfc.Name, err)
	}
	for _, typ := range []string{resourcev1alpha1.SFClusterConditionReady, resourcev1alpha1.SFClusterConditionOffboarding, resourcev1alpha1.SFClusterConditionComponentsReady} {
		cur := apimeta.FindStatusCondition(sfc.Status.Conditions, typ)
		old := apimeta.FindStatusCondition(before.Status.Conditions, typ)
		if cur == nil || (old != nil && old.Status == cur.Status && old.Reason == cur.Reason) {
			continue
		}
		eventType := corev1.EventTypeNormal
		if (typ == resourcev1alpha1.SFClusterConditionReady && cur.Status != metav1.ConditionTrue) || cur.Reason == resourcev1alpha1.SFClusterReasonInstallFailed {
			eventType = corev1.EventTypeWarning
		}
		r.recorder.Eventf(sfc, nil, eventType, cur.Reason, "Check", "%s", cur.Message)
	}
	logf.FromContext(ctx).V(1).Info("SFCluster status written", "instances", sfc.Status.ServiceInstanceCount,
		"ready", apimeta.IsStatusConditionTrue(sfc.Status.Conditions, resourcev1alpha1.SFClusterConditionReady))
	return nil
}

// patchFinalizer adds or removes the SFClusterFinalizer with a patch that
// fails on conflict, so that other finalizers are never lost.
func (r *StatusReconciler) patchFinalizer(ctx context.Context, sfc *resourcev1alpha1.SFCluster, change func(client.Object, string) bool) error {
	before := sfc.DeepCopy()
	if !change(sfc, resourcev1alpha1.SFClusterFinalizer) {
		return nil
	}
	if err := r.platform.GetClient().Patch(ctx, sfc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("update the finalizers of SFCluster %s/%s: %w", sfc.Namespace, sfc.Name, err)
	}
	return nil
}

// enqueueClusterOf enqueues the SFCluster an instance names in
// spec.clusterId.
func (r *StatusReconciler) enqueueClusterOf(ctx context.Context, q interface {
	AddAfter(reconcile.Request, time.Duration)
}, inst *osbv1alpha1.SFServiceInstance) {
	if inst.Spec.ClusterID == "" {
		return
	}
	ns, ok := r.catalogNamespace(ctx)
	if !ok {
		return
	}
	// After countDelay: the queue keeps the earliest of several, so a
	// burst of placements costs one status write per countDelay, not one
	// per instance.
	q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: inst.Spec.ClusterID}}, r.countDelay)
}

// clustersIn returns requests for every SFCluster of namespace when it is
// the catalog namespace.
func (r *StatusReconciler) clustersIn(ctx context.Context, namespace string) []reconcile.Request {
	if ns, ok := r.catalogNamespace(ctx); !ok || ns != namespace {
		return nil
	}
	list := &resourcev1alpha1.SFClusterList{}
	if err := r.platform.GetClient().List(ctx, list, client.InNamespace(namespace)); err != nil {
		logf.FromContext(ctx).Error(err, "Cannot list the SFClusters to look at", "namespace", namespace)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// catalogNamespace returns the catalog namespace of the ProviderConfig.
func (r *StatusReconciler) catalogNamespace(ctx context.Context) (string, bool) {
	cfg := &interoperatorv1alpha1.ProviderConfig{}
	if err := r.platform.GetClient().Get(ctx, client.ObjectKey{Name: r.providerName}, cfg); err != nil {
		return "", false
	}
	return cfg.CatalogNamespace(), true
}

// clusterChanged passes creations, deletions and changes of an SFCluster's
// spec, labels, annotations or deletion timestamp, but not the controller's
// own status writes.
func clusterChanged() predicate.TypedPredicate[*resourcev1alpha1.SFCluster] {
	return predicate.TypedFuncs[*resourcev1alpha1.SFCluster]{
		UpdateFunc: func(e event.TypedUpdateEvent[*resourcev1alpha1.SFCluster]) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return o.Generation != n.Generation ||
				!equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
				annotationsKey(o) != annotationsKey(n) ||
				(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)
		},
	}
}

// joinNames lists up to drainReportNames names and says how many more
// there are.
func joinNames(names []string) string {
	if len(names) <= drainReportNames {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:drainReportNames], ", "), len(names)-drainReportNames)
}
