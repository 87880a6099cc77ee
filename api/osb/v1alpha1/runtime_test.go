/*
Copyright 2026 The Marketplane Authors.
*/

package v1alpha1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/pkg/spruntime"
)

// The provider runtime drives instances and bindings.
var (
	_ spruntime.API = &SFServiceInstance{}
	_ spruntime.API = &SFServiceBinding{}
)

func TestRuntimeAccessors(t *testing.T) {
	type status struct {
		Conditions         []metav1.Condition
		Phase              string
		ObservedGeneration int64
	}
	want := status{
		Conditions:         []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Test"}},
		Phase:              string(spruntime.PhaseReady),
		ObservedGeneration: 7,
	}
	tests := map[string]struct {
		reason string
		obj    spruntime.API
	}{
		"SFServiceInstance": {
			reason: "The runtime's accessors read and write the instance's status fields.",
			obj:    &SFServiceInstance{},
		},
		"SFServiceBinding": {
			reason: "The runtime's accessors read and write the binding's status fields.",
			obj:    &SFServiceBinding{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			*tc.obj.GetConditions() = append(*tc.obj.GetConditions(), want.Conditions...)
			tc.obj.SetPhase(spruntime.PhaseReady)
			tc.obj.SetObservedGeneration(7)
			var got status
			switch o := tc.obj.(type) {
			case *SFServiceInstance:
				got = status{o.Status.Conditions, o.Status.Phase, o.Status.ObservedGeneration}
			case *SFServiceBinding:
				got = status{o.Status.Conditions, o.Status.Phase, o.Status.ObservedGeneration}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
			if p := tc.obj.GetPhase(); p != spruntime.PhaseReady {
				t.Errorf("%s\nGetPhase() = %q, want %q", tc.reason, p, spruntime.PhaseReady)
			}
		})
	}
}
