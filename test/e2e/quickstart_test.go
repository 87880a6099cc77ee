package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/marketplane/marketplane/pkg/testenv"
)

const marker = "<!-- quickstart -->"

// quickstartBlocks returns the shell blocks of the README that follow a
// quickstart marker, in order.
func quickstartBlocks(readme string) []string {
	var blocks []string
	for _, part := range strings.Split(readme, marker)[1:] {
		start := strings.Index(part, "```sh\n")
		end := strings.Index(part[start+6:], "```")
		if start < 0 || end < 0 {
			continue
		}
		blocks = append(blocks, part[start+6:start+6+end])
	}
	return blocks
}

// toolBinaries are the binaries of `make tools` the quick start needs:
// the landscape's control plane (with kube-scheduler, kwok and its stages
// for the workload cluster's simulated nodes), and kubectl for the
// README's commands.
var toolBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages.yaml", "kubectl"}

// landscapeBinaries are the binaries of `make build` the quick start runs:
// marketplane (the CLI, with the supervisor in it), the operator (two
// replicas), the broker and the two providers and the marketplace the
// operator starts.
var landscapeBinaries = []string{
	"github.com/marketplane/marketplane/cmd/marketplane",
	"github.com/marketplane/marketplane/cmd/marketplane-operator",
	"github.com/marketplane/marketplane/cmd/marketplane-broker",
	"github.com/marketplane/marketplane/cmd/marketplane-interoperator",
	"github.com/marketplane/marketplane/cmd/marketplane-marketplace",
	"github.com/marketplane/marketplane/providers/sample/cmd/sample",
}

