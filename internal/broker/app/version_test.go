package app

import (
	"bytes"
	"testing"

	"github.com/marketplane/marketplane/pkg/version"
)

// TestVersionFlag checks that marketplane-broker --version prints the
// version line and starts nothing.
func TestVersionFlag(t *testing.T) {
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("--version: %v", err)
	}
	if want := version.Line("marketplane-broker") + "\n"; out.String() != want {
		t.Errorf("--version printed %q; want %q", out.String(), want)
	}
}
