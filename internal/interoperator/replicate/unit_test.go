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
