package scheduling

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
	"github.com/marketplane/marketplane/internal/interoperator/catalog"
	"github.com/marketplane/marketplane/internal/interoperator/clusters"
)

// AnnotationRoundRobin is where round-robin keeps its position
// (resourcev1alpha1.AnnotationRoundRobinSequence).
const AnnotationRoundRobin = resourcev1alpha1.AnnotationRoundRobinSequence

// Defaults of a Placer.
const (
	// DefaultConfigTTL is how long the interoperator-config ConfigMap is
	// used before it is read again.
	DefaultConfigTTL = 10 * time.Second
	// DefaultReservationTTL is how long a decision is counted while the
	// cache does not show the instance as placed (spec.clusterId and its
	// Scheduled condition). The instance records it within its reconcile,
	// and the cache shows it within moments; one that did not (it was
	// deleted, or its reconcile failed before) stops counting.
	DefaultReservationTTL = 2 * time.Minute
)

// Placer decides where instances go; see the package documentation. It is
// safe for concurrent use.
type Placer struct {
	platform   client.Client
	live       client.Reader
	onboarding cache.Informers
	now        func() time.Time

	mu           sync.Mutex
	usage        usageIndex
	usageStarted bool
	reserved     map[types.UID]reservation
	lastRR       map[string]roundRobinPosition
	sfConfig     map[string]cachedConfig
}

type reservation struct {
	cluster  string
	requests corev1.ResourceList
	at       time.Time
}

type roundRobinPosition struct {
	cluster  string
	sequence int64
}

type cachedConfig struct {
	cfg  SFConfig
	read time.Time
}

// NewPlacer returns a Placer that reads SFClusters (and writes the
// round-robin position on them) with platform, the platform cluster's
// cached client, the interoperator-config ConfigMap with live (an API
// reader: no cache of every ConfigMap), and counts SFServiceInstances per
// cluster from the events of onboarding, the onboarding cluster's cache.
func NewPlacer(platform client.Client, live client.Reader, onboarding cache.Informers) *Placer {
	return &Placer{
		platform:   platform,
		live:       live,
		onboarding: onboarding,
		now:        time.Now,
		reserved:   map[types.UID]reservation{},
		lastRR:     map[string]roundRobinPosition{},
		sfConfig:   map[string]cachedConfig{},
	}
}

// Placement is what Place decides on.
type Placement struct {
	// Namespace is the catalog namespace: the SFClusters to choose from.
	Namespace string
	// Instance is the instance to place.
	Instance *osbv1alpha1.SFServiceInstance
	// Requests are what the instance's plan requests
	// (clusters.PlanRequests).
	Requests corev1.ResourceList
	// Selector is the plan's rendered clusterSelector; nil means every
	// cluster.
	Selector labels.Selector
	// SchedulerType is the ProviderConfig's spec.schedulerType; empty
	// defers to the interoperator-config ConfigMap, then to default.
	SchedulerType string
	// DefaultCluster is the ProviderConfig's spec.defaultCluster.
	DefaultCluster string
}

// Decision is where an instance goes, and why.
type Decision struct {
	// Cluster is the SFCluster's name.
	Cluster string
	// Type is the scheduler that chose it.
	Type Type
	// Why explains the choice, for the instance's condition and event.
	Why string
}

// NoMatchError says that the plan's clusterSelector matches no SFCluster
// at all: as in Service Fabrik, the instance fails.
type NoMatchError struct{ Message string }

// Error implements error.
func (e *NoMatchError) Error() string { return e.Message }

