// Package sourcewatch wakes the instances and bindings whose operation is
// in progress when an object their plan's sources template names changes
// on the target cluster: metadata-only informers, started on demand per
// kind and cluster, with an index from each watched object to the
// operations waiting on it; a kind that cannot be listed falls back to
// polling (docs/interoperator.md, "Differences from Service Fabrik").
package sourcewatch

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/pkg/spruntime"
)

// DefaultRetryAfter is how long a kind whose list failed is not watched
// before the next operation that names it tries again.
const DefaultRetryAfter = 5 * time.Minute

// eventBuffer is how many wake-ups wait for each controller.
const eventBuffer = 1024

// Owner is an instance or a binding waiting on sources.
type Owner struct {
	// UID identifies the object; interests are kept per UID.
	UID types.UID
	// Key is the object's namespace and name on the onboarding cluster.
	Key types.NamespacedName
	// Binding says the owner is an SFServiceBinding, not an
	// SFServiceInstance.
	Binding bool
}

// Watcher holds the source informers of the target clusters and the
// interests of the operations in progress. It is safe for concurrent use.
// Start it with the manager (it implements manager.Runnable), which stops
// every informer when it stops.
type Watcher struct {
	retryAfter time.Duration
	now        func() time.Time

	instanceEvents chan event.GenericEvent
	bindingEvents  chan event.GenericEvent

	// base bounds every informer; stop cancels it.
	base context.Context
	stop context.CancelFunc

	mu        sync.Mutex
	clusters  map[string]*target
	interests map[types.UID]*interest
}

// target is one cluster's informers, made with one client: a new
// kubeconfig (a new spruntime.Cluster) makes a new target.
type target struct {
	cluster  *spruntime.Cluster
	metadata metadata.Interface
	ctx      context.Context
	cancel   context.CancelFunc
	kinds    map[schema.GroupVersionResource]*kind
	// waiting maps each object some operation waits on to the UIDs of
	// those operations.
	waiting map[objectKey]map[types.UID]struct{}
}

// kind is the informer of one resource on one cluster.
type kind struct {
	informer toolscache.SharedIndexInformer
	cancel   context.CancelFunc
	// failed is when its list was refused; zero while it works.
	failed time.Time
}

// objectKey is one object on one cluster.
type objectKey struct {
	resource  schema.GroupVersionResource
	namespace string
	name      string
}

// interest is what one operation waits on.
type interest struct {
	owner   Owner
	cluster string
	keys    []objectKey
}

// Option configures a Watcher.
type Option func(*Watcher)

// WithRetryAfter sets how long a kind whose list failed is left alone
// (DefaultRetryAfter).
func WithRetryAfter(d time.Duration) Option {
	return func(w *Watcher) {
		if d > 0 {
			w.retryAfter = d
		}
	}
}

// New returns a Watcher. Add it to the manager and its Sources to the
// instance and binding controllers.
func New(opts ...Option) *Watcher {
	base, stop := context.WithCancel(context.Background())
	w := &Watcher{
		retryAfter:     DefaultRetryAfter,
		now:            time.Now,
		instanceEvents: make(chan event.GenericEvent, eventBuffer),
		bindingEvents:  make(chan event.GenericEvent, eventBuffer),
		base:           base,
		stop:           stop,
		clusters:       map[string]*target{},
		interests:      map[types.UID]*interest{},
	}
	for _, o := range opts {
		o(w)
	}
	return w
}

// InstanceEvents is the source of the instance controller: an instance
// for every change of a source it waits on. Call it once.
func (w *Watcher) InstanceEvents() source.Source {
	return source.Channel(w.instanceEvents, &handler.EnqueueRequestForObject{})
}

