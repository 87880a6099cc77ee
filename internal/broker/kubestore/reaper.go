package kubestore

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/broker/sf"
)

// DefaultTombstoneTTL is how long a finished deletion stays visible to
// last_operation as "succeeded" before it answers 410 Gone.
const DefaultTombstoneTTL = 5 * time.Minute

// Reaper releases tombstones. An instance or binding (in a namespace the
// broker created for its instance) whose deletion finished keeps the
// broker's finalizer, so that last_operation can still
// report "succeeded"; once the reaper has seen it as a tombstone for the
// TTL, it removes the finalizer and the object goes. For an instance it
// then deletes the instance's namespace, when the broker created it.
//
// The time a tombstone was first seen is kept in memory: after a restart
// the TTL starts again, so a tombstone lives at least the TTL and at most
// twice as long across one restart. Several replicas may reap at once;
// the writes are conditional, so they do not conflict harmfully.
type Reaper struct {
	cache    cache.Cache
	client   client.Client
	ttl      time.Duration
	interval time.Duration
	log      logr.Logger
	now      func() time.Time
	seen     map[types.UID]time.Time
}

// ReaperOption configures a Reaper.
type ReaperOption func(*Reaper)

// WithReaperLogger sets the logger.
func WithReaperLogger(l logr.Logger) ReaperOption { return func(r *Reaper) { r.log = l } }

// WithInterval sets how often the reaper looks for tombstones (default: a
// tenth of the TTL, between 100ms and 30s).
func WithInterval(d time.Duration) ReaperOption { return func(r *Reaper) { r.interval = d } }

// NewReaper returns a Reaper for the objects in c (the Store's cache),
// writing through cl.
func NewReaper(c cache.Cache, cl client.Client, ttl time.Duration, opts ...ReaperOption) *Reaper {
	r := &Reaper{cache: c, client: cl, ttl: ttl, log: logr.Discard(), now: time.Now, seen: map[types.UID]time.Time{}}
	r.interval = min(max(ttl/10, 100*time.Millisecond), 30*time.Second)
	for _, o := range opts {
		o(r)
	}
	return r
}

// Start sweeps until ctx ends.
func (r *Reaper) Start(ctx context.Context) error {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			r.sweep(ctx)
		}
	}
}

// sweep releases every tombstone older than the TTL.
func (r *Reaper) sweep(ctx context.Context) {
	now := r.now()
	present := map[types.UID]bool{}
	visit := func(obj client.Object, instanceID string) {
		if !sf.IsTombstone(obj) || !r.ownedNamespace(ctx, obj.GetNamespace(), instanceID) {
			return
		}
		present[obj.GetUID()] = true
		first, ok := r.seen[obj.GetUID()]
		if !ok {
			r.seen[obj.GetUID()] = now
			first = now
		}
		if now.Sub(first) < r.ttl {
			return
		}
		if err := r.release(ctx, obj); err != nil {
			r.log.Error(err, "Cannot release a tombstone; will try again", "object", client.ObjectKeyFromObject(obj))
		}
	}
	var instances osbv1alpha1.SFServiceInstanceList
	if err := r.cache.List(ctx, &instances, client.UnsafeDisableDeepCopy); err != nil {
		r.log.Error(err, "Cannot list instances")
		return
	}
	for i := range instances.Items {
		visit(&instances.Items[i], instances.Items[i].Spec.InstanceID)
	}
	var bindings osbv1alpha1.SFServiceBindingList
	if err := r.cache.List(ctx, &bindings, client.UnsafeDisableDeepCopy); err != nil {
		r.log.Error(err, "Cannot list bindings")
		return
	}
	for i := range bindings.Items {
		visit(&bindings.Items[i], bindings.Items[i].Spec.InstanceID)
	}
	for uid := range r.seen {
		if !present[uid] {
			delete(r.seen, uid)
		}
	}
}

// ownedNamespace reports whether the namespace called name is the one the
// broker created for instanceID, as the cache knows it (it holds only the
// broker's namespaces): the reaper releases only the broker's own
// tombstones, never an object a tenant wrote with the broker's finalizer
// into a namespace of its own.
func (r *Reaper) ownedNamespace(ctx context.Context, name, instanceID string) bool {
	ns := &corev1.Namespace{}
	if err := r.cache.Get(ctx, client.ObjectKey{Name: name}, ns, client.UnsafeDisableDeepCopy); err != nil {
		return false
	}
	return sf.OwnsNamespace(ns, instanceID)
}

// release removes the broker's finalizer from a tombstone, read fresh, and
// for an instance deletes the namespace the broker made for it.
func (r *Reaper) release(ctx context.Context, cached client.Object) error {
	obj := cached.DeepCopyObject().(client.Object)
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(cached), obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if obj.GetUID() != cached.GetUID() || !sf.IsTombstone(obj) {
		return nil
	}
	if controllerutil.RemoveFinalizer(obj, osbv1alpha1.FinalizerBroker) {
		if err := r.client.Update(ctx, obj); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	r.log.V(1).Info("Tombstone released", "object", client.ObjectKeyFromObject(obj))
	if inst, ok := obj.(*osbv1alpha1.SFServiceInstance); ok {
		return r.deleteNamespace(ctx, inst)
	}
	return nil
}

// deleteNamespace deletes the namespace of a released instance when the
// broker created it for that instance and no other instance lives there.
func (r *Reaper) deleteNamespace(ctx context.Context, inst *osbv1alpha1.SFServiceInstance) error {
	ns := &corev1.Namespace{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: inst.Namespace}, ns); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !sf.OwnsNamespace(ns, inst.Spec.InstanceID) || ns.DeletionTimestamp != nil {
		return nil
	}
	var others osbv1alpha1.SFServiceInstanceList
	if err := r.client.List(ctx, &others, client.InNamespace(inst.Namespace)); err != nil {
		return err
	}
	for i := range others.Items {
		if others.Items[i].UID != inst.UID {
			return nil
		}
	}
	uid := ns.UID
	err := r.client.Delete(ctx, ns, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	r.log.V(1).Info("Namespace of a deleted instance deleted", "namespace", inst.Namespace)
	return nil
}
