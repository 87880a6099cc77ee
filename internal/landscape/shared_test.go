package landscape_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/internal/landscape/stack"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// The whole landscape (providers, catalog, broker) that the tests which
// only add objects of their own to it share: TestDedicatedClusterPlan and
// TestSimulatedWorkloads. Its start costs about 12 CPU-seconds of its
// processes (measured on a 2-core machine), which each test that shares
// it saves.
//
// A test may share it only if it neither stops, kills nor moves anything
// of the landscape, changes no object that another test reads, and names
// what it creates so that no other test creates or counts it (see
// sharedName). TestSupervision (kills processes and counts restarts),
// TestLandscape, TestCrashRecovery and TestStopStart (stop, resume, move
// ports) and
// TestProviderCannotBind (a Start that must fail) start their own;
// TestTwoLandscapes starts its two at the same moment on purpose.
//
// The first test that asks for it starts it; it stops as soon as the last
// test that declared it would use it (useSharedStack) has ended, not when
// the package's tests end: with -parallel 2 (two cores) the other
// landscape tests can run for minutes after its users, and an idle whole
// landscape costs about 0.06 cores meanwhile (measured), a good part of
// what its start saved. With -count=N each round of the tests starts it
// afresh.
var shared struct {
	mu sync.Mutex
	// expected counts the tests that declared they use the landscape
	// and have not ended yet.
	expected int
	l        *landscape.Landscape
	out      *testenv.SyncBuffer
	// root is the temporary directory that holds the state directory
	// dir; stopSharedStack removes it.
	root, dir string
	// err is why the landscape did not start; the tests that want it
	// until it is next released fail with it rather than start another.
	err error
	// names counts the calls of sharedName per base name.
	names map[string]int
}

// useSharedStack declares that t will use the shared landscape, which
// then stays up until t ends (and every other test that declared so).
// Call it before t.Parallel: every such test then declares itself before
// any of them runs, so that the landscape does not stop between two of
// them.
func useSharedStack(t *testing.T) {
	t.Helper()
	shared.mu.Lock()
	shared.expected++
	shared.mu.Unlock()
	t.Cleanup(func() {
		shared.mu.Lock()
		defer shared.mu.Unlock()
		if shared.expected--; shared.expected > 0 {
			return
		}
		shared.err = nil
		if err := stopSharedStack(); err != nil {
			t.Errorf("the last test on the shared landscape ended: %v", err)
		}
	})
}

// sharedStack returns the shared whole landscape and its state directory,
// starting it if it does not run (with t for logs and the build of the
// stack's binaries). t must have called useSharedStack. A test fails if the
// landscape could not be started, also when another test's call tried.
func sharedStack(t *testing.T) (l *landscape.Landscape, stateDir string) {
	t.Helper()
	bin := stackBinaries(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.expected == 0 {
		t.Fatal("sharedStack without useSharedStack: nothing would stop the landscape")
	}
	if shared.l == nil && shared.err == nil {
		shared.err = startSharedStack(t, bin)
	}
	if shared.err != nil {
		t.Fatalf("the shared landscape did not start (the test that started it says more): %v", shared.err)
	}
	return shared.l, shared.dir
}

// startSharedStack starts the shared landscape; shared.mu is held.
func startSharedStack(t *testing.T, bin string) error {
	// Not t.TempDir: the landscape outlives the test that starts it.
	root, err := os.MkdirTemp("", "landscape-test-shared-") //nolint:usetesting // lives as long as the tests that use it
	if err != nil {
		return fmt.Errorf("state directory of the shared landscape: %w", err)
	}
	shared.root, shared.dir, shared.out = root, filepath.Join(root, "state"), &testenv.SyncBuffer{}
	l, err := landscape.New(landscape.Config{StateDir: shared.dir, BinDir: bin, Out: shared.out, StartTimeout: startTimeout, StopTimeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("new landscape: %w", err)
	}
	if err := stack.Configure(l); err != nil {
		return fmt.Errorf("configure the stack: %w", err)
	}
	// Not t.Context(): the landscape's processes must not end with the
	// test that happened to start it. Start stops what it started when
	// it fails.
	begin := time.Now()
	if err := l.Start(context.Background()); err != nil {
		return fmt.Errorf("start: %w\nprogress:\n%s", err, shared.out.String())
	}
	shared.l = l
	t.Logf("start-up of the shared whole landscape: %s", time.Since(begin).Round(10*time.Millisecond))
	return nil
}

// stopSharedStack stops the shared landscape, if one was started, and
// removes its state directory; shared.mu is held. The last test that uses
// it calls it; TestMain calls it again in case a test ended without its
// cleanups.
func stopSharedStack() error {
	if shared.root == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	if shared.l != nil {
		if err := shared.l.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop the shared landscape: %w", err))
		}
	}
	// Down also stops what a failed stop left running, and removes the
	// state directory.
	if err := landscape.Down(ctx, shared.dir, nil); err != nil {
		errs = append(errs, fmt.Errorf("down the shared landscape: %w", err))
	}
	if err := os.RemoveAll(shared.root); err != nil {
		errs = append(errs, err)
	}
	shared.l, shared.root, shared.dir = nil, "", ""
	return errors.Join(errs...)
}

// sharedName returns base the first time it is asked for base, and base
// with a count appended after that: with -count=N a test runs N times,
// possibly on the same shared landscape, and each run must create objects
// of its own, not find those of the run before.
func sharedName(base string) string {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.names == nil {
		shared.names = map[string]int{}
	}
	shared.names[base]++
	if n := shared.names[base]; n > 1 {
		return base + "-" + strconv.Itoa(n)
	}
	return base
}
