package catalog

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/go-logr/logr"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// Watcher keeps the catalog snapshot of one namespace current. Informers of
// the given cache report every change of an SFService or SFPlan; changes
// that arrive while a rebuild runs are coalesced into one more rebuild.
type Watcher struct {
	cache     cache.Cache
	namespace string
	log       logr.Logger

	current atomic.Pointer[Snapshot]
	synced  atomic.Bool
	changed chan struct{}
	built   chan struct{}
}

// WatcherOption configures a Watcher.
type WatcherOption func(*Watcher)

// WithLogger sets the logger that reports rebuilds and left-out objects.
func WithLogger(l logr.Logger) WatcherOption { return func(w *Watcher) { w.log = l } }

// NewWatcher returns a Watcher reading SFServices and SFPlans of namespace
// from c. The caller starts c; Start waits for it to sync.
func NewWatcher(c cache.Cache, namespace string, opts ...WatcherOption) *Watcher {
	w := &Watcher{
		cache:     c,
		namespace: namespace,
		log:       logr.Discard(),
		changed:   make(chan struct{}, 1),
		built:     make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(w)
	}
	w.current.Store(Empty())
	return w
}

// Snapshot returns the current catalog. It is never nil: before the first
// build it is the empty catalog.
func (w *Watcher) Snapshot() *Snapshot { return w.current.Load() }

// Synced reports whether the catalog has been built from a synced cache.
func (w *Watcher) Synced() bool { return w.synced.Load() }

// Rebuilt returns a channel that receives after every rebuild (at most one
// pending signal is kept). Tests use it to wait for a catalog change.
func (w *Watcher) Rebuilt() <-chan struct{} { return w.built }

// Start registers the event handlers, waits for the cache to sync, builds
// the first snapshot and then rebuilds on every change until ctx ends.
func (w *Watcher) Start(ctx context.Context) error {
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.trigger() },
		UpdateFunc: func(any, any) { w.trigger() },
		DeleteFunc: func(any) { w.trigger() },
	}
	for _, obj := range []client.Object{&osbv1alpha1.SFService{}, &osbv1alpha1.SFPlan{}} {
		inf, err := w.cache.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("catalog informer for %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("catalog event handler for %T: %w", obj, err)
		}
	}
	if !w.cache.WaitForCacheSync(ctx) {
		return fmt.Errorf("catalog cache did not sync: %w", ctx.Err())
	}
	if err := w.rebuild(ctx); err != nil {
		return err
	}
	w.synced.Store(true)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.changed:
			if err := w.rebuild(ctx); err != nil {
				// The cache is in memory; a list fails only on a
				// programming error. Keep serving the last snapshot.
				w.log.Error(err, "Cannot rebuild the catalog; serving the previous one")
			}
		}
	}
}

func (w *Watcher) trigger() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *Watcher) rebuild(ctx context.Context) error {
	var services osbv1alpha1.SFServiceList
	if err := w.cache.List(ctx, &services, client.InNamespace(w.namespace)); err != nil {
		return fmt.Errorf("list SFServices: %w", err)
	}
	var plans osbv1alpha1.SFPlanList
	if err := w.cache.List(ctx, &plans, client.InNamespace(w.namespace)); err != nil {
		return fmt.Errorf("list SFPlans: %w", err)
	}
	snap := Build(services.Items, plans.Items)
	prev := w.current.Swap(snap)
	if prev == nil || prev.ETag != snap.ETag {
		nsvc, nplan := snap.Len()
		w.log.Info("Catalog changed", "services", nsvc, "plans", nplan, "etag", snap.ETag)
		for _, p := range snap.Problems {
			w.log.Info("Catalog entry left out", "problem", p)
		}
	}
	select {
	case w.built <- struct{}{}:
	default:
	}
	return nil
}
