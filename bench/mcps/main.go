// Command mcps measures what ManagedControlPlanes cost on the local
// landscape, for each backend that can serve their clusters: with
// -backend apiserver (a kube-apiserver and controller manager per MCP) it
// creates -n of them at once, target all Ready ≤ 60 s for 20 and
// ≤ 150 MiB per MCP; with -backend kcp (a workspace of one kcp server per
// MCP) it creates -kcp-n, target all Ready ≤ 120 s for 500 and ≤ 10 MiB
// per MCP; -backend both runs the one and then the other.
//
// For each backend it starts a landscape of its own (bin/marketplane
// landscape up in a temporary state directory, with --mcp-backend kcp for
// kcp; the binaries must be built: make build, and bin/kcp: make tools),
// measures the landscape's memory, creates the namespaces and in each a
// ManagedControlPlane with an admin token (as examples/quickstart/mcp.yaml
// in the README quick start), all at once, and waits until every one
// reports Ready. After -settle it measures the memory again and prints:
//
//   - the time from the first create until all were Ready, and the
//     median MCP;
//   - the landscape's memory before and after, and per MCP
//     ((after − before) / n): the sum of VmRSS over every process of the
//     landscape (the supervisor and all its descendants: etcd, API
//     servers, controller managers, kcp, the operator, the providers, the
//     broker), and the sum of their PSS (smaps_rollup: pages shared by
//     several processes, such as the text of the one kube-apiserver binary
//     that every API server runs, counted once in all), which is what the
//     machine really spends; for kcp also kcp's own PSS;
//   - the number of processes before and after;
//
// and then deletes the MCPs, waits until they are gone and checks that
// none of the processes they added still runs, that state.json records
// none of their clusters and, for kcp, that no Workspace they added is
// left. With -strict a missed target makes the exit status 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/marketplane/marketplane/bench/internal/landscaperun"
	"github.com/marketplane/marketplane/internal/landscape"
)

// The names the benchmark gives what it creates, and what it reads of
// /proc.
const (
	nsPrefix   = "bench-mcp-"
	mcpName    = "mcp"
	mib        = 1 << 20
	procPath   = "/proc"
	statusFile = "status"
	rollupFile = "smaps_rollup"
)

// backendBoth runs the API-server backend and then kcp.
const backendBoth = "both"

// target is what a backend's MCPs must meet.
type target struct {
	ready  time.Duration
	perMCP int64
}

// The targets: 20 MCPs with a kube-apiserver each, 500 kcp workspaces.
var targets = map[string]target{
	landscape.BackendAPIServer: {ready: 60 * time.Second, perMCP: 150 << 20},
	landscape.BackendKCP:       {ready: 120 * time.Second, perMCP: 10 << 20},
}

type config struct {
	bin         string
	backend     string
	n, kcpN     int
	timeout     time.Duration
	goneTimeout time.Duration
	settle      time.Duration
	strict      bool
}

func main() {
	var c config
	flag.StringVar(&c.bin, "bin", "bin", "directory of the built binaries (make build; bin/kcp: make tools)")
	flag.StringVar(&c.backend, "backend", landscape.BackendAPIServer, "what serves the MCPs: apiserver, kcp, or both (the one, then the other, each on a landscape of its own)")
	flag.IntVar(&c.n, "n", 20, "ManagedControlPlanes created at once with the apiserver backend")
	flag.IntVar(&c.kcpN, "kcp-n", 500, "ManagedControlPlanes created at once with the kcp backend")
	flag.DurationVar(&c.timeout, "timeout", 10*time.Minute, "how long the MCPs may take to become Ready")
	flag.DurationVar(&c.goneTimeout, "gone-timeout", 10*time.Minute, "how long the MCPs, their processes and workspaces may take to be gone after deletion")
	flag.DurationVar(&c.settle, "settle", 20*time.Second, "wait after the landscape started and after all MCPs are Ready before memory is measured")
	flag.BoolVar(&c.strict, "strict", false, "exit 1 when a target is missed")
	flag.Parse()
	// Interrupted, the run fails its waits and removes its landscape.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ok, err := run(ctx, c, os.Stdout)
	stop()
	landscaperun.Exit("mcps", ok, err, c.strict)
}

