package replicate

import (
	"testing"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

func TestProcessed(t *testing.T) {
	tests := map[string]struct {
		reason               string
		observed, generation int64
		state                osbv1alpha1.State
		want                 bool
	}{
		"NotLookedAt":   {reason: "A new replica has no status.", observed: 0, generation: 1, state: "", want: false},
		"OldGeneration": {reason: "The status is of the previous spec.", observed: 1, generation: 2, state: osbv1alpha1.StateSucceeded, want: false},
		"Queued":        {reason: "A restarted operation is not started yet.", observed: 2, generation: 2, state: osbv1alpha1.StateInQueue, want: false},
		"InProgress":    {reason: "The sister works on the current spec.", observed: 2, generation: 2, state: osbv1alpha1.StateInProgress, want: true},
		"Failed":        {reason: "The sister finished the current spec.", observed: 2, generation: 2, state: osbv1alpha1.StateFailed, want: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := processed(tc.observed, tc.generation, tc.state); got != tc.want {
				t.Errorf("%s\nprocessed(%d, %d, %q) = %v, want %v", tc.reason, tc.observed, tc.generation, tc.state, got, tc.want)
			}
		})
	}
}

// TestSisterPlanSpec checks that the sister's copy of a plan has every
// template but the clusterSelector, and that the master's plan is left as
// it is.
func TestSisterPlanSpec(t *testing.T) {
	plan := &osbv1alpha1.SFPlan{Spec: osbv1alpha1.SFPlanSpec{Templates: []osbv1alpha1.TemplateSpec{
		{Action: osbv1alpha1.ActionProvision, Content: "p"},
		{Action: osbv1alpha1.ActionClusterSelector, Content: "tier=gold"},
		{Action: osbv1alpha1.ActionStatus, Content: "s"},
	}}}
	got := sisterPlanSpec(plan)
	if len(got.Templates) != 2 || got.Templates[0].Action != osbv1alpha1.ActionProvision || got.Templates[1].Action != osbv1alpha1.ActionStatus {
		t.Errorf("the sister's templates are %+v; want provision and status, without the clusterSelector", got.Templates)
	}
	if len(plan.Spec.Templates) != 3 || plan.Spec.Templates[1].Action != osbv1alpha1.ActionClusterSelector {
		t.Errorf("the master's plan changed: %+v", plan.Spec.Templates)
	}
}