// BindingEvents is the source of the binding controller. Call it once.
func (w *Watcher) BindingEvents() source.Source {
	return source.Channel(w.bindingEvents, &handler.EnqueueRequestForObject{})
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: the
// informers only serve the controllers of the same process.
func (w *Watcher) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable: it stops every informer when ctx
// ends.
func (w *Watcher) Start(ctx context.Context) error {
	<-ctx.Done()
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, t := range w.clusters {
		t.cancel()
		delete(w.clusters, name)
	}
	return nil
}

// Watch records that owner waits on refs on cluster c (replacing what it
// waited on before, on any cluster) and starts the informers of their
// kinds that do not run yet. Each ref's namespace must be resolved: set for
// namespaced kinds, empty for cluster-scoped ones. It reports whether every
// ref is watched now: its kind's informer has synced. With no refs
// nothing is watched.
//
// Call it before the sources are read, so that a change between the read
// and the registration is not missed.
func (w *Watcher) Watch(c *spruntime.Cluster, owner Owner, refs []osbv1alpha1.Source) bool {
	if c == nil || owner.UID == "" {
		return false
	}
	if len(refs) == 0 {
		w.Forget(owner.UID)
		return false
	}
	// The RESTMapper may ask the API server; not under the lock.
	watched := true
	keys := make([]objectKey, 0, len(refs))
	for _, ref := range refs {
		gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
		mapping, err := c.Client().RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			// A kind the cluster does not serve (yet): polled.
			watched = false
			continue
		}
		keys = append(keys, objectKey{resource: mapping.Resource, namespace: ref.Namespace, name: ref.Name})
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetLocked(owner.UID)
	if w.base.Err() != nil {
		return false
	}
	t, err := w.targetLocked(c)
	if err != nil {
		logf.Log.WithName("sourcewatch").Error(err, "Cannot watch the sources on a cluster; they are polled", "sfcluster", c.Name())
		return false
	}
	for _, k := range keys {
		uids := t.waiting[k]
		if uids == nil {
			uids = map[types.UID]struct{}{}
			t.waiting[k] = uids
		}
		uids[owner.UID] = struct{}{}
		kw := w.kindLocked(c.Name(), t, k.resource)
		if kw == nil || !kw.failed.IsZero() || !kw.informer.HasSynced() {
			watched = false
		}
	}
	w.interests[owner.UID] = &interest{owner: owner, cluster: c.Name(), keys: keys}
	return watched
}

// Forget drops what the operation of uid waited on: it ended.
func (w *Watcher) Forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetLocked(uid)
}

// ForgetCluster stops the informers of the SFCluster name: it left.
func (w *Watcher) ForgetCluster(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t := w.clusters[name]; t != nil {
		t.cancel()
		delete(w.clusters, name)
	}
}

// Informers returns how many informers run on the SFCluster name (those
// given up after a failed list are not counted).
func (w *Watcher) Informers(name string) int { return w.countKinds(name, false) }

// Refused returns how many kinds on the SFCluster name were given up
// because their list was refused, and are polled.
func (w *Watcher) Refused(name string) int { return w.countKinds(name, true) }

// countKinds counts the kinds on the SFCluster name that were given up
// (refused) or not.
func (w *Watcher) countKinds(name string, refused bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	if t := w.clusters[name]; t != nil {
		for _, k := range t.kinds {
			if k.failed.IsZero() != refused {
				n++
			}
		}
	}
	return n
}

// Waiting returns how many operations wait on sources.
func (w *Watcher) Waiting() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.interests)
}

func (w *Watcher) forgetLocked(uid types.UID) {
	in := w.interests[uid]
	if in == nil {
		return
	}
	delete(w.interests, uid)
	t := w.clusters[in.cluster]
	if t == nil {
		return
	}
	for _, k := range in.keys {
		if uids := t.waiting[k]; uids != nil {
			delete(uids, uid)
			if len(uids) == 0 {
				delete(t.waiting, k)
			}
		}
	}
}

// targetLocked returns the informers of c's cluster, replacing those made
// with an older client of the same name.
func (w *Watcher) targetLocked(c *spruntime.Cluster) (*target, error) {
	name := c.Name()
	if t := w.clusters[name]; t != nil {
		if t.cluster == c {
			return t, nil
		}
		t.cancel()
		delete(w.clusters, name)
	}
	// The config the cluster hands out has no request timeout, so that
	// watches are not cut.
	mc, err := metadata.NewForConfig(c.RESTConfig())
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	ctx, cancel := context.WithCancel(w.base)
	t := &target{
		cluster:  c,
		metadata: mc,
		ctx:      ctx,
		cancel:   cancel,
		kinds:    map[schema.GroupVersionResource]*kind{},
		waiting:  map[objectKey]map[types.UID]struct{}{},
	}
	w.clusters[name] = t
	return t, nil
}

