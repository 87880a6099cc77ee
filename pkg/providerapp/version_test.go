package providerapp_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/pkg/providerapp"
	"github.com/marketplane/marketplane/pkg/version"
)

// TestVersionFlag checks that every provider binary answers --version with
// its name and the stamped version, through Command and MainWithArgs, and
// neither initializes nor runs anything (no cluster is reachable here; init
// or run would fail).
func TestVersionFlag(t *testing.T) {
	defer func(v, r, d string) { version.Version, version.Revision, version.BuildDate = v, r, d }(version.Version, version.Revision, version.BuildDate)
	version.Version, version.Revision, version.BuildDate = "v0.2.0-test", "0123abc", "2026-11-24T10:00:00Z"
	p := providerapp.Provider{Name: "sample-provider"}

	cmd := p.Command()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("--version: %v", err)
	}
	want := "sample-provider v0.2.0-test (revision 0123abc, built 2026-11-24T10:00:00Z, "
	if !strings.HasPrefix(out.String(), want) || out.String() != version.Line("sample-provider")+"\n" {
		t.Errorf("--version printed %q; want %q", out.String(), version.Line("sample-provider")+"\n")
	}

	if code := p.MainWithArgs(t.Context(), []string{"--version"}); code != 0 {
		t.Errorf("MainWithArgs(--version) = %d; want 0", code)
	}
}
