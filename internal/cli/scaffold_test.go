package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/internal/scaffold"
)

// TestScaffoldProviderCommand checks the flags' wiring: the command writes
// the project where --dir says, with go.mod replacing Marketplane by
// --marketplane-path, reports what it wrote, refuses a second run over the
// same directory and passes validation errors on.
func TestScaffoldProviderCommand(t *testing.T) {
	root, err := scaffold.FindModuleRoot(".", scaffold.MarketplaneModule)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "velero")
	args := []string{"scaffold", "provider", "--module", "example.org/acme/service-provider-velero", "--kind", "Velero",
		"--group", "velero", "--workload-cluster", "--name", "velero", "--dir", dir, "--marketplane-path", root}
	execute := func(args ...string) (string, error) {
		var out bytes.Buffer
		cmd := NewRootCommand(&out)
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(args)
		err := cmd.Execute()
		return out.String(), err
	}

	out, err := execute(args...)
	if err != nil {
		t.Fatalf("scaffold provider: %v", err)
	}
	for _, want := range []string{"velero.services.openmcp.cloud", "cmd/velero/main.go", "go.mod replaces " + scaffold.MarketplaneModule + " with " + root} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not mention %q:\n%s", want, out)
		}
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(gomod), "module example.org/acme/service-provider-velero") ||
		!strings.Contains(string(gomod), scaffold.MarketplaneModule+" => "+root) {
		t.Errorf("go.mod:\n%s", gomod)
	}
	setup, err := os.ReadFile(filepath.Join(dir, "internal", "controller", "setup.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(setup), "clusteraccess.WithWorkloadCluster(") {
		t.Error("--workload-cluster did not reach the project: setup.go asks for no workload cluster")
	}

	if _, err := execute(args...); err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Errorf("second run into the same directory: want a refusal, got %v", err)
	}
	if _, err := execute("scaffold", "provider", "--module", "example.org/x", "--kind", "x", "--group", "x", "--dir", t.TempDir()); err == nil ||
		!strings.Contains(err.Error(), `--kind "x"`) {
		t.Errorf("invalid kind: want its error, got %v", err)
	}
}
