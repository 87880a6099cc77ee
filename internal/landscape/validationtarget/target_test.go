package validationtarget_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/internal/landscape/validationtarget"
	"github.com/marketplane/marketplane/pkg/validation"
)

// TestExistingLandscapeSetupErrors: without a running landscape, the setup
// step says what to do.
func TestExistingLandscapeSetupErrors(t *testing.T) {
	spec, err := validation.SpecFromFiles(filepath.Join("..", "..", "..", "pkg", "validation", "testdata", "broken", "probe.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	setupOf := func(dir string) validation.Step {
		t.Helper()
		rep := validation.Run(t.Context(), spec, validationtarget.ExistingLandscape(dir))
		s := stepsOf(rep)[validation.StepSetup]
		if s.Result != validation.ResultFailed {
			t.Fatalf("setup: %s %q, want failed", s.Result, s.Message)
		}
		return s
	}
	empty := t.TempDir()
	if s := setupOf(empty); !strings.Contains(s.Message, "no landscape in "+empty) || !strings.Contains(s.Message, "marketplane landscape up") {
		t.Errorf("no landscape: %q", s.Message)
	}

	// A stopped landscape whose image map lacks the provider's image.
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("state.json", `{"version":1,"phase":"Stopped"}`)
	write("images.yaml", "images:\n- image: marketplane.local/sample:*\n  binary: bin/sample\n")
	s := setupOf(dir)
	for _, want := range []string{`cannot deploy image "registry.invalid/validation/contractprobe:v1"`, filepath.Join(dir, "images.yaml"), "--image-map registry.invalid/validation/contractprobe:v1=BINARY"} {
		if !strings.Contains(s.Message, want) {
			t.Errorf("unmapped image: %q does not contain %q", s.Message, want)
		}
	}

	// Mapped, but not running.
	write("images.yaml", "images:\n- image: registry.invalid/validation/contractprobe:*\n  binary: bin/contractprobe\n")
	if s := setupOf(dir); !strings.Contains(s.Message, "is not running (last phase Stopped)") {
		t.Errorf("stopped landscape: %q", s.Message)
	}
}

// stepsOf maps each step of rep to its result and message.
func stepsOf(rep *validation.Report) map[string]validation.Step {
	out := map[string]validation.Step{}
	for _, s := range rep.Steps {
		out[s.ID] = s
	}
	return out
}