// Place decides where p.Instance goes and counts it there until the
// cache shows the instance placed there. A *NoClusterError means
// the instance should wait for the SFClusters to change, a *NoMatchError
// that it fails; other errors are transient.
func (pl *Placer) Place(ctx context.Context, p Placement) (Decision, error) {
	typ, def := pl.configuration(ctx, p)

	list := &resourcev1alpha1.SFClusterList{}
	if err := pl.platform.List(ctx, list, client.InNamespace(p.Namespace)); err != nil {
		return Decision{}, fmt.Errorf("list SFClusters in %s: %w", p.Namespace, err)
	}
	slices.SortFunc(list.Items, func(a, b resourcev1alpha1.SFCluster) int { return strings.Compare(a.Name, b.Name) })

	pl.mu.Lock()
	defer pl.mu.Unlock()
	placed, err := pl.placed(ctx, p)
	if err != nil {
		return Decision{}, err
	}

	var candidates []Candidate
	var excluded []string
	matching := 0
	for i := range list.Items {
		c := &list.Items[i]
		if p.Selector != nil && !p.Selector.Matches(labels.Set(c.Labels)) {
			continue
		}
		matching++
		cand := candidate(c, placed)
		if v := verdictOn(c, cand, p.Requests); v.why != "" {
			excluded = append(excluded, c.Name+": "+v.why+v.detail)
			continue
		}
		candidates = append(candidates, cand)
	}
	if p.Selector != nil && matching == 0 {
		return Decision{}, &NoMatchError{Message: fmt.Sprintf("the plan's clusterSelector %q matches none of the %d SFClusters of namespace %s", p.Selector.String(), len(list.Items), p.Namespace)}
	}
	if len(candidates) == 0 {
		if len(excluded) == 0 {
			return Decision{}, &NoClusterError{Message: fmt.Sprintf("there is no SFCluster in namespace %s", p.Namespace)}
		}
		return Decision{}, &NoClusterError{Message: fmt.Sprintf("no SFCluster can take the instance: %s", strings.Join(excluded, "; "))}
	}

	if def != "" && p.Selector != nil && excludes(list.Items, def, p.Selector) {
		// The default cluster is the default of plans that do not
		// choose: a plan whose clusterSelector leaves it out (the
		// landscape's dedicated-cluster plan, which must run on the
		// SFCluster of the platform's request namespace) is placed among
		// the clusters it selects, by the same rules as without a
		// default: the only one, else it waits.
		def = ""
	}
	req := Request{Requests: p.Requests, Default: def}
	if typ == TypeRoundRobin {
		req.Last = pl.roundRobinLast(p.Namespace, list.Items).cluster
	}
	name, why, err := For(typ).Pick(req, candidates)
	if err != nil {
		var none *NoClusterError
		if errors.As(err, &none) && len(excluded) > 0 {
			none.Message += " (" + strings.Join(excluded, "; ") + ")"
		}
		return Decision{}, err
	}
	if typ == TypeRoundRobin {
		if err := pl.recordRoundRobin(ctx, p.Namespace, list.Items, name); err != nil {
			return Decision{}, err
		}
	}
	pl.reserved[p.Instance.UID] = reservation{cluster: name, requests: p.Requests, at: pl.now()}
	return Decision{Cluster: name, Type: typ, Why: why}, nil
}

// RefusedError says that the SFCluster an instance names in
// spec.clusterId refuses it for good: it is being deleted, cordoned, or
// the plan's clusterSelector leaves it out. The instance fails.
type RefusedError struct{ Message string }

// Error implements error.
func (e *RefusedError) Error() string { return e.Message }

