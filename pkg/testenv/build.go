package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// buildTimeout bounds BuildBinaries: a cold build of a binary with the
// Kubernetes libraries takes minutes on a small machine; a warm one (the
// build cache holds the packages `go test` compiled) seconds.
const buildTimeout = 10 * time.Minute

// BuildBinaries builds the main packages pkgs (import paths or patterns
// such as "github.com/marketplane/marketplane/cmd/...") of the module the
// test runs in with Build, so that a test runs the binaries a user runs
// rather than its own test binary. It fails t when the build fails and
// skips it under -short: a build takes seconds at best.
func BuildBinaries(t testing.TB, dir string, pkgs ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds binaries; run without -short")
	}
	begin := time.Now()
	if err := Build(dir, pkgs...); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Logf("built %s in %s", strings.Join(pkgs, " "), time.Since(begin).Round(100*time.Millisecond))
}

// Build builds the main packages pkgs with one `go build` and puts the
// binaries into dir, each named after the last element of its package
// path; for a TestMain, which has no testing.TB (tests use BuildBinaries).
//
// Go's build cache holds compiled packages, not linked binaries, and
// linking one of ours takes about 2 s of CPU even stripped. So the binaries are built
// into a directory shared by every test of the module on the machine (see
// sharedDir), where `go build` finds them current after the first build
// and only checks them (about 0.3 s), and dir gets hard links to them
// (copies across file systems), which replace files of the same names. A
// build that does replace one renames the new file into place, so a
// binary a test runs is never rewritten under it.
func Build(dir string, pkgs ...string) error {
	names, err := binaryNames(pkgs)
	if err != nil {
		return err
	}
	shared, err := buildShared(pkgs)
	if err != nil {
		return err
	}
	// As `go build -o dir/` would.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("binaries of %s: %w", strings.Join(pkgs, " "), err)
	}
	for _, name := range names {
		if err := linkFile(filepath.Join(shared, name), filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("binaries of %s: %w", strings.Join(pkgs, " "), err)
		}
	}
	return nil
}

// binaryNames returns the names `go build -o dir/` gives the binaries of
// pkgs: the last element of each main package's import path.
func binaryNames(pkgs []string) ([]string, error) {
	args := append([]string{"list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`}, pkgs...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return nil, fmt.Errorf("go list %s: %w\n%s", strings.Join(pkgs, " "), err, exit.Stderr)
		}
		return nil, fmt.Errorf("go list %s: %w", strings.Join(pkgs, " "), err)
	}
	var names []string
	for _, importPath := range strings.Fields(string(out)) {
		names = append(names, path.Base(importPath))
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("go build %s: no main package", strings.Join(pkgs, " "))
	}
	return names, nil
}

// buildShared builds pkgs into the shared directory of their module,
// holding its lock (parallel test processes wait for each other rather
// than write the same files), and returns the directory of the binaries.
func buildShared(pkgs []string) (string, error) {
	root, err := sharedDir()
	if err != nil {
		return "", err
	}
	out, work := filepath.Join(root, "bin"), filepath.Join(root, "work")
	for _, d := range []string{out, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", fmt.Errorf("build directory: %w", err)
		}
	}
	unlock, err := lockFile(filepath.Join(root, "lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	// Without symbol table and DWARF (-s -w), as hack/testrun links test
	// binaries: linking takes about 40 % less CPU, and a panic's stack
	// trace, which comes from the runtime's own tables, is unchanged.
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-ldflags=-s -w", "-o", out + "/"}, pkgs...)...)
	// The linker's output is renamed into out from GOTMPDIR, which is on
	// the same file system; from elsewhere go copies it over the old file
	// in place, which would change binaries tests run through their links.
	cmd.Env = append(os.Environ(), "GOTMPDIR="+work)
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", strings.Join(pkgs, " "), err, output)
	}
	return out, nil
}

// sharedDir is the shared build directory of the module the test runs in:
// one per user under the temporary directory (where t.TempDir is too, so
// that links work), named by a hash of the module's directory and
// GOFLAGS. Binary names are unique within a module.
func sharedDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("build directory: %w", err)
	}
	module := wd
	for {
		if _, err := os.Stat(filepath.Join(module, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(module)
		if parent == module {
			return "", fmt.Errorf("build directory: no go.mod in %s or above", wd)
		}
		module = parent
	}
	parent := filepath.Join(os.TempDir(), fmt.Sprintf("marketplane-testbuild-%d", os.Getuid()))
	pruneOnce.Do(func() { pruneShared(parent) })
	sum := sha256.Sum256([]byte(module + "\x00" + os.Getenv("GOFLAGS")))
	dir := filepath.Join(parent, hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build directory: %w", err)
	}
	if err := writeModuleFile(dir, module); err != nil {
		return "", fmt.Errorf("build directory: %w", err)
	}
	return dir, nil
}

// writeModuleFile records module in dir's moduleFile, unless it is there
// already. It writes a temporary file and renames it into place: another
// test process pruning (pruneShared) reads the file at any moment, and a
// file caught truncated named no module, which had it remove the
// directory of a build in progress.
func writeModuleFile(dir, module string) error {
	path := filepath.Join(dir, moduleFile)
	if b, err := os.ReadFile(path); err == nil && string(b) == module {
		return nil
	}
	f, err := os.CreateTemp(dir, moduleFile+".*")
	if err != nil {
		return err
	}
	_, werr := f.WriteString(module)
	if err := errors.Join(werr, f.Close()); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		_ = os.Remove(f.Name())
		return err
	}
	return nil
}

// moduleFile, in a shared build directory, names the module directory it
// builds from.
const moduleFile = "module"

var pruneOnce sync.Once

// pruneShared removes the shared build directories under parent whose
// module directory is gone, such as those of modules a test generated in
// its temporary directory (the scaffold's), once per test process.
func pruneShared(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		dir := filepath.Join(parent, e.Name())
		module, err := os.ReadFile(filepath.Join(dir, moduleFile))
		if err != nil || len(module) == 0 {
			continue
		}
		if _, err := os.Stat(string(module)); errors.Is(err, fs.ErrNotExist) {
			_ = os.RemoveAll(dir)
		}
	}
}

// linkFile hard-links from to the name to, or copies it where a link is
// not possible, replacing what to names.
func linkFile(from, to string) error {
	// Through a new name and a rename, as `go build -o dir/` replaces
	// what dir has: a binary (or a link to one) that `make build` put
	// there, which the test must not run.
	tmp := fmt.Sprintf("%s.new-%d-%d", to, os.Getpid(), linkSeq.Add(1))
	if err := os.Link(from, tmp); err != nil {
		if err := copyFile(from, tmp); err != nil {
			_ = os.Remove(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, to); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("link %s: %w", to, err)
	}
	return nil
}

// linkSeq numbers the new names of linkFile within the process.
var linkSeq atomic.Int64

// copyFile copies the executable from to the new file to.
func copyFile(from, to string) (err error) {
	in, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return fmt.Errorf("copy to %s: %w", to, err)
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("copy to %s: %w", to, cerr)
		}
	}()
	if _, err := io.Copy(out, in); err != nil {
		return fmt.Errorf("copy %s to %s: %w", from, to, err)
	}
	return nil
}