// TestQuickStart does what a user of the README does, in a directory of its
// own laid out like the checkout (bin/, examples/), so that it neither
// needs nor disturbs a landscape in the checkout: what `make run` does
// (build the binaries the landscape runs into bin/ beside the tools,
// `bin/marketplane landscape up`), then every quick-start block
// of the README in order, in one shell. The last block runs `landscape
// down`; the test checks that it left no process, port or state behind.
func TestQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Marketplane and runs the README quick start on a landscape; run without -short")
	}
	// Beside the validation tests: each has a directory, a landscape and
	// ports of its own, and the package takes the time of its longest
	// test rather than the sum.
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := quickstartBlocks(string(readme))
	if len(blocks) < 4 {
		t.Fatalf("found %d quick-start blocks in README.md, want at least 4", len(blocks))
	}
	assets, err := testenv.BinaryDir()
	if err != nil {
		// Not a skip: `make test` builds the tools, and a skipped
		// quick start would pass CI untested.
		t.Fatal(err)
	}

	// The user's checkout: bin/ with the tools and Marketplane's
	// binaries (as `make tools build` leaves it), and the examples.
	work := t.TempDir()
	bin := filepath.Join(work, "bin")
	testenv.BuildBinaries(t, bin, landscapeBinaries...)
	for _, name := range toolBinaries {
		if err := os.Symlink(filepath.Join(assets, name), filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			t.Fatalf("%v (run 'make tools')", err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "examples"), filepath.Join(work, "examples")); err != nil {
		t.Fatal(err)
	}
	marketplane := filepath.Join(bin, "marketplane")
	t.Cleanup(func() {
		// Whatever happened, leave nothing running (a no-op after the
		// quick start's own down). Registered after TempDir, so it runs
		// before the directory is removed.
		cmd := exec.Command(marketplane, "landscape", "down")
		cmd.Dir = work
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("landscape down: %v\n%s", err, out)
		}
	})

	// Registered after the cleanup above, so it runs first: a failed quick
	// start shows the landscape's state and the ends of its logs.
	t.Cleanup(func() {
		if t.Failed() {
			logLandscape(t, work, marketplane)
		}
	})

	start := time.Now()
	// make run's command, with a start timeout for a loaded machine: while
	// the suite's first packages start about thirty API servers, CI saw
	// the platform API server wait more than the default 3 minutes for the
	// landscape's etcd (load average 55).
	run(t, work, "landscape up (make run)", marketplane, "landscape", "up", "--start-timeout", "8m")
	t.Logf("landscape ready after %s", time.Since(start).Round(100*time.Millisecond))
	pids, ports := recorded(t, filepath.Join(work, ".landscape", "state.json"))
	if len(pids) < 7 || len(ports) < 4 {
		t.Fatalf("state.json records %d processes and %d ports; want the etcd, API servers and controller managers", len(pids), len(ports))
	}
	all := withDescendants(pids)
	t.Logf("landscape processes: %d recorded, %d with their children (providers, broker); resident memory: %d MiB", len(pids), len(all), rssMiB(all))

	// The README's kubectl waits fit a machine doing nothing else. In the
	// suite, the first packages start about thirty API servers beside this
	// landscape: CI saw its platform API server answer nothing for four
	// minutes (load average 46-53), both operator replicas lose their lease
	// and the MCP wait of 180 s run out while the new leader went on. The
	// commands stay as written; only their timeouts are tripled.
	for i, b := range blocks {
		blocks[i] = loadedTimeouts(b, 3)
	}
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	last := len(blocks) - 1
	for i, b := range blocks[:last] {
		fmt.Fprintf(&script, "echo \"### quick-start block %d (at ${SECONDS}s)\"\n%s\n", i+1, b)
	}
	// The OSB calls once more as Service Manager and eden send them, at
	// 2.13, for instances and bindings of their own; then the last block
	// (unbind, deprovision, down) as written.
	fmt.Fprintf(&script, "echo \"### the OSB calls at 2.13 (at ${SECONDS}s)\"\nexport OSB_API_VERSION=2.13\n%s\nunset OSB_API_VERSION\n", osbCallsAgain(blocks))
	fmt.Fprintf(&script, "echo \"### quick-start block %d (at ${SECONDS}s)\"\n%s\n", last+1, blocks[last])
	out := run(t, work, "the README quick start", "bash", "-c", script.String())
	for _, want := range []string{
		"sp-sample",              // the marketplace lists the sample provider ...
		"sf-interoperator-",      // ... and the sample catalog's services, to any tenant
		"KIND:      Sample",      // with the kind's schema ...
		"Version is the version", // ... field by field
		"pods\t<integer>",        // and the plan's parameters
		"offering links for system:serviceaccount:console-demo:demo", // the console, signed in as the demo tenant
		"condition met",                  // MCP and Sample became Ready
		"sampleobjects.domain.sample",    // the provider's CRD is in the tenant's cluster
		`"state":"succeeded"`,            // provisioning finished
		"configmap/hello created",        // the bind credentials work in their namespace
		"forbidden",                      // ... and nowhere else
		`cannot list resource "secrets"`, // a code-based binding has only the offering's rights
		"Removed the landscape",          // down
	} {
		if !strings.Contains(strings.ToLower(out), strings.ToLower(want)) {
			t.Errorf("quick-start output lacks %q", want)
		}
	}

	deadline := time.Now().Add(15 * time.Second)
	for _, pid := range all {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("process %d of the landscape is still running after down", pid)
		}
	}
	for _, port := range ports {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Errorf("port %d is still in use after down: %v", port, err)
			continue
		}
		l.Close()
	}
	if _, err := os.Stat(filepath.Join(work, ".landscape")); !os.IsNotExist(err) {
		t.Errorf(".landscape still exists after down (stat: %v)", err)
	}
}

// kubectlTimeout is a kubectl --timeout of whole seconds.
var kubectlTimeout = regexp.MustCompile(`--timeout=(\d+)s\b`)

// loadedTimeouts returns block with every --timeout=Ns multiplied by factor.
func loadedTimeouts(block string, factor int) string {
	return kubectlTimeout.ReplaceAllStringFunc(block, func(m string) string {
		n, err := strconv.Atoi(kubectlTimeout.FindStringSubmatch(m)[1])
		if err != nil {
			return m
		}
		return fmt.Sprintf("--timeout=%ds", n*factor)
	})
}