// Admit decides whether p.Instance may go to the SFCluster name, which its
// spec.clusterId names but no decision of the inter-operator chose: the
// filters of Place, applied to that cluster alone, with the same counts and
// under the same lock, so that a pinned instance never overfills a cluster
// nor takes a slot a placement is taking. On success it counts the
// instance there until its acceptance shows in the cache, as Place does. A
// *RefusedError means the instance fails; a *NoClusterError that it waits
// for the SFCluster to change (it does not exist yet, is not Ready, lacks
// its components or is too full); other errors are transient.
//
// The messages name the filter, never what other instances hold: the
// instance's creator may be a tenant.
func (pl *Placer) Admit(ctx context.Context, p Placement, name string) error {
	c := &resourcev1alpha1.SFCluster{}
	if err := pl.platform.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, c); err != nil {
		if apierrors.IsNotFound(err) {
			return &NoClusterError{Message: fmt.Sprintf("spec.clusterId names SFCluster %s, which does not exist", name)}
		}
		return fmt.Errorf("get SFCluster %s/%s: %w", p.Namespace, name, err)
	}
	if p.Selector != nil && !p.Selector.Matches(labels.Set(c.Labels)) {
		return &RefusedError{Message: fmt.Sprintf("spec.clusterId names SFCluster %s, which the plan's clusterSelector %q does not select", name, p.Selector.String())}
	}

	pl.mu.Lock()
	defer pl.mu.Unlock()
	placed, err := pl.placed(ctx, p)
	if err != nil {
		return err
	}
	v := verdictOn(c, candidate(c, placed), p.Requests)
	switch {
	case v.final:
		return &RefusedError{Message: fmt.Sprintf("spec.clusterId names SFCluster %s, which takes no new instances: %s", name, v.why)}
	case v.resource != "":
		return &NoClusterError{Message: fmt.Sprintf("spec.clusterId names SFCluster %s, which cannot take the instance now: full, no room left for the plan's %s request", name, v.resource)}
	case v.why != "":
		return &NoClusterError{Message: fmt.Sprintf("spec.clusterId names SFCluster %s, which cannot take the instance now: %s", name, v.why), NotReady: v.notReady}
	}
	pl.reserved[p.Instance.UID] = reservation{cluster: name, requests: p.Requests, at: pl.now()}
	return nil
}

// candidate returns c as a Candidate, with what placed holds for it.
func candidate(c *resourcev1alpha1.SFCluster, placed map[string]*usage) Candidate {
	cand := Candidate{Name: c.Name, Capacity: capacity(c)}
	if u := placed[c.Name]; u != nil {
		cand.Instances, cand.Requested = u.instances, u.requested
	}
	return cand
}

// verdict is why an SFCluster takes no new instance; why is empty when it
// takes it.
type verdict struct {
	// why names the filter: "cordoned", "full".
	why string
	// detail adds the figures behind a "full", for the platform's eyes:
	// what the cluster's instances request of its capacity.
	detail string
	// resource is what a full cluster has no room left for.
	resource corev1.ResourceName
	// notReady is set when the cluster's Ready condition is False.
	notReady bool
	// final is set when only a platform operator changes it: the cluster
	// is being deleted or cordoned.
	final bool
}

// verdictOn applies the filters every scheduler applies (the plan's
// clusterSelector aside) to the SFCluster c, on which cand is placed
// already, for an instance requesting requests.
func verdictOn(c *resourcev1alpha1.SFCluster, cand Candidate, requests corev1.ResourceList) verdict {
	switch {
	case c.DeletionTimestamp != nil:
		return verdict{why: "being deleted", final: true}
	case c.Spec.Unschedulable:
		return verdict{why: "cordoned", final: true}
	case notReady(c) != "":
		return verdict{why: notReady(c), notReady: true}
	case clusters.ComponentsPending(c) != "":
		// What the cluster needs installed (spec.components) is not
		// there yet: instances would find no operator to serve them.
		return verdict{why: clusters.ComponentsPending(c)}
	}
	if name, short := cand.shortOf(requests); short != "" {
		return verdict{why: "full", detail: " (" + short + ")", resource: name}
	}
	return verdict{}
}

// excludes reports whether the SFCluster name is among items and selector
// does not match it. A default cluster that does not exist is not
// excluded: the instance waits for it, as without a selector.
func excludes(items []resourcev1alpha1.SFCluster, name string, selector labels.Selector) bool {
	for i := range items {
		if items[i].Name == name {
			return !selector.Matches(labels.Set(items[i].Labels))
		}
	}
	return false
}

