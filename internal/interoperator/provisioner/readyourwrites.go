package provisioner

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/marketplane/marketplane/internal/notify"
)

// freshClient is a client that reads its own writes. Reads of the kinds it
// tracks come from the cache, unless the cache holds an older version than
// the one the client's last write of that object returned: then the cache
// is behind, and the read waits for it (below) or reads the object from
// the API server. A later version (someone wrote since) answers as well.
//
// Why: a reconcile that changes an instance's spec (spec.clusterId) is
// followed at once by another reconcile, triggered by that change. Without
// this, that reconcile reads the instance from a cache that has not yet
// seen the status the first one wrote, takes the operation for unfinished
// and writes again. With it, the second reconcile sees the status and has
// nothing to do, so that provisioning an instance costs the writes it
// needs and no more.
//
// A read that finds the cache behind such a write first waits, for up to
// catchUp, for the informer to bring it (watchCache registers the
// notifications; without them it does not wait): the reconcile that the
// change triggered usually runs before the event of the status write that
// followed the change arrived, and the informer brings it within
// milliseconds. Only then does it read the API server.
type freshClient struct {
	client.Client
	live    client.Reader
	tracked map[reflect.Type]bool
	catchUp time.Duration

	mu       sync.Mutex
	writes   map[writeKey]written
	watching bool
	// waiters are woken by an event of their object.
	waiters notify.Waiters[writeKey]
}

type writeKey struct {
	kind reflect.Type
	key  types.NamespacedName
}

type written struct {
	resourceVersion string
	at              time.Time
}

// writeMemory is how long a write is remembered: far longer than any cache
// lags behind.
const writeMemory = time.Minute

// cacheCatchUp bounds how long a read waits for the cache to bring a write
// of ours before it reads the API server: the informer brings it within
// milliseconds on a healthy cluster; a stalled watch must not hold a
// reconcile long.
const cacheCatchUp = time.Second

func newFreshClient(c client.Client, live client.Reader, tracked ...client.Object) *freshClient {
	f := &freshClient{Client: c, live: live, tracked: map[reflect.Type]bool{}, catchUp: cacheCatchUp, writes: map[writeKey]written{}}
	for _, o := range tracked {
		f.tracked[reflect.TypeOf(o)] = true
	}
	return f
}

func (f *freshClient) keyOf(obj client.Object) (writeKey, bool) {
	t := reflect.TypeOf(obj)
	if !f.tracked[t] {
		return writeKey{}, false
	}
	return writeKey{kind: t, key: client.ObjectKeyFromObject(obj)}, true
}

// Get implements client.Reader.
func (f *freshClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := f.Client.Get(ctx, key, obj, opts...)
	wk, tracked := f.keyOf(obj)
	if !tracked {
		return err
	}
	wk.key = key
	if err != nil {
		if apierrors.IsNotFound(err) {
			f.forget(wk)
		}
		return err
	}
	f.mu.Lock()
	w, ok := f.writes[wk]
	f.mu.Unlock()
	if !ok {
		return nil
	}
	if f.caughtUp(wk, obj, w) || f.awaitCache(ctx, key, obj, wk, w, opts...) {
		return nil
	}
	if err := f.live.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if obj.GetResourceVersion() != w.resourceVersion {
		// Someone wrote after us; the write is of no more use.
		f.forget(wk)
	}
	return nil
}

// caughtUp reports whether obj, read from the cache, is the version our
// write w returned or a later one (someone wrote after us; it holds our
// write too), and then forgets w.
func (f *freshClient) caughtUp(wk writeKey, obj client.Object, w written) bool {
	rv := obj.GetResourceVersion()
	if rv != w.resourceVersion {
		c, err := resourceversion.CompareResourceVersion(rv, w.resourceVersion)
		if err != nil || c < 0 {
			return false
		}
	}
	f.forget(wk)
	return true
}