// quickstartIDs are the OSB instance and binding ids of the quick start.
var quickstartIDs = regexp.MustCompile(`\b(ns|sample|cache|cluster|b|sb|cb|kb)-1\b`)

// osbCallsAgain returns the quick start's OSB blocks (those that use
// $BROKER_URL) with every instance and binding id N-1 renamed N-2, and of
// the last block only its osb lines: the README's OSB calls once more, for
// instances of their own, deleted again.
func osbCallsAgain(blocks []string) string {
	var b strings.Builder
	last := len(blocks) - 1
	for _, block := range blocks[:last] {
		if strings.Contains(block, "$BROKER_URL") {
			b.WriteString(quickstartIDs.ReplaceAllString(block, "$1-2"))
		}
	}
	for _, line := range strings.Split(blocks[last], "\n") {
		if strings.HasPrefix(line, "osb ") {
			b.WriteString(quickstartIDs.ReplaceAllString(line, "$1-2") + "\n")
		}
	}
	return b.String()
}

func run(t *testing.T, dir, what string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("%s:\n%s", what, out.String())
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return out.String()
}

// logLandscape logs `landscape status` of the landscape in work and the
// last lines of the logs of the processes that answer a tenant: the broker
// and the operators.
func logLandscape(t *testing.T, work, marketplane string) {
	t.Helper()
	cmd := exec.Command(marketplane, "landscape", "status")
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	t.Logf("landscape status (%v):\n%s", err, out)
	logs, _ := filepath.Glob(filepath.Join(work, ".landscape", "logs", "*.log"))
	for _, path := range logs {
		name := filepath.Base(path)
		if name != "broker.log" && !strings.HasPrefix(name, "operator-") {
			continue
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Logf("%s: %v", name, err)
			continue
		}
		lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
		t.Logf("%s, last lines:\n%s", name, strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}

// alive reports whether pid runs; a zombie (exited, not yet reaped by
// whoever adopted it) does not count.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// recorded collects every "pid" and "port" number in state.json.
func recorded(t *testing.T, path string) (pids, ports []int) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if n, ok := x.(float64); ok && n > 0 {
					switch strings.ToLower(k) {
					case "pid":
						pids = append(pids, int(n))
					case "port", "clientport", "peerport":
						ports = append(ports, int(n))
					}
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return pids, ports
}

// withDescendants returns pids and every process below them.
func withDescendants(pids []int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(stat), ')')
		var state string
		var ppid int
		if _, err := fmt.Sscanf(string(stat[i+2:]), "%s %d", &state, &ppid); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	seen := map[int]bool{}
	var out []int
	var add func(int)
	add = func(pid int) {
		if seen[pid] {
			return
		}
		seen[pid] = true
		out = append(out, pid)
		for _, c := range children[pid] {
			add(c)
		}
	}
	for _, pid := range pids {
		add(pid)
	}
	return out
}

// rssMiB sums VmRSS of pids.
func rssMiB(pids []int) int {
	total := 0
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(raw), "\n") {
			var kb int
			if _, err := fmt.Sscanf(line, "VmRSS: %d kB", &kb); err == nil {
				total += kb
			}
		}
	}
	return total / 1024
}

// TestLoadedTimeouts checks that the quick start's blocks keep every
// command and only get longer kubectl waits.
func TestLoadedTimeouts(t *testing.T) {
	in := "kubectl wait --for=condition=Ready mcp/demo --timeout=180s\nkubectl delete -f x.yaml --wait --timeout=120s\necho --timeout=5m"
	want := "kubectl wait --for=condition=Ready mcp/demo --timeout=540s\nkubectl delete -f x.yaml --wait --timeout=360s\necho --timeout=5m"
	if got := loadedTimeouts(in, 3); got != want {
		t.Errorf("loadedTimeouts(…, 3) =\n%s\nwant\n%s", got, want)
	}
}
