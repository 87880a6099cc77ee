package scheduling

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// usageIndex counts the SFServiceInstances of the onboarding cache per
// cluster and plan, kept current by the informer's events, so that a
// placement costs the number of clusters and plans, not a list of every
// instance (which made placing N instances cost N²). An instance counts on
// its PlacedCluster: a spec.clusterId the inter-operator did not choose or
// accept takes no room.
type usageIndex struct {
	mu     sync.Mutex
	byUID  map[types.UID]placedOn
	counts map[string]map[string]int // cluster → plan id → instances
	synced func() bool
}

// placedOn is the cluster and plan an instance is counted on.
type placedOn struct{ cluster, plan string }

// start registers the index with the informer of SFServiceInstances and
// waits until it has seen every instance the informer had.
func (u *usageIndex) start(ctx context.Context, informers cache.Informers) error {
	u.byUID, u.counts = map[types.UID]placedOn{}, map[string]map[string]int{}
	inf, err := informers.GetInformer(ctx, &osbv1alpha1.SFServiceInstance{})
	if err != nil {
		return fmt.Errorf("informer of SFServiceInstances: %w", err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { u.set(obj) },
		UpdateFunc: func(_, obj any) { u.set(obj) },
		DeleteFunc: u.remove,
	})
	if err != nil {
		return fmt.Errorf("count SFServiceInstances: %w", err)
	}
	u.synced = reg.HasSynced
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return fmt.Errorf("count SFServiceInstances: %w", context.Cause(ctx))
	}
	return nil
}

// set counts obj where it is placed now.
func (u *usageIndex) set(obj any) { u.record(obj, false) }

// remove stops counting obj, which may be a tombstone.
func (u *usageIndex) remove(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	u.record(obj, true)
}

// record drops what was counted for the instance obj and, unless it is
// deleted, counts it on the cluster it is placed on.
func (u *usageIndex) record(obj any, deleted bool) {
	inst, ok := obj.(*osbv1alpha1.SFServiceInstance)
	if !ok {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.dropLocked(inst.UID)
	cluster := inst.PlacedCluster()
	if deleted || cluster == "" {
		return
	}
	at := placedOn{cluster: cluster, plan: inst.Spec.PlanID}
	u.byUID[inst.UID] = at
	if u.counts[at.cluster] == nil {
		u.counts[at.cluster] = map[string]int{}
	}
	u.counts[at.cluster][at.plan]++
}

// dropLocked stops counting the instance with uid; u.mu must be held.
func (u *usageIndex) dropLocked(uid types.UID) {
	at, ok := u.byUID[uid]
	if !ok {
		return
	}
	delete(u.byUID, uid)
	plans := u.counts[at.cluster]
	if plans[at.plan]--; plans[at.plan] <= 0 {
		delete(plans, at.plan)
	}
	if len(plans) == 0 {
		delete(u.counts, at.cluster)
	}
}

// snapshot returns the counts per cluster and plan with the instance
// except left out, and the cluster each of uids is counted on ("" for
// none).
func (u *usageIndex) snapshot(except types.UID, uids []types.UID) (map[string]map[string]int, map[types.UID]string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string]map[string]int, len(u.counts))
	for cluster, plans := range u.counts {
		cp := make(map[string]int, len(plans))
		for plan, n := range plans {
			cp[plan] = n
		}
		out[cluster] = cp
	}
	if at, ok := u.byUID[except]; ok {
		if out[at.cluster][at.plan]--; out[at.cluster][at.plan] <= 0 {
			delete(out[at.cluster], at.plan)
		}
	}
	recorded := make(map[types.UID]string, len(uids))
	for _, uid := range uids {
		recorded[uid] = u.byUID[uid].cluster
	}
	return out, recorded
}