// awaitCache waits, for up to f.catchUp, until the cache holds the write w
// of the object at key, reading it into obj, and reports whether it came.
// Without the informers' notifications (watchCache) it does not wait.
func (f *freshClient) awaitCache(ctx context.Context, key client.ObjectKey, obj client.Object, wk writeKey, w written, opts ...client.GetOption) bool {
	f.mu.Lock()
	watching := f.watching
	f.mu.Unlock()
	if !watching || f.catchUp <= 0 {
		return false
	}
	var err error
	caught := f.waiters.Await(ctx, wk, f.catchUp, func() bool {
		err = f.Client.Get(ctx, key, obj, opts...)
		return err != nil || f.caughtUp(wk, obj, w)
	})
	return caught && err == nil
}

// changed wakes the reads waiting for an event of o, which the cache now
// holds (or no longer holds).
func (f *freshClient) changed(o any) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	obj, ok := o.(client.Object)
	if !ok {
		return
	}
	if wk, ok := f.keyOf(obj); ok {
		f.waiters.Wake(wk)
	}
}

// watchCache registers, with the informers of the cache that f's client
// reads, the notifications that let a read wait for the cache (objs are
// the tracked kinds). The informers call them after the cache changed.
func (f *freshClient) watchCache(ctx context.Context, informers cache.Informers, objs ...client.Object) error {
	for _, obj := range objs {
		inf, err := informers.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("informer of %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    f.changed,
			UpdateFunc: func(_, o any) { f.changed(o) },
			DeleteFunc: f.changed,
		}); err != nil {
			return fmt.Errorf("notifications of %T: %w", obj, err)
		}
	}
	f.mu.Lock()
	f.watching = true
	f.mu.Unlock()
	return nil
}

// remember records the resourceVersion a write of obj returned.
func (f *freshClient) remember(obj client.Object) {
	wk, ok := f.keyOf(obj)
	if !ok || obj.GetResourceVersion() == "" {
		return
	}
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes[wk] = written{resourceVersion: obj.GetResourceVersion(), at: now}
	if len(f.writes) > 1024 {
		for k, w := range f.writes {
			if now.Sub(w.at) > writeMemory {
				delete(f.writes, k)
			}
		}
	}
}

func (f *freshClient) forget(wk writeKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.writes, wk)
}

// Create implements client.Writer.
func (f *freshClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := f.Client.Create(ctx, obj, opts...)
	if err == nil {
		f.remember(obj)
	}
	return err
}

// Update implements client.Writer.
func (f *freshClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := f.Client.Update(ctx, obj, opts...)
	if err == nil {
		f.remember(obj)
	}
	return err
}

// Patch implements client.Writer.
func (f *freshClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	err := f.Client.Patch(ctx, obj, patch, opts...)
	if err == nil {
		f.remember(obj)
	}
	return err
}

// Status implements client.StatusClient.
func (f *freshClient) Status() client.SubResourceWriter {
	return &freshStatus{SubResourceWriter: f.Client.Status(), f: f}
}

type freshStatus struct {
	client.SubResourceWriter
	f *freshClient
}

// Update implements client.SubResourceWriter.
func (s *freshStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	err := s.SubResourceWriter.Update(ctx, obj, opts...)
	if err == nil {
		s.f.remember(obj)
	}
	return err
}

// Patch implements client.SubResourceWriter.
func (s *freshStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	err := s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	if err == nil {
		s.f.remember(obj)
	}
	return err
}

// hookedManager hands a reconciler built by the provider runtime the
// freshClient instead of the manager's client, and keeps the controllers
// the runtime adds, so that watches the runtime does not know of (SFPlans,
// SFClusters, instances for bindings) can be added to them.
type hookedManager struct {
	ctrl.Manager
	client      client.Client
	controllers []controller.Controller
}

// GetClient implements manager.Manager.
func (m *hookedManager) GetClient() client.Client { return m.client }

// Add implements manager.Manager.
func (m *hookedManager) Add(r manager.Runnable) error {
	if c, ok := r.(controller.Controller); ok {
		m.controllers = append(m.controllers, c)
	}
	return m.Manager.Add(r)
}