// kindLocked returns the informer of resource on t, starting it when it
// does not run and was not given up within retryAfter. It is nil while
// given up.
func (w *Watcher) kindLocked(cluster string, t *target, resource schema.GroupVersionResource) *kind {
	if k := t.kinds[resource]; k != nil {
		if k.failed.IsZero() {
			return k
		}
		if w.now().Sub(k.failed) < w.retryAfter {
			return nil
		}
		delete(t.kinds, resource)
	}
	inf := metadatainformer.NewFilteredMetadataInformer(t.metadata, resource, metav1.NamespaceAll, 0, toolscache.Indexers{}, nil).Informer()
	ctx, cancel := context.WithCancel(t.ctx)
	k := &kind{informer: inf, cancel: cancel}
	// Only the identity of an object is kept: events are matched by
	// namespace and name, and the store holds every object of the kind.
	_ = inf.SetTransform(identityOnly)
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *toolscache.Reflector, err error) {
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
			w.giveUp(cluster, t, resource, k, err)
			return
		}
		toolscache.DefaultWatchErrorHandler(ctx, r, err)
	})
	notify := func(obj any) { w.changed(t, resource, obj) }
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	}); err != nil {
		cancel()
		return nil
	}
	t.kinds[resource] = k
	go inf.RunWithContext(ctx)
	return k
}

// giveUp stops the informer k of resource, whose list was refused, and
// wakes the operations waiting on objects of that kind: they poll now.
func (w *Watcher) giveUp(cluster string, t *target, resource schema.GroupVersionResource, k *kind, err error) {
	w.mu.Lock()
	if !k.failed.IsZero() {
		w.mu.Unlock()
		return
	}
	k.failed = w.now()
	k.cancel()
	var owners []Owner
	for key, uids := range t.waiting {
		if key.resource != resource {
			continue
		}
		for uid := range uids {
			if in := w.interests[uid]; in != nil {
				owners = append(owners, in.owner)
			}
		}
	}
	w.mu.Unlock()
	logf.Log.WithName("sourcewatch").Info("Cannot watch a kind of source; its sources are polled",
		"sfcluster", cluster, "resource", resource.String(), "retryAfter", w.retryAfter, "reason", err.Error())
	w.wake(t.ctx, owners)
}

// changed wakes the operations waiting on obj, an object of resource on t.
func (w *Watcher) changed(t *target, resource schema.GroupVersionResource, obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	key := objectKey{resource: resource, namespace: m.GetNamespace(), name: m.GetName()}
	w.mu.Lock()
	var owners []Owner
	for uid := range t.waiting[key] {
		if in := w.interests[uid]; in != nil {
			owners = append(owners, in.owner)
		}
	}
	w.mu.Unlock()
	w.wake(t.ctx, owners)
}

// wake sends an event for each owner to its controller.
func (w *Watcher) wake(ctx context.Context, owners []Owner) {
	for _, o := range owners {
		var obj client.Object = &osbv1alpha1.SFServiceInstance{}
		events := w.instanceEvents
		if o.Binding {
			obj, events = &osbv1alpha1.SFServiceBinding{}, w.bindingEvents
		}
		obj.SetNamespace(o.Key.Namespace)
		obj.SetName(o.Key.Name)
		select {
		case events <- event.GenericEvent{Object: obj}:
		case <-ctx.Done():
			return
		}
	}
}

// identityOnly keeps, of an object's metadata, what identifies it.
func identityOnly(obj any) (any, error) {
	p, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       p.Namespace,
			Name:            p.Name,
			UID:             p.UID,
			ResourceVersion: p.ResourceVersion,
		},
	}, nil
}
