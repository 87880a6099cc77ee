package catalog

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/go-logr/logr"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
)

// OfferingWatcher keeps the code-based part of the catalog current from
// the Offerings of the onboarding cluster (written by the marketplace
// controller). Changes that arrive while a rebuild runs are coalesced into
// one more rebuild.
type OfferingWatcher struct {
	cache cache.Cache
	log   logr.Logger

	current atomic.Pointer[CodeSnapshot]
	synced  atomic.Bool
	changed chan struct{}
}

// NewOfferingWatcher returns an OfferingWatcher reading Offerings from c
// (a cache of the onboarding cluster). The caller starts c.
func NewOfferingWatcher(c cache.Cache, log logr.Logger) *OfferingWatcher {
	w := &OfferingWatcher{cache: c, log: log, changed: make(chan struct{}, 1)}
	w.current.Store(BuildCode(nil))
	return w
}

// Snapshot returns the current code-based offerings; never nil.
func (w *OfferingWatcher) Snapshot() *CodeSnapshot { return w.current.Load() }

// Synced reports whether the snapshot was built from a synced cache.
func (w *OfferingWatcher) Synced() bool { return w.synced.Load() }

// Start registers the event handler, waits for the cache, builds the first
// snapshot and rebuilds on every change until ctx ends.
func (w *OfferingWatcher) Start(ctx context.Context) error {
	inf, err := w.cache.GetInformer(ctx, &marketplacev1alpha1.Offering{})
	if err != nil {
		return fmt.Errorf("offering informer: %w", err)
	}
	trigger := func() {
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { trigger() }, UpdateFunc: func(any, any) { trigger() }, DeleteFunc: func(any) { trigger() },
	}); err != nil {
		return fmt.Errorf("offering event handler: %w", err)
	}
	if !w.cache.WaitForCacheSync(ctx) {
		return fmt.Errorf("offering cache did not sync: %w", ctx.Err())
	}
	w.rebuild(ctx)
	w.synced.Store(true)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.changed:
			w.rebuild(ctx)
		}
	}
}

func (w *OfferingWatcher) rebuild(ctx context.Context) {
	var list marketplacev1alpha1.OfferingList
	if err := w.cache.List(ctx, &list); err != nil {
		w.log.Error(err, "Cannot list Offerings; serving the previous code-based offerings")
		return
	}
	snap := BuildCode(list.Items)
	w.current.Store(snap)
	w.log.V(1).Info("Code-based offerings rebuilt", "services", len(snap.services), "plans", len(snap.plans), "problems", len(snap.Problems))
}
