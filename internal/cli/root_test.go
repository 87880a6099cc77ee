package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/pkg/manifests"

	"github.com/marketplane/marketplane/api/crds"
)

func TestCRDsCommand(t *testing.T) {
	cases := map[string]struct {
		args    []string
		want    func() int
		wantErr string
	}{
		"All": {
			args: []string{"crds"},
			want: func() int { l, _ := crds.All(); return len(l) },
		},
		"Platform": {
			args: []string{"crds", "--cluster", "platform"},
			want: func() int { l, _ := crds.ForCluster(crds.ClusterPlatform); return len(l) },
		},
		"Onboarding": {
			args: []string{"crds", "--cluster", "onboarding"},
			want: func() int { l, _ := crds.ForCluster(crds.ClusterOnboarding); return len(l) },
		},
		"UnknownCluster": {
			args:    []string{"crds", "--cluster", "mcp"},
			wantErr: `--cluster "mcp"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			cmd := NewRootCommand(&out)
			cmd.SetErr(&bytes.Buffer{})
			cmd.SetArgs(tc.args)
			err := cmd.Execute()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Execute(%v): want an error containing %q, got %v", tc.args, tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Execute(%v): %v", tc.args, err)
			}
			objs, err := manifests.Decode(out.Bytes())
			if err != nil {
				t.Fatalf("decode output: %v", err)
			}
			if want := tc.want(); len(objs) != want || want == 0 {
				t.Errorf("Execute(%v): %d CRDs printed, want %d (and more than none)", tc.args, len(objs), want)
			}
			for _, o := range objs {
				if o.GetKind() != "CustomResourceDefinition" {
					t.Errorf("printed a %s, want only CustomResourceDefinitions", o.GetKind())
				}
			}
		})
	}
}
