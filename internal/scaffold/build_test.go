package scaffold

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestScaffoldedProjectBuildsAndPasses scaffolds a provider into a temporary
// directory the way a user would (its own module, Marketplane replaced by
// this checkout) and then, with no edits: builds it, checks that `make
// generate` (controller-gen) changes no file, tidies its go.mod, vets it and
// runs its tests, which start their own landscape. The kind sorts before
// ProviderConfig and the group is a full DNS name, unlike providers/sample,
// which `make test` covers as well; together they cover both orders of the
// deepcopy code and both with and without a workload cluster.
func TestScaffoldedProjectBuildsAndPasses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests a generated project (a few minutes)")
	}
	root := repoRoot(t)
	dir := filepath.Join(t.TempDir(), "backup-provider")
	p, err := NewProject(Options{
		Module:          "example.org/acme/backup-provider",
		Kind:            "BackupService",
		Group:           "backup.acme.example.org",
		Dir:             dir,
		WorkDir:         t.TempDir(),
		MarketplanePath: root,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(); err != nil {
		t.Fatal(err)
	}

	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin")
	}
	env := append(os.Environ(), "GOWORK=off", "KUBEBUILDER_ASSETS="+assets)
	// runCmd runs a command in the project and returns an error with its
	// output when it fails; it may run on any goroutine.
	runCmd := func(timeout time.Duration, name string, args ...string) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = dir, env
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
		}
		t.Logf("%s %s: %s", name, strings.Join(args, " "), time.Since(start).Round(time.Second))
		return nil
	}
	run := func(timeout time.Duration, name string, args ...string) {
		t.Helper()
		if err := runCmd(timeout, name, args...); err != nil {
			t.Fatal(err)
		}
	}

	// It builds as written: go.mod carries Marketplane's requirements and
	// go.sum its checksums.
	run(5*time.Minute, "go", "build", "./...")

	// The rendered deepcopy code and CRDs are what controller-gen makes.
	run(5*time.Minute, "make", "generate")
	for _, f := range p.Files {
		if !strings.HasPrefix(f.Path, "api/") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Errorf("after make generate: %v", err)
			continue
		}
		if !bytes.Equal(data, f.Data) {
			t.Errorf("make generate changed %s: the template is not what controller-gen %s generates", f.Path, ControllerGenVersion)
		}
	}
	manifests, _ := filepath.Glob(filepath.Join(dir, "api", "crds", "manifests", "*.yaml"))
	if len(manifests) != 2 {
		t.Errorf("after make generate, api/crds/manifests holds %v, want the two scaffolded CRDs", manifests)
	}

	run(5*time.Minute, "go", "mod", "tidy")
	// Vetting and testing at once: the tests spend most of their time
	// waiting for their landscape, time in which vet's analysis runs. Both
	// compile from the cache the build above filled.
	var vetErr error
	var wg sync.WaitGroup
	wg.Go(func() { vetErr = runCmd(5*time.Minute, "go", "vet", "./...") })
	testErr := runCmd(15*time.Minute, "go", "test", "-count=1", "./...")
	wg.Wait()
	if err := errors.Join(vetErr, testErr); err != nil {
		t.Fatal(err)
	}
}
