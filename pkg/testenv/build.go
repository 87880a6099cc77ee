package testenv

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// buildTimeout bounds BuildBinaries: a cold build of a binary with the
// Kubernetes libraries takes minutes on a small machine; a warm one (the
// build cache holds the packages `go test` compiled) seconds.
const buildTimeout = 10 * time.Minute

// BuildBinaries builds the main packages pkgs (import paths or patterns
// such as "github.com/marketplane/marketplane/cmd/...") of the module the
// test runs in with one `go build -o dir/`, so that a test runs the binaries
// a user runs rather than its own test binary. Each binary is named after
// the last element of its package path. Under -short it skips t: a build
// takes seconds at best.
func BuildBinaries(t testing.TB, dir string, pkgs ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds binaries; run without -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	begin := time.Now()
	args := append([]string{"build", "-o", dir + "/"}, pkgs...)
	if out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput(); err != nil {
		t.Fatalf("testenv: go build %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	t.Logf("built %s in %s", strings.Join(pkgs, " "), time.Since(begin).Round(100*time.Millisecond))
}