// Forget stops counting the decision for an instance, for example when it
// is deleted before it recorded its cluster.
func (pl *Placer) Forget(uid types.UID) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	delete(pl.reserved, uid)
}

// configuration returns the scheduler type and default cluster of p: the
// ProviderConfig's, else the interoperator-config ConfigMap's.
func (pl *Placer) configuration(ctx context.Context, p Placement) (Type, string) {
	typ, err := ParseType(p.SchedulerType)
	if err != nil {
		// The API server validates spec.schedulerType; an object stored
		// before that gets the default.
		typ = TypeDefault
	}
	def := p.DefaultCluster
	if p.SchedulerType != "" && def != "" {
		return typ, def
	}
	sf := pl.serviceFabrikConfig(ctx, p.Namespace)
	if p.SchedulerType == "" && sf.SchedulerType != "" {
		typ, _ = ParseType(sf.SchedulerType)
	}
	if def == "" {
		def = sf.PrimaryClusterID
	}
	return typ, def
}

// serviceFabrikConfig returns the interoperator-config of namespace, read
// at most once per DefaultConfigTTL. A ConfigMap that does not parse
// counts as none (Service Fabrik uses its defaults then) and is logged.
func (pl *Placer) serviceFabrikConfig(ctx context.Context, namespace string) SFConfig {
	pl.mu.Lock()
	c, ok := pl.sfConfig[namespace]
	pl.mu.Unlock()
	if ok && pl.now().Sub(c.read) < DefaultConfigTTL {
		return c.cfg
	}
	cfg, _, err := ReadSFConfig(ctx, pl.live, namespace)
	if err != nil {
		logf.FromContext(ctx).Error(err, "Ignoring the interoperator-config ConfigMap", "namespace", namespace)
	}
	pl.mu.Lock()
	pl.sfConfig[namespace] = cachedConfig{cfg: cfg, read: pl.now()}
	pl.mu.Unlock()
	return cfg
}

// usage is what is placed on a cluster.
type usage struct {
	instances int
	requested corev1.ResourceList
}

// placed returns, per cluster, the instances placed there (their
// PlacedCluster: a decision of the inter-operator, never a bare
// spec.clusterId) and the decisions not yet in the cache, with their
// requests; p.Instance itself is not counted. pl.mu must be held.
func (pl *Placer) placed(ctx context.Context, p Placement) (map[string]*usage, error) {
	if err := pl.startUsage(ctx); err != nil {
		return nil, err
	}
	out := map[string]*usage{}
	at := func(cluster string) *usage {
		u := out[cluster]
		if u == nil {
			u = &usage{requested: corev1.ResourceList{}}
			out[cluster] = u
		}
		return u
	}
	reservedUIDs := make([]types.UID, 0, len(pl.reserved))
	for uid := range pl.reserved {
		reservedUIDs = append(reservedUIDs, uid)
	}
	perPlan, recorded := pl.usage.snapshot(p.Instance.UID, reservedUIDs)
	for cluster, plans := range perPlan {
		for _, n := range plans {
			at(cluster).instances += n
		}
	}
	requests := map[string]corev1.ResourceList{}
	for cluster, plans := range perPlan {
		for planID, n := range plans {
			r, ok := requests[planID]
			if !ok {
				var err error
				if r, err = pl.planRequests(ctx, p.Namespace, planID); err != nil {
					return nil, err
				}
				requests[planID] = r
			}
			at(cluster).requested = clusters.AddResources(at(cluster).requested, times(r, n))
		}
	}
	for uid, r := range pl.reserved {
		clusterID := recorded[uid]
		switch {
		case clusterID != "" || pl.now().Sub(r.at) > DefaultReservationTTL:
			// The cache shows the decision (the instance counts as
			// placed), or the instance is gone or did not record it in
			// time.
			delete(pl.reserved, uid)
		case uid != p.Instance.UID:
			at(r.cluster).instances++
			at(r.cluster).requested = clusters.AddResources(at(r.cluster).requested, r.requests)
		}
	}
	return out, nil
}

