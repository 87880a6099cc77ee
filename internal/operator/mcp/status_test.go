package mcp

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
)

func TestSummarize(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason}
	}
	type want struct {
		phase, ready, allAccess string // "Status/Reason"
	}
	cases := map[string]struct {
		reason     string
		conditions []metav1.Condition
		want       want
	}{
		"NothingYet": {
			reason: "Without a ClusterRequestReady condition the MCP waits for its cluster.",
			want:   want{phase: common.StatusPhaseProgressing, ready: "False/ClusterRequestPending", allAccess: "True/AllAccessReady"},
		},
		"ClusterPending": {
			reason: "A pending ClusterRequest keeps the MCP progressing.",
			conditions: []metav1.Condition{
				cond(corev2alpha1.ConditionClusterRequestReady, metav1.ConditionFalse, string(ReasonClusterRequestPending)),
			},
			want: want{phase: common.StatusPhaseProgressing, ready: "False/ClusterRequestPending", allAccess: "True/AllAccessReady"},
		},
		"ClusterDenied": {
			reason: "A denied ClusterRequest, whatever its own reason, is ClusterRequestDenied on Ready.",
			conditions: []metav1.Condition{
				cond(corev2alpha1.ConditionClusterRequestReady, metav1.ConditionFalse, "NoMatchingCluster"),
			},
			want: want{phase: common.StatusPhaseProgressing, ready: "False/ClusterRequestDenied", allAccess: "True/AllAccessReady"},
		},
		"AccessMissing": {
			reason: "A granted cluster with an access not ready is not Ready.",
			conditions: []metav1.Condition{
				cond(corev2alpha1.ConditionClusterRequestReady, metav1.ConditionTrue, string(ReasonClusterRequestGranted)),
				cond(corev2alpha1.ConditionPrefixAccessReady+"ci", metav1.ConditionTrue, string(ReasonAccessReady)),
				cond(corev2alpha1.ConditionPrefixAccessReady+"sso", metav1.ConditionFalse, string(ReasonOIDCNotSupported)),
			},
			want: want{phase: common.StatusPhaseProgressing, ready: "False/AccessNotReady", allAccess: "False/AccessNotReady"},
		},
		"AllReady": {
			reason: "A granted cluster with every access ready is Ready.",
			conditions: []metav1.Condition{
				cond(corev2alpha1.ConditionClusterRequestReady, metav1.ConditionTrue, string(ReasonClusterRequestGranted)),
				cond(corev2alpha1.ConditionPrefixAccessReady+"ci", metav1.ConditionTrue, string(ReasonAccessReady)),
			},
			want: want{phase: common.StatusPhaseReady, ready: "True/Ready", allAccess: "True/AllAccessReady"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := &corev2alpha1.ManagedControlPlane{}
			m.Status.Conditions = tc.conditions
			summarize(m)
			got := want{phase: m.Status.Phase}
			for _, c := range m.Status.Conditions {
				switch c.Type {
				case common.ConditionTypeReady:
					got.ready = string(c.Status) + "/" + c.Reason
				case corev2alpha1.ConditionAllAccessReady:
					got.allAccess = string(c.Status) + "/" + c.Reason
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nsummarize (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestTransitions(t *testing.T) {
	c := func(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
	}
	cases := map[string]struct {
		reason      string
		before, now []metav1.Condition
		want        []string
	}{
		"New": {
			reason: "A new condition is a transition.",
			now:    []metav1.Condition{c("Ready", metav1.ConditionFalse, "A", "")},
			want:   []string{"Ready"},
		},
		"StatusChanged": {
			reason: "A changed status is a transition.",
			before: []metav1.Condition{c("Ready", metav1.ConditionFalse, "A", "")},
			now:    []metav1.Condition{c("Ready", metav1.ConditionTrue, "A", "")},
			want:   []string{"Ready"},
		},
		"ReasonChanged": {
			reason: "A changed reason is a transition.",
			before: []metav1.Condition{c("Ready", metav1.ConditionFalse, "A", "")},
			now:    []metav1.Condition{c("Ready", metav1.ConditionFalse, "B", "")},
			want:   []string{"Ready"},
		},
		"MessageOnly": {
			reason: "A changed message alone is not worth an event.",
			before: []metav1.Condition{c("Ready", metav1.ConditionFalse, "A", "x")},
			now:    []metav1.Condition{c("Ready", metav1.ConditionFalse, "A", "y")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, c := range transitions(tc.before, tc.now) {
				got = append(got, c.Type)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ntransitions (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
