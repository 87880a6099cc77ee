package replicate

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
)

func TestSisterChanged(t *testing.T) {
	ready := func(status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: resourcev1alpha1.SFClusterConditionReady, Status: status, Reason: "R"}
	}
	mirrored := metav1.Condition{Type: ConditionCatalogReplicated, Status: metav1.ConditionTrue, Reason: ReasonCatalogReplicated}
	sfc := func(generation int64, finalizers []string, conditions ...metav1.Condition) *resourcev1alpha1.SFCluster {
		return &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Generation: generation, Finalizers: finalizers}, Status: resourcev1alpha1.SFClusterStatus{Conditions: conditions}}
	}
	tests := map[string]struct {
		reason   string
		old, new *resourcev1alpha1.SFCluster
		want     bool
	}{
		"Spec":        {reason: "A new mode or kubeconfig changes what the mirror does.", old: sfc(1, nil), new: sfc(2, nil), want: true},
		"Finalizers":  {reason: "The finalizer added or removed by hand.", old: sfc(1, nil), new: sfc(1, []string{FinalizerCatalogCopies}), want: true},
		"ReadyAgain":  {reason: "The sister answers again: catch up at once.", old: sfc(1, nil, ready(metav1.ConditionFalse), mirrored), new: sfc(1, nil, ready(metav1.ConditionTrue), mirrored), want: true},
		"NotReady":    {reason: "The sister stops answering: the mirror finds out itself.", old: sfc(1, nil, ready(metav1.ConditionTrue), mirrored), new: sfc(1, nil, ready(metav1.ConditionFalse), mirrored), want: false},
		"Lost":        {reason: "A status write dropped the condition: write it again.", old: sfc(1, nil, ready(metav1.ConditionTrue), mirrored), new: sfc(1, nil, ready(metav1.ConditionTrue)), want: true},
		"OwnWrite":    {reason: "The mirror's own condition write wakes nothing.", old: sfc(1, nil, ready(metav1.ConditionTrue)), new: sfc(1, nil, ready(metav1.ConditionTrue), mirrored), want: false},
		"StatusWrite": {reason: "The status controller's counts wake nothing.", old: sfc(1, nil, ready(metav1.ConditionTrue), mirrored), new: sfc(1, nil, ready(metav1.ConditionTrue), mirrored), want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := sisterChanged().Update(event.TypedUpdateEvent[*resourcev1alpha1.SFCluster]{ObjectOld: tc.old, ObjectNew: tc.new})
			if got != tc.want {
				t.Errorf("%s\nsisterChanged() = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

func TestListed(t *testing.T) {
	tests := map[string]struct {
		reason string
		items  []string
		want   string
	}{
		"Few":  {reason: "Every item, sorted.", items: []string{"b", "a"}, want: "a; b"},
		"Many": {reason: "The first five, and how many more.", items: []string{"g", "f", "e", "d", "c", "b", "a"}, want: "a; b; c; d; e; and 2 more"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := listed(tc.items); got != tc.want {
				t.Errorf("%s\nlisted(%v) = %q, want %q", tc.reason, tc.items, got, tc.want)
			}
		})
	}
}
