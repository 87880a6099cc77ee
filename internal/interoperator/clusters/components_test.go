package clusters

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	resourcev1alpha1 "github.com/marketplane/marketplane/api/resource/v1alpha1"
)

// TestComponentsPending checks when the components of an SFCluster keep
// instances away from it: the scheduler and the instance controller's
// wake-up both rest on it.
func TestComponentsPending(t *testing.T) {
	sfc := func(components int, cond *metav1.Condition) *resourcev1alpha1.SFCluster {
		c := &resourcev1alpha1.SFCluster{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
		for range components {
			c.Spec.Components = append(c.Spec.Components, resourcev1alpha1.SFClusterComponent{Name: "op"})
		}
		if cond != nil {
			cond.Type = resourcev1alpha1.SFClusterConditionComponentsReady
			c.Status.Conditions = []metav1.Condition{*cond}
		}
		return c
	}
	cases := map[string]struct {
		reason  string
		cluster *resourcev1alpha1.SFCluster
		pending bool
	}{
		"NoComponents":      {"A cluster that needs nothing installed takes instances.", sfc(0, nil), false},
		"NotLookedAtYet":    {"Components without a condition are not installed yet.", sfc(1, nil), true},
		"Installed":         {"Installed for the current generation.", sfc(1, &metav1.Condition{Status: metav1.ConditionTrue, Reason: "Installed", ObservedGeneration: 2}), false},
		"InstalledEarlier":  {"Installed for an older spec: the new components may not be there.", sfc(1, &metav1.Condition{Status: metav1.ConditionTrue, Reason: "Installed", ObservedGeneration: 1}), true},
		"Failed":            {"A component that failed keeps instances away.", sfc(1, &metav1.Condition{Status: metav1.ConditionFalse, Reason: "InstallFailed", ObservedGeneration: 2}), true},
		"RemovedComponents": {"Components being removed do not keep instances away.", sfc(0, &metav1.Condition{Status: metav1.ConditionFalse, Reason: "Removing", ObservedGeneration: 2}), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ComponentsPending(tc.cluster) != ""; got != tc.pending {
				t.Errorf("%s\nComponentsPending = %q, want pending %v", tc.reason, ComponentsPending(tc.cluster), tc.pending)
			}
		})
	}
}
