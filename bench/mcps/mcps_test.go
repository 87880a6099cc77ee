package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
)

// TestNamespaces checks that the MCPs' namespaces keep two digits for
// the 20 of the API-server backend and get as many as 500 need.
func TestNamespaces(t *testing.T) {
	cases := map[string]struct {
		n           int
		first, last string
	}{
		"one":    {n: 1, first: "bench-mcp-00", last: "bench-mcp-00"},
		"twenty": {n: 20, first: "bench-mcp-00", last: "bench-mcp-19"},
		"500":    {n: 500, first: "bench-mcp-000", last: "bench-mcp-499"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := namespaces(tc.n)
			if len(got) != tc.n {
				t.Fatalf("namespaces(%d) has %d names", tc.n, len(got))
			}
			if diff := cmp.Diff([]string{tc.first, tc.last}, []string{got[0], got[len(got)-1]}); diff != "" {
				t.Errorf("namespaces(%d) first and last (-want +got):\n%s", tc.n, diff)
			}
		})
	}
}

// TestReadiness checks that an MCP counts once, when first seen Ready, and
// that MCPs of other namespaces or names do not count.
func TestReadiness(t *testing.T) {
	mcp := func(ns, name string, ready bool) *corev2alpha1.ManagedControlPlane {
		status := metav1.ConditionFalse
		if ready {
			status = metav1.ConditionTrue
		}
		return &corev2alpha1.ManagedControlPlane{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Status: corev2alpha1.ManagedControlPlaneStatus{Status: common.Status{Conditions: []metav1.Condition{
				{Type: common.ConditionTypeReady, Status: status},
			}}},
		}
	}
	r := newReadiness([]string{"a", "b"}, time.Now())
	for _, m := range []*corev2alpha1.ManagedControlPlane{
		mcp("a", mcpName, false),
		mcp("c", mcpName, true),
		mcp("b", "other", true),
		mcp("a", mcpName, true),
		mcp("a", mcpName, true),
	} {
		r.see(m)
	}
	if r.pending != 1 || r.after[0] == 0 || r.after[1] != 0 {
		t.Errorf("after a Ready twice, b never: pending %d, after %v; want 1 pending, a's time set and b's not", r.pending, r.after)
	}
}
