package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/marketplane/marketplane/pkg/version"
)

// TestVersion checks that `marketplane --version` and `marketplane version`
// print the same line, with the stamped version, and that --output json
// prints the build information as an object.
func TestVersion(t *testing.T) {
	defer func(v, r, d string) { version.Version, version.Revision, version.BuildDate = v, r, d }(version.Version, version.Revision, version.BuildDate)
	version.Version, version.Revision, version.BuildDate = "v0.2.0-test", "0123abc", "2026-11-24T10:00:00Z"
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		cmd := NewRootCommand(&out)
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(args)
		err := cmd.Execute()
		return out.String(), err
	}
	want := version.Line("marketplane") + "\n"
	if !strings.HasPrefix(want, "marketplane v0.2.0-test (revision 0123abc, built 2026-11-24T10:00:00Z, go") {
		t.Fatalf("version.Line = %q; want the stamped values", want)
	}
	for _, args := range [][]string{{"--version"}, {"version"}, {"version", "--output", "text"}} {
		got, err := run(args...)
		if err != nil {
			t.Fatalf("marketplane %v: %v", args, err)
		}
		if got != want {
			t.Errorf("marketplane %v printed %q; want %q", args, got, want)
		}
	}

	got, err := run("version", "-o", "json")
	if err != nil {
		t.Fatalf("marketplane version -o json: %v", err)
	}
	var info version.Info
	if err := json.Unmarshal([]byte(got), &info); err != nil {
		t.Fatalf("marketplane version -o json printed %q: %v", got, err)
	}
	if diff := cmp.Diff(version.Get(), info); diff != "" {
		t.Errorf("marketplane version -o json: -want, +got:\n%s", diff)
	}

	if _, err := run("version", "--output", "yaml"); err == nil || !strings.Contains(err.Error(), `--output "yaml"`) {
		t.Errorf("marketplane version --output yaml: %v; want an error naming the format", err)
	}
}
