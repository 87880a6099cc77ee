package clusters

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
)

// named is a Provisioner that provisions a Cluster of its own name and
// records the purposes it released.
type named struct {
	name     string
	released []string
}

func (n *named) fns() ProvisionerFns {
	return ProvisionerFns{
		ProvisionFn: func(context.Context, *clustersv1alpha1.ClusterRequest) (*clustersv1alpha1.Cluster, error) {
			return &clustersv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: n.name}}, nil
		},
		ReleaseFn: func(_ context.Context, req *clustersv1alpha1.ClusterRequest, _ *clustersv1alpha1.Cluster) (bool, error) {
			n.released = append(n.released, req.Spec.Purpose)
			return true, nil
		},
	}
}

func TestByPurpose(t *testing.T) {
	type want struct {
		provisioned string
		noneErr     bool
	}
	cases := map[string]struct {
		reason   string
		fallback bool
		purpose  string
		want     want
	}{
		"ListedPurpose": {reason: "a listed purpose goes to its provisioner", fallback: true, purpose: "mcp", want: want{provisioned: "profile"}},
		"OtherPurpose":  {reason: "another purpose goes to the fallback", fallback: true, purpose: "workload", want: want{provisioned: "fallback"}},
		"NoFallback":    {reason: "without a fallback, another purpose gets ErrNoProvisioner", purpose: "workload", want: want{noneErr: true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			profile, fallback := &named{name: "profile"}, &named{name: "fallback"}
			var fb Provisioner
			if tc.fallback {
				fb = fallback.fns()
			}
			p := ByPurpose(fb, map[string]Provisioner{"mcp": profile.fns()})
			req := &clustersv1alpha1.ClusterRequest{Spec: clustersv1alpha1.ClusterRequestSpec{Purpose: tc.purpose}}
			cl, err := p.Provision(t.Context(), req)
			got := want{noneErr: errors.Is(err, ErrNoProvisioner)}
			if cl != nil {
				got.provisioned = cl.Name
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s: Provision (-want +got):\n%s", tc.reason, diff)
			}
			done, err := p.Release(t.Context(), req, nil)
			if err != nil || !done {
				t.Errorf("%s: Release = %v, %v; want done", tc.reason, done, err)
			}
			released := slices.Concat(profile.released, fallback.released)
			if tc.want.provisioned != "" && len(released) != 1 {
				t.Errorf("%s: released by %v, want one release by %s", tc.reason, released, tc.want.provisioned)
			}
		})
	}
}

func TestProvisionedClusterName(t *testing.T) {
	cases := map[string]struct {
		purpose string
		want    string
	}{
		"MCP":       {purpose: "mcp", want: "mcp-"},
		"Odd":       {purpose: "My_Purpose", want: "my-purpose-"},
		"Long":      {purpose: "a-very-long-purpose-name-indeed", want: "a-very-long-purpose-"},
		"NoLetters": {purpose: "__", want: "cluster-"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := &clustersv1alpha1.ClusterRequest{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Spec: clustersv1alpha1.ClusterRequestSpec{Purpose: tc.purpose}}
			got := ProvisionedClusterName(req)
			if len(got) != len(tc.want)+10 || got[:len(tc.want)] != tc.want {
				t.Errorf("ProvisionedClusterName(%q) = %q, want %q and 10 hex digits", tc.purpose, got, tc.want)
			}
			other := req.DeepCopy()
			other.UID = "u2"
			if ProvisionedClusterName(other) == got {
				t.Errorf("two UIDs got the same name %q", got)
			}
		})
	}
}
