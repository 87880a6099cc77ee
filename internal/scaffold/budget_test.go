package scaffold

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// landscapeStart bounds the start of the generated suite's landscape in
// TestMain, outside every test's budget: its clusters and controllers,
// whose waits are providertest's (90 s each). It takes about 20 s idle.
const landscapeStart = 5 * time.Minute

// integrationTests counts the integration tests of a rendered
// internal/controller test file: the Test functions that start the test's
// budget (startProvider or testContext), split into those that run one
// after another and those that run in parallel.
func integrationTests(src []byte) (serial, parallel int) {
	for _, fn := range strings.Split(string(src), "\nfunc Test")[1:] {
		body, _, _ := strings.Cut(fn, "\n}\n")
		if !strings.Contains(body, "startProvider(t)") && !strings.Contains(body, "testContext(t)") {
			continue
		}
		if strings.Contains(body, "t.Parallel()") {
			parallel++
		} else {
			serial++
		}
	}
	return serial, parallel
}

// TestMakeTestTimeoutCoversBudgets: in every variant, go test's -timeout in
// the generated `make test` is above the sum of the budgets of the tests
// that run one after another (the serial ones, then the parallel ones
// TestParallel at a time), plus the landscape's start and the reserve kept
// for cleanups, so that a test that runs out of time fails by itself before
// go test ends the binary with a goroutine dump.
func TestMakeTestTimeoutCoversBudgets(t *testing.T) {
	const maxCleanupReserve = 2 * time.Minute // as in wait_test.go.tmpl
	for _, workload := range []bool{false, true} {
		t.Run(fmt.Sprintf("workload=%v", workload), func(t *testing.T) {
			v := newValues(Options{Module: "example.org/x", Kind: "Backup", WorkloadCluster: workload}, "x", "x.example.org")
			files, err := render(v)
			if err != nil {
				t.Fatal(err)
			}
			var serial, parallel int
			for _, f := range files {
				switch {
				case f.Path == "Makefile":
					for _, want := range []string{"TEST_TIMEOUT  ?= " + v.TestTimeout, "TEST_PARALLEL ?= " + fmt.Sprint(TestParallel),
						"-p 1 -parallel $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT)", "TEST_BUDGET=$(TEST_BUDGET)"} {
						if !bytes.Contains(f.Data, []byte(want)) {
							t.Errorf("the Makefile lacks %q", want)
						}
					}
				case f.Path == "internal/controller/wait_test.go":
					if want := "const defaultTestBudget = " + v.TestBudget + "\n"; !bytes.Contains(f.Data, []byte(want)) {
						t.Errorf("wait_test.go lacks %q", want)
					}
				case strings.HasPrefix(f.Path, "internal/controller/") && strings.HasSuffix(f.Path, "_test.go"):
					s, p := integrationTests(f.Data)
					serial, parallel = serial+s, parallel+p
				}
			}
			if serial+parallel < 10 {
				t.Fatalf("found %d serial and %d parallel integration tests; the count misses some", serial, parallel)
			}
			// TestParallel workers, each test within TestBudget: the last
			// one ends at most (parallel+TestParallel-1)/TestParallel
			// budgets after the first starts.
			need := landscapeStart + time.Duration(serial)*TestBudget +
				time.Duration(parallel+TestParallel-1)*TestBudget/TestParallel + maxCleanupReserve
			if TestTimeout <= need {
				t.Errorf("-timeout %s is not above %s: the landscape's start (%s), %d serial and %d parallel tests %d at a time within %s each, and the cleanup reserve (%s)",
					TestTimeout, need, landscapeStart, serial, parallel, TestParallel, TestBudget, maxCleanupReserve)
			}
		})
	}
}