// times returns r with every quantity multiplied by n.
func times(r corev1.ResourceList, n int) corev1.ResourceList {
	out := make(corev1.ResourceList, len(r))
	for name, q := range r {
		q = q.DeepCopy()
		q.Mul(int64(n))
		out[name] = q
	}
	return out
}

// startUsage starts counting instances per cluster on first use; pl.mu
// must be held.
func (pl *Placer) startUsage(ctx context.Context) error {
	if pl.usageStarted {
		return nil
	}
	if err := pl.usage.start(ctx, pl.onboarding); err != nil {
		return err
	}
	pl.usageStarted = true
	return nil
}

// planRequests returns the requests of the plan with id planID (the
// platform cache must have catalog's IndexID); a plan that is gone or
// whose requests do not parse counts as requesting nothing.
func (pl *Placer) planRequests(ctx context.Context, namespace, planID string) (corev1.ResourceList, error) {
	plan, err := catalog.Plan(ctx, pl.platform, namespace, planID)
	if err != nil {
		return nil, err
	}
	r, err := clusters.PlanRequests(plan)
	if err != nil {
		return nil, nil //nolint:nilerr // an instance already placed keeps its place; the plan's own instances fail on it
	}
	return r, nil
}

// capacity returns how much may be requested on c: spec.totalCapacity,
// else status.totalCapacity, else status.currentCapacity, times
// spec.schedulingLimitPercentage (unset means 100).
func capacity(c *resourcev1alpha1.SFCluster) corev1.ResourceList {
	total := c.Spec.TotalCapacity
	if len(total) == 0 {
		total = c.Status.TotalCapacity
	}
	if len(total) == 0 {
		total = c.Status.CurrentCapacity
	}
	if len(total) == 0 {
		return nil
	}
	pct := int64(c.Spec.SchedulingLimitPercentage)
	if pct <= 0 || pct > 100 {
		pct = 100
	}
	out := make(corev1.ResourceList, len(total))
	for name, q := range total {
		if pct == 100 {
			out[name] = q.DeepCopy()
			continue
		}
		out[name] = *resource.NewMilliQuantity(q.MilliValue()*pct/100, q.Format)
	}
	return out
}

// notReady says why c takes no instances now: its Ready condition is
// False (unreachable, bad kubeconfig). A cluster whose readiness was not
// checked yet takes instances.
func notReady(c *resourcev1alpha1.SFCluster) string {
	r := apimeta.FindStatusCondition(c.Status.Conditions, "Ready")
	if r == nil || r.Status != metav1.ConditionFalse {
		return ""
	}
	return "not Ready (" + r.Reason + ")"
}

// roundRobinLast returns where round-robin stands in namespace: the
// SFCluster with the highest AnnotationRoundRobin, or what this Placer
// recorded last if the cache does not show it yet. pl.mu must be held.
func (pl *Placer) roundRobinLast(namespace string, all []resourcev1alpha1.SFCluster) roundRobinPosition {
	pos := pl.lastRR[namespace]
	for i := range all {
		seq, err := strconv.ParseInt(all[i].Annotations[AnnotationRoundRobin], 10, 64)
		if err == nil && seq > pos.sequence {
			pos = roundRobinPosition{cluster: all[i].Name, sequence: seq}
		}
	}
	return pos
}

// recordRoundRobin records that round-robin chose name. pl.mu must be
// held.
func (pl *Placer) recordRoundRobin(ctx context.Context, namespace string, all []resourcev1alpha1.SFCluster, name string) error {
	next := roundRobinPosition{cluster: name, sequence: pl.roundRobinLast(namespace, all).sequence + 1}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, AnnotationRoundRobin, strconv.FormatInt(next.sequence, 10))
	sfc := &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := pl.platform.Patch(ctx, sfc, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("record the round-robin position on SFCluster %s: %w", name, err)
	}
	pl.lastRR[namespace] = next
	return nil
}
