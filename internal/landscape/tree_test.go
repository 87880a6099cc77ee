package landscape_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
)

// TestTreeLines checks how the tree of `landscape status --tree` is drawn:
// branches, alignment of siblings' states, and the summary of the objects
// of one kind beyond the limit.
func TestTreeLines(t *testing.T) {
	instances := func(n int) []landscape.TreeNode {
		var out []landscape.TreeNode
		for i := range n {
			out = append(out, landscape.TreeNode{Kind: "SFServiceInstance", Name: fmt.Sprintf("sf-%d/%d", i, i), State: "succeeded"})
		}
		return out
	}
	cases := map[string]struct {
		reason string
		tree   landscape.Tree
		limit  int
		want   []string
	}{
		"running": {
			reason: "Nested nodes get branches and the pipes of their parents; siblings' states line up; empty parts are left out.",
			tree: landscape.Tree{Dir: "/s", Running: true, Phase: controlplane.PhaseReady, Processes: 9, Alive: 8, Clusters: []landscape.TreeNode{
				{Name: "platform", State: "https://127.0.0.1:1", Detail: "ready", Children: []landscape.TreeNode{
					{Kind: "operator", State: "2/2 replicas running", Detail: "leader operator-1"},
					{Kind: "ServiceProvider", Name: "sample", State: "Ready", Detail: "dev"},
				}},
				{Name: "onboarding", State: "https://127.0.0.1:2", Detail: "ready", Children: []landscape.TreeNode{
					{Kind: "ManagedControlPlane", Name: "t/mcp1", State: "Ready", Children: []landscape.TreeNode{
						{Kind: "Sample", Name: "t/mcp1", State: "Progressing"},
					}},
				}},
				{Name: "workload", State: "https://127.0.0.1:3", Detail: "ready  2 nodes"},
			}},
			want: []string{
				"landscape /s (Ready, 8/9 processes running)",
				"├── platform    https://127.0.0.1:1  ready",
				"│   ├── operator                2/2 replicas running  leader operator-1",
				"│   └── ServiceProvider sample  Ready  dev",
				"├── onboarding  https://127.0.0.1:2  ready",
				"│   └── ManagedControlPlane t/mcp1  Ready",
				"│       └── Sample t/mcp1  Progressing",
				"└── workload    https://127.0.0.1:3  ready  2 nodes",
			},
		},
		"not running": {
			reason: "A stopped landscape says so and which phase it recorded last; clusters (nodes without a kind) are never summarised.",
			tree:   landscape.Tree{Dir: "/s", Phase: controlplane.PhaseStopped, Clusters: []landscape.TreeNode{{Name: "platform", State: "not running"}, {Name: "onboarding", State: "not running"}, {Name: "workload", State: "not running"}}},
			limit:  1,
			want:   []string{"landscape /s (not running, last phase Stopped)", "├── platform    not running", "├── onboarding  not running", "└── workload    not running"},
		},
		"summarised": {
			reason: "Beyond the limit, the objects of one kind are one line; other kinds beneath the same parent are kept.",
			tree: landscape.Tree{Dir: "/s", Running: true, Phase: controlplane.PhaseReady, Clusters: []landscape.TreeNode{
				{Name: "onboarding", State: "ready", Children: append(instances(5), landscape.TreeNode{Kind: "error", Name: "list Foo: boom"})},
			}},
			limit: 2,
			want: []string{
				"landscape /s (Ready, 0/0 processes running)",
				"└── onboarding  ready",
				"    ├── SFServiceInstance sf-0/0  succeeded",
				"    ├── SFServiceInstance sf-1/1  succeeded",
				"    ├── … and 3 more SFServiceInstances",
				"    └── error list Foo: boom",
			},
		},
		"no limit": {
			reason: "With no limit every object is listed.",
			tree:   landscape.Tree{Dir: "/s", Running: true, Phase: controlplane.PhaseReady, Clusters: []landscape.TreeNode{{Name: "onboarding", Children: instances(3)}}},
			want: []string{
				"landscape /s (Ready, 0/0 processes running)",
				"└── onboarding",
				"    ├── SFServiceInstance sf-0/0  succeeded",
				"    ├── SFServiceInstance sf-1/1  succeeded",
				"    └── SFServiceInstance sf-2/2  succeeded",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.tree.Lines(tc.limit)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nLines(%d): -want +got:\n%s\ngot:\n%s", tc.reason, tc.limit, diff, strings.Join(got, "\n"))
			}
		})
	}
}
