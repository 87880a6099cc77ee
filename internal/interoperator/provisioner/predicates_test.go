package provisioner

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
)

// TestClusterChanged checks which SFCluster events wake the instances: a
// deletion must, whether it shows as a delete event or, with a finalizer,
// first as an update that sets deletionTimestamp, so that instances waiting
// for a cluster find the one left.
func TestClusterChanged(t *testing.T) {
	sfc := func(generation int64, deleting bool, ready string) *resourcev1alpha1.SFCluster {
		c := &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "catalog", Name: "a", Generation: generation}}
		if deleting {
			now := metav1.Now()
			c.DeletionTimestamp = &now
			c.Finalizers = []string{"test"}
		}
		c.Annotations = map[string]string{"status": ready}
		return c
	}
	p := clusterChanged()
	if !p.Create(event.TypedCreateEvent[*resourcev1alpha1.SFCluster]{Object: sfc(1, false, "")}) {
		t.Error("a new SFCluster must wake the instances: it may be the one they wait for")
	}
	if !p.Delete(event.TypedDeleteEvent[*resourcev1alpha1.SFCluster]{Object: sfc(1, false, "")}) {
		t.Error("a deleted SFCluster must wake the instances: the one left may take them")
	}
	updates := map[string]struct {
		reason   string
		old, new *resourcev1alpha1.SFCluster
		want     bool
	}{
		"SpecChanged":       {"A new generation may change where instances go.", sfc(1, false, ""), sfc(2, false, ""), true},
		"DeletionStarted":   {"A deletion that a finalizer holds shows as an update setting deletionTimestamp.", sfc(1, false, ""), sfc(1, true, ""), true},
		"MetadataOnly":      {"Other metadata changes (annotations, status) do not wake every instance.", sfc(1, false, "a"), sfc(1, false, "b"), false},
		"StillBeingDeleted": {"Further updates of a cluster being deleted do not either.", sfc(1, true, "a"), sfc(1, true, "b"), false},
	}
	for name, tc := range updates {
		t.Run(name, func(t *testing.T) {
			if got := p.Update(event.TypedUpdateEvent[*resourcev1alpha1.SFCluster]{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("%s\nUpdate = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}
