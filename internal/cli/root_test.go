package cli

import (
	"bytes"
	"cmp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

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

// TestOneMeaningPerFlag walks every marketplane command: a shorthand
// means the same long flag wherever it appears (-v is --verbosity, never
// --version), and --version has no shorthand.
func TestOneMeaningPerFlag(t *testing.T) {
	root := NewRootCommand(&bytes.Buffer{})
	root.InitDefaultVersionFlag()
	meaning := map[string]string{"v": "verbosity", "o": "output", "f": "filename"}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.InitDefaultHelpFlag()
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Shorthand == "" || f.Name == "help" {
				return
			}
			if want, ok := meaning[f.Shorthand]; !ok || f.Name != want {
				t.Errorf("%s: -%s is --%s; want -%s only as --%s", c.CommandPath(), f.Shorthand, f.Name, f.Shorthand, cmp.Or(want, "(no such shorthand)"))
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if f := root.Flags().Lookup("version"); f == nil || f.Shorthand != "" {
		t.Errorf("root --version: %+v; want the flag, without a shorthand", f)
	}
}
