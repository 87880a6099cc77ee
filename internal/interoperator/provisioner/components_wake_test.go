package provisioner

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
)

// TestClusterChangedComponents checks that instances waiting for a
// cluster's components wake when they are installed, or when why they are
// not changes: those are status changes, which other status changes do
// not do.
func TestClusterChangedComponents(t *testing.T) {
	sfc := func(status metav1.ConditionStatus) *resourcev1alpha1.SFCluster {
		c := &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "catalog", Name: "a", Generation: 1}}
		c.Spec.Components = []resourcev1alpha1.SFClusterComponent{{Name: "op"}}
		c.Status.Conditions = []metav1.Condition{{Type: resourcev1alpha1.SFClusterConditionComponentsReady, Status: status, ObservedGeneration: 1}}
		return c
	}
	p := clusterChanged()
	pending := sfc(metav1.ConditionFalse)
	pending.Status.Conditions = nil
	failed := sfc(metav1.ConditionFalse)
	failed.Status.Conditions[0].Reason = resourcev1alpha1.SFClusterReasonInstallFailed
	if !p.Update(event.TypedUpdateEvent[*resourcev1alpha1.SFCluster]{ObjectOld: pending, ObjectNew: failed}) {
		// An instance placed while the components were "not installed
		// yet" would otherwise keep saying so after the install failed.
		t.Error("components whose install failed must wake the instances that wait for them with an older reason")
	}
	if !p.Update(event.TypedUpdateEvent[*resourcev1alpha1.SFCluster]{ObjectOld: sfc(metav1.ConditionFalse), ObjectNew: sfc(metav1.ConditionTrue)}) {
		t.Error("components that got installed must wake the instances waiting for the cluster")
	}
	if p.Update(event.TypedUpdateEvent[*resourcev1alpha1.SFCluster]{ObjectOld: sfc(metav1.ConditionTrue), ObjectNew: sfc(metav1.ConditionTrue)}) {
		t.Error("a status write that leaves the components installed must not wake every instance")
	}
}