// run measures each backend -backend names, one after the other, and
// says whether all met their targets.
func run(ctx context.Context, c config, out io.Writer) (bool, error) {
	var backends []string
	switch c.backend {
	case landscape.BackendAPIServer, landscape.BackendKCP:
		backends = []string{c.backend}
	case backendBoth:
		backends = []string{landscape.BackendAPIServer, landscape.BackendKCP}
	default:
		return false, fmt.Errorf("-backend %q: want %s, %s or %s", c.backend, landscape.BackendAPIServer, landscape.BackendKCP, backendBoth)
	}
	allMet := true
	var results []result
	for _, b := range backends {
		n := c.n
		if b == landscape.BackendKCP {
			n = c.kcpN
		}
		if n < 1 {
			return false, errors.New("the number of MCPs must be at least 1")
		}
		r, err := runBackend(ctx, c, b, n, out)
		if err != nil {
			return false, fmt.Errorf("%s backend: %w", b, err)
		}
		allMet = allMet && r.met
		results = append(results, r)
	}
	if len(results) > 1 {
		summary(out, results)
	}
	return allMet, nil
}

// runBackend starts a landscape whose MCPs b serves, creates n MCPs on
// it, reports and deletes them.
func runBackend(ctx context.Context, c config, b string, n int, out io.Writer) (result, error) {
	fmt.Fprintf(out, "starting a landscape (--mcp-backend %s)\n", b)
	l, err := landscaperun.Start(ctx, c.bin, "--mcp-backend", b)
	if err != nil {
		return result{}, err
	}
	defer func() {
		if err := l.Down(); err != nil {
			fmt.Fprintln(os.Stderr, "mcps: landscape down:", err)
		}
	}()
	root, err := supervisorPID(l)
	if err != nil {
		return result{}, err
	}
	watchClient, err := watcher(l)
	if err != nil {
		return result{}, err
	}
	var ws *workspaces
	if b == landscape.BackendKCP {
		if ws, err = kcpWorkspaces(l); err != nil {
			return result{}, err
		}
	}
	time.Sleep(c.settle) // the landscape's processes finish starting
	before, err := measure(root)
	if err != nil {
		return result{}, err
	}
	if ws != nil {
		if err := ws.remember(ctx); err != nil {
			return result{}, err
		}
	}

	fmt.Fprintf(out, "creating %d ManagedControlPlanes at once\n", n)
	names, start, err := createMCPs(ctx, l, n)
	if err != nil {
		return result{}, err
	}
	readyAfter, err := waitReady(ctx, watchClient, names, start, c.timeout)
	if err != nil {
		return result{}, err
	}
	time.Sleep(c.settle) // the new processes finish their start-up work
	after, err := measure(root)
	if err != nil {
		return result{}, err
	}
	r := newResult(b, n, readyAfter, before, after)
	r.met = report(out, r)

	if err := remove(ctx, c, l, names, r.added, ws, out); err != nil {
		return r, err
	}
	return r, nil
}

// remove deletes the MCPs and checks that what they added is gone.
func remove(ctx context.Context, c config, l *landscaperun.Landscape, names []string, added map[int]string, ws *workspaces, out io.Writer) error {
	fmt.Fprintf(out, "deleting the %d ManagedControlPlanes\n", len(names))
	deleted := time.Now()
	if err := deleteAll(ctx, l, names, c.goneTimeout); err != nil {
		return err
	}
	fmt.Fprintf(out, "  all gone after %s\n", time.Since(deleted).Round(10*time.Millisecond))
	if err := checkGone(ctx, l, added, c.goneTimeout); err != nil {
		return err
	}
	fmt.Fprintf(out, "  their %d processes are gone and state.json records none of their clusters\n", len(added))
	if ws == nil {
		return nil
	}
	if err := ws.waitGone(ctx, c.goneTimeout); err != nil {
		return err
	}
	fmt.Fprintf(out, "  no Workspace they added is left in kcp (%s after the deletion)\n", time.Since(deleted).Round(10*time.Millisecond))
	return nil
}
