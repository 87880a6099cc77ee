package scheduling

import (
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// instanceOn returns an instance the inter-operator placed on cluster
// (its Scheduled condition is True).
func instanceOn(uid, cluster, plan string) *osbv1alpha1.SFServiceInstance {
	inst := pinnedTo(uid, cluster, plan)
	inst.Status.Conditions = []metav1.Condition{{Type: osbv1alpha1.ConditionScheduled, Status: metav1.ConditionTrue, Reason: "Scheduled"}}
	return inst
}

// pinnedTo returns an instance whose spec.clusterId names cluster, which
// the inter-operator has not accepted.
func pinnedTo(uid, cluster, plan string) *osbv1alpha1.SFServiceInstance {
	return &osbv1alpha1.SFServiceInstance{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)},
		Spec:       osbv1alpha1.SFServiceInstanceSpec{ClusterID: cluster, PlanID: plan},
	}
}

// TestUsageIndex follows instances through the events an informer sends:
// placed, moved, unscheduled, pinned by their creator but not accepted,
// refused, deleted (also as a tombstone), and checks the counts and the
// recorded clusters a placement sees.
func TestUsageIndex(t *testing.T) {
	u := &usageIndex{byUID: map[types.UID]placedOn{}, counts: map[string]map[string]int{}}
	u.set(instanceOn("a", "w1", "small"))
	u.set(instanceOn("b", "w1", "small"))
	u.set(instanceOn("c", "w1", "large"))
	u.set(instanceOn("d", "w2", "small"))
	u.set(instanceOn("e", "", "small"))   // not placed yet
	u.set(instanceOn("b", "w1", "small")) // an update that moves nothing
	u.set(pinnedTo("f", "w1", "large"))   // a creator's clusterId, not accepted (yet)
	refused := pinnedTo("g", "w2", "large")
	refused.Status.Conditions = []metav1.Condition{{Type: osbv1alpha1.ConditionScheduled, Status: metav1.ConditionFalse, Reason: "ClusterNotAllowed"}}
	u.set(refused)

	want := map[string]map[string]int{"w1": {"small": 2, "large": 1}, "w2": {"small": 1}}
	check := func(what string, except types.UID, want map[string]map[string]int) {
		t.Helper()
		got, _ := u.snapshot(except, nil)
		if len(got) != len(want) {
			t.Fatalf("%s: counts %v; want %v", what, got, want)
		}
		for cluster, plans := range want {
			if !maps.Equal(got[cluster], plans) {
				t.Fatalf("%s: counts %v; want %v", what, got, want)
			}
		}
	}
	check("placed", "", want)
	check("placing a itself", "a", map[string]map[string]int{"w1": {"small": 1, "large": 1}, "w2": {"small": 1}})

	u.set(instanceOn("a", "w2", "small")) // moved
	u.set(instanceOn("e", "w2", "large")) // placed
	check("moved and placed", "", map[string]map[string]int{"w1": {"small": 1, "large": 1}, "w2": {"small": 2, "large": 1}})
	u.set(instanceOn("f", "w1", "large")) // the pin accepted
	check("pin accepted", "", map[string]map[string]int{"w1": {"small": 1, "large": 2}, "w2": {"small": 2, "large": 1}})
	u.remove(instanceOn("f", "w1", "large"))

	u.remove(instanceOn("c", "w1", "large"))
	u.remove(toolscache.DeletedFinalStateUnknown{Key: "ns/d", Obj: instanceOn("d", "w2", "small")})
	u.remove(instanceOn("never-seen", "w1", "small"))
	check("deleted", "", map[string]map[string]int{"w1": {"small": 1}, "w2": {"small": 1, "large": 1}})

	_, recorded := u.snapshot("", []types.UID{"a", "c", "g", "never-seen"})
	if want := map[types.UID]string{"a": "w2", "c": "", "g": "", "never-seen": ""}; !maps.Equal(recorded, want) {
		t.Errorf("recorded clusters %v; want %v", recorded, want)
	}
}

// TestTimes checks that a plan's requests are scaled by its instances.
func TestTimes(t *testing.T) {
	r := times(list("cpu", "250m", "memory", "1Gi"), 3)
	if got := r.Cpu().String(); got != "750m" {
		t.Errorf("cpu × 3 = %s; want 750m", got)
	}
	if got := r.Memory().String(); got != "3Gi" {
		t.Errorf("memory × 3 = %s; want 3Gi", got)
	}
}
