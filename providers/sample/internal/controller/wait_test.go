package controller_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Every wait of these tests goes through eventually, which is bounded twice:
// by the wait's own limit and by the test's deadline (testContext). A test
// that waits too long fails by itself, with a message naming the test, what
// it waited for and what it last saw, well before go test's -timeout ends the
// whole binary with a goroutine dump and no word on which test hung.

// defaultTestBudget is how long one integration test may take, its wait for
// an MCP cluster included; the environment variable TEST_BUDGET (a Go
// duration) overrides it. The tests take seconds on an idle machine and up
// to about a minute on a loaded 2-core one. The Makefile's -timeout is above
// the sum of the budgets of the tests that run one after another.
const defaultTestBudget = 3 * time.Minute

// maxCleanupReserve is the most of go test's -timeout kept back for the
// cleanups of the tests that ran out of time and for their reports: a test's
// deadline is never later than -timeout minus the reserve, a fifth of
// -timeout up to this.
const maxCleanupReserve = 2 * time.Minute

var (
	// testBudget is defaultTestBudget or TEST_BUDGET; TestMain sets it.
	testBudget = defaultTestBudget
	// testContexts holds each running test's context (testContext).
	testContexts sync.Map
)

// waitingTest is what the waits need of a test: a *testing.T, or in
// TestEventuallyReportsWhatItWaitedFor a failureRecorder.
type waitingTest interface {
	testing.TB
	Deadline() (time.Time, bool)
}

// budgetFromEnv returns TEST_BUDGET, or defaultTestBudget when it is unset.
func budgetFromEnv() (time.Duration, error) {
	v := os.Getenv("TEST_BUDGET")
	if v == "" {
		return defaultTestBudget, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("TEST_BUDGET=%q: want a positive Go duration such as 3m", v)
	}
	return d, nil
}

// cleanupReserve is how much of go test's -timeout is kept for cleanups and
// reports: a fifth of it, at most maxCleanupReserve.
func cleanupReserve() time.Duration {
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 0 {
			return min(maxCleanupReserve, d/5)
		}
	}
	return maxCleanupReserve
}

// testContext returns the test's context: it ends testBudget after the
// first call (startProvider makes it first, so the budget counts from the
// test's start), and in any case cleanupReserve before go test's -timeout.
// Its cause says which of the two ended it.
func testContext(t waitingTest) context.Context {
	if ctx, ok := testContexts.Load(t); ok {
		return ctx.(context.Context)
	}
	deadline := time.Now().Add(testBudget)
	cause := fmt.Errorf("the test's budget of %s is spent; TEST_BUDGET sets it", testBudget)
	if end, ok := t.Deadline(); ok {
		if reserve := cleanupReserve(); end.Add(-reserve).Before(deadline) {
			deadline = end.Add(-reserve)
			cause = fmt.Errorf("go test -timeout ends in %s, kept for cleanups", reserve)
		}
	}
	ctx, cancel := context.WithDeadlineCause(context.Background(), deadline, cause)
	testContexts.Store(t, ctx)
	t.Cleanup(func() {
		cancel()
		testContexts.Delete(t)
	})
	return ctx
}

// cleanupContext bounds a wait in a cleanup, when the test's own deadline
// may have passed: it ends at a fifth of cleanupReserve before go test's
// -timeout, so that a test that ran out of time still reports.
func cleanupContext(t waitingTest) (context.Context, context.CancelFunc) {
	end, ok := t.Deadline()
	if !ok {
		return context.WithCancel(context.Background())
	}
	return context.WithDeadlineCause(context.Background(), end.Add(-cleanupReserve()/5),
		errors.New("go test -timeout is near"))
}

// eventually calls check every pollEvery until it reports done, for at most
// within and never past the test's deadline (in a cleanup, past
// cleanupContext's). When time runs out it fails the test, naming the test,
// what it waited for (what: "BackupService tenant-1/cp to be Ready"), how
// long, which limit ended the wait, and what check last saw. check gets a
// context that ends with the wait.
func eventually(t waitingTest, within time.Duration, what string, check func(ctx context.Context) (done bool, seen string)) {
	t.Helper()
	var parent context.Context
	if t.Context().Err() != nil {
		// The test has ended: this wait is a cleanup's.
		var cancel context.CancelFunc
		parent, cancel = cleanupContext(t)
		defer cancel()
	} else {
		parent = testContext(t)
	}
	ctx, cancel := context.WithTimeoutCause(parent, within, fmt.Errorf("the wait's limit of %s is reached", within))
	defer cancel()
	start := time.Now()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	last := "nothing yet"
	for {
		done, seen := check(ctx)
		if done {
			return
		}
		// What a check saw while its context ran out is only the context's
		// error; the state seen before it says more.
		if ctx.Err() == nil || last == "nothing yet" {
			last = seen
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: waited %s for %s (%v); last seen: %s",
				t.Name(), time.Since(start).Round(100*time.Millisecond), what, context.Cause(ctx), last)
		case <-tick.C:
		}
	}
}

// failureRecorder is a test that records its failure instead of failing:
// Fatalf keeps the message and ends the goroutine, as t.Fatalf does.
type failureRecorder struct {
	*testing.T
	failure string
}

func (r *failureRecorder) Fatalf(format string, args ...any) {
	r.failure = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestEventuallyReportsWhatItWaitedFor: a wait for something that never
// happens ends at its limit or the test's budget, whichever comes first,
// with a message naming the test, what it waited for, which limit ended it
// and what it last saw.
func TestEventuallyReportsWhatItWaitedFor(t *testing.T) {
	cases := map[string]struct {
		reason string
		budget time.Duration
		within time.Duration
		want   string
	}{
		"WaitLimit": {
			reason: "a wait ends at its own limit within the test's budget",
			budget: time.Hour, within: time.Second,
			want: "the wait's limit of 1s is reached",
		},
		"TestBudget": {
			reason: "a wait ends when the test's budget is spent",
			budget: time.Second, within: time.Hour,
			want: "the test's budget of 1s is spent",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			defer func(b time.Duration) { testBudget = b }(testBudget)
			testBudget = tc.budget
			rec := &failureRecorder{T: t}
			start := time.Now()
			done := make(chan struct{})
			go func() {
				defer close(done)
				eventually(rec, tc.within, "the sky to fall", func(context.Context) (bool, string) { return false, "the sky is up" })
			}()
			<-done
			took := time.Since(start)
			for _, want := range []string{t.Name() + ": waited 1", "for the sky to fall", tc.want, "last seen: the sky is up"} {
				if !strings.Contains(rec.failure, want) {
					t.Errorf("%s\nfailure %q does not say %q", tc.reason, rec.failure, want)
				}
			}
			if took < time.Second || took > 10*time.Second {
				t.Errorf("%s\nthe wait took %s, want about 1s", tc.reason, took)
			}
		})
	}
}
