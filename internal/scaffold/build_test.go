package scaffold

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestScaffoldedProjectBuildsAndPasses scaffolds a provider into a temporary
// directory the way a user would (its own module, Marketplane replaced by
// this checkout) and then, with no edits: builds it, checks that `make
// generate` (controller-gen) changes no file, tidies its go.mod, vets it and
// runs its tests, which start their own landscape; among them the validation
// flow of test/e2e, so a freshly generated provider is proven to pass it
// (deployed from its own binary, service Ready, DomainServiceAPI served in
// the tenant's control plane, everything deleted). The kind sorts before
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
	// Binaries and test binaries are linked without DWARF (-w), which
	// takes a third less CPU; the project's own builds through testenv
	// strip them too.
	env := append(os.Environ(), "GOWORK=off", "KUBEBUILDER_ASSETS="+assets,
		"GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -ldflags=-w"))
	// runCmd runs a command in the project and returns its output, and an
	// error with the output when it fails; it may run on any goroutine.
	runCmd := func(timeout time.Duration, name string, args ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = dir, env
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return out, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
		}
		t.Logf("%s %s: %s", name, strings.Join(args, " "), time.Since(start).Round(time.Second))
		return out, nil
	}
	run := func(timeout time.Duration, name string, args ...string) {
		t.Helper()
		if _, err := runCmd(timeout, name, args...); err != nil {
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
	wg.Go(func() { _, vetErr = runCmd(5*time.Minute, "go", "vet", "./...") })
	// One package at a time: the controller suite and the validation
	// flow each start several API servers, and this test already runs
	// beside other packages of `make test`.
	out, testErr := runCmd(15*time.Minute, "go", "test", "-count=1", "-p", "1", "-v", "./...")
	wg.Wait()
	if err := errors.Join(vetErr, testErr); err != nil {
		t.Fatal(err)
	}
	// The validation flow ran and passed rather than skipping itself.
	if !bytes.Contains(out, []byte("--- PASS: TestValidate ")) {
		t.Errorf("go test ./... passed without passing TestValidate (test/e2e): the validation flow did not run; its output:\n%s", testOutputOf(out, "TestValidate"))
	}

	t.Run("HangingTestFailsByItself", func(t *testing.T) { checkHangingTestFailsByItself(t, dir, env) })
}

// hangBudget is the budget (TEST_BUDGET) of the generated test that
// checkHangingTestFailsByItself makes hang: below the waits' own limit
// (45 s), so that the budget ends the wait.
const hangBudget = 20 * time.Second

// checkHangingTestFailsByItself edits the generated controller in dir so
// that no object ever becomes Ready, and runs the generated TestGoesReady
// with a budget of hangBudget: it must fail by itself within the budget,
// naming itself, what it waited for and the last condition it saw, and
// without go test's timeout panic and goroutine dump.
func checkHangingTestFailsByItself(t *testing.T, dir string, env []string) {
	path := filepath.Join(dir, "internal", "controller", "reconciler.go")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const ready = "spruntime.StatusReady(obj)"
	if n := bytes.Count(src, []byte(ready)); n != 2 {
		t.Fatalf("reconciler.go calls %s %d times, want 2 (Observe and CreateOrUpdate)", ready, n)
	}
	src = bytes.ReplaceAll(src, []byte(ready), []byte(`spruntime.StatusProgressing(obj, ReasonWaitingForCRD, "never Ready: edited by the scaffold's test")`))
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-run", "^TestGoesReady$", "-timeout", "10m", "./internal/controller/")
	cmd.Dir, cmd.Env = dir, append(slices.Clone(env), "TEST_BUDGET="+hangBudget.String())
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("go test -run ^TestGoesReady$ with the controller never Ready, TEST_BUDGET=%s: %s", hangBudget, time.Since(start).Round(time.Second))
	if err == nil {
		t.Fatalf("TestGoesReady passed with a controller that never reports Ready:\n%s", out)
	}
	if dump := regexp.MustCompile(`panic: test timed out|goroutine \d+ \[`).Find(out); dump != nil {
		t.Errorf("the output holds %q: go test's timeout, not the test, ended the wait:\n%s", dump, out)
	}
	m := regexp.MustCompile(`TestGoesReady: waited ([0-9.]+)s for the BackupService tenant-\d+/cp to be Ready \(the test's budget of 20s is spent; TEST_BUDGET sets it\); last seen: [^\n]*Ready=False/WaitingForCRD\("never Ready`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("the output does not say that TestGoesReady waited, within its budget of %s, for the BackupService to be Ready, and what it last saw:\n%s", hangBudget, out)
	}
	t.Logf("its failure: %s", m[0])
	if waited, err := strconv.ParseFloat(string(m[1]), 64); err != nil || time.Duration(waited*float64(time.Second)) > hangBudget {
		t.Errorf("TestGoesReady waited %ss, more than its budget of %s", m[1], hangBudget)
	}
	if line := regexp.MustCompile(`--- FAIL: TestGoesReady \(.*\)`).Find(out); line != nil {
		t.Logf("%s", line)
	} else {
		t.Errorf("the output does not report TestGoesReady as failed:\n%s", out)
	}
}

// testOutputOf returns the lines of go test -v output that mention test.
func testOutputOf(out []byte, test string) []byte {
	var lines [][]byte
	for _, line := range bytes.Split(out, []byte("\n")) {
		if bytes.Contains(line, []byte(test)) {
			lines = append(lines, line)
		}
	}
	return bytes.Join(lines, []byte("\n"))
}
