package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/internal/landscape/controlplane"
)

// TestLandscapeUpRejectsBadFlags checks that a bad --image-map,
// --image-map-file or --manifest fails `landscape up` before anything
// starts: no supervisor in the background, no state recorded.
func TestLandscapeUpRejectsBadFlags(t *testing.T) {
	binDir, err := controlplane.BinDir("")
	if err == nil {
		_, err = controlplane.FindBinaries(binDir)
	}
	if err != nil {
		t.Fatalf("%v (run 'make tools')", err)
	}
	dir := t.TempDir()
	badYAML := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badYAML, []byte("kind: [unclosed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		args    []string
		wantErr string
	}{
		"image map without a binary":    {args: []string{"--image-map", "registry.invalid/acme/p:v1"}, wantErr: "want IMAGE=BINARY"},
		"image map to a missing binary": {args: []string{"--image-map", "registry.invalid/acme/p:v1=" + filepath.Join(dir, "nope")}, wantErr: "no such file"},
		"missing image map file":        {args: []string{"--image-map-file", filepath.Join(dir, "nope.yaml")}, wantErr: "read image map"},
		"missing manifest":              {args: []string{"--manifest", filepath.Join(dir, "nope.yaml")}, wantErr: "read manifest"},
		"manifest that is not YAML":     {args: []string{"--manifest", badYAML}, wantErr: "bad.yaml"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state")
			var out bytes.Buffer
			cmd := NewRootCommand(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(append([]string{"landscape", "up", "--state-dir", state, "--bin-dir", binDir}, tc.args...))
			err := cmd.ExecuteContext(t.Context())
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("landscape up %v = %v; want an error with %q", tc.args, err, tc.wantErr)
			}
			if _, err := os.Stat(state); !os.IsNotExist(err) {
				t.Errorf("the state directory was created although the flags were rejected: %v", err)
			}
		})
	}
}
