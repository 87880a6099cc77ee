package provisioner

import (
	"context"
	"reflect"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// freshClient is a client that reads its own writes. Reads of the kinds it
// tracks come from the cache, unless the cache holds another
// resourceVersion than the one the client's last write of that object
// returned: then the cache is behind (or someone wrote since), and the
// object is read from the API server instead.
//
// Why: a reconcile that changes an instance's spec (spec.clusterId) is
// followed at once by another reconcile, triggered by that change. Without
// this, that reconcile reads the instance from a cache that has not yet
// seen the status the first one wrote, takes the operation for unfinished
// and writes again. With it, the second reconcile sees the status and has
// nothing to do, so that provisioning an instance costs the writes it
// needs and no more.
type freshClient struct {
	client.Client
	live    client.Reader
	tracked map[reflect.Type]bool

	mu     sync.Mutex
	writes map[writeKey]written
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

func newFreshClient(c client.Client, live client.Reader, tracked ...client.Object) *freshClient {
	f := &freshClient{Client: c, live: live, tracked: map[reflect.Type]bool{}, writes: map[writeKey]written{}}
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
	if obj.GetResourceVersion() == w.resourceVersion {
		// The cache has caught up.
		f.forget(wk)
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
