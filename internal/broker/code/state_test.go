package code

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTerminal: only the provider runtime's mark of invalid input fails an
// operation, and not MCPNotFound, which the runtime keeps reporting until
// its next reconcile although the broker's control plane exists.
func TestTerminal(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason}
	}
	cases := map[string]struct {
		reason     string
		phase      string
		conditions []metav1.Condition
		want       bool
	}{
		"InvalidInput": {reason: "phase Failed, Ready and Synced False alike", phase: "Failed", want: true,
			conditions: []metav1.Condition{cond("Ready", "False", "UnsupportedVersion"), cond("Synced", "False", "UnsupportedVersion")}},
		"MCPNotFound": {reason: "the control plane is coming up", phase: "Failed",
			conditions: []metav1.Condition{cond("Ready", "False", "MCPNotFound"), cond("Synced", "False", "MCPNotFound")}},
		"Retried": {reason: "a reconcile error is retried", phase: "Failed",
			conditions: []metav1.Condition{cond("Ready", "False", "Progressing"), cond("Synced", "False", "ReconcileError")}},
		"Progressing": {reason: "not failed", phase: "Progressing",
			conditions: []metav1.Condition{cond("Ready", "False", "UnsupportedVersion"), cond("Synced", "False", "UnsupportedVersion")}},
		"NoSynced": {reason: "without Synced the verdict is not the runtime's", phase: "Failed",
			conditions: []metav1.Condition{cond("Ready", "False", "UnsupportedVersion")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var st objectStatus
			st.Status.Phase, st.Status.Conditions = tc.phase, tc.conditions
			if got := terminal(st, &tc.conditions[0]); got != tc.want {
				t.Errorf("%s: terminal = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}
