package localcluster

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
)

func TestClusterName(t *testing.T) {
	req := func(uid, purpose string) *clustersv1alpha1.ClusterRequest {
		return &clustersv1alpha1.ClusterRequest{
			ObjectMeta: metav1.ObjectMeta{UID: types.UID("uid-" + uid)},
			Spec:       clustersv1alpha1.ClusterRequestSpec{Purpose: purpose},
		}
	}
	cases := map[string]struct {
		reason string
		req    *clustersv1alpha1.ClusterRequest
		prefix string
	}{
		"MCP":       {reason: "the purpose starts the name", req: req("1", "mcp"), prefix: "mcp-"},
		"Odd":       {reason: "characters a name cannot have are replaced", req: req("1", "My_Purpose"), prefix: "my-purpose-"},
		"Long":      {reason: "a long purpose is cut", req: req("1", "a-very-long-purpose-name-indeed"), prefix: "a-very-long-purpose-"},
		"NoLetters": {reason: "an unusable purpose falls back to cluster", req: req("1", "__"), prefix: "cluster-"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ClusterName(tc.req)
			if len(got) != len(tc.prefix)+10 || got[:len(tc.prefix)] != tc.prefix {
				t.Errorf("%s: ClusterName = %q, want %q followed by 10 hex digits", tc.reason, got, tc.prefix)
			}
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Errorf("ClusterName = %q is not a DNS label: %v", got, errs)
			}
		})
	}
	if ClusterName(req("1", "mcp")) == ClusterName(req("2", "mcp")) {
		t.Error("two requests got the same cluster name")
	}
}
