package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/marketplane/marketplane/internal/landscape"
)

// result is what one backend's run measured.
type result struct {
	backend       string
	n             int
	target        target
	all, median   time.Duration
	before, after usage
	// added are the processes the MCPs added: command name by PID.
	added map[int]string
	met   bool
}

func newResult(backend string, n int, readyAfter []time.Duration, before, after usage) result {
	sorted := slices.Sorted(slices.Values(readyAfter))
	r := result{
		backend: backend, n: n, target: targets[backend],
		all: sorted[len(sorted)-1], median: sorted[len(sorted)/2],
		before: before, after: after, added: map[int]string{},
	}
	for pid, name := range after.procs {
		if _, ok := before.procs[pid]; !ok {
			r.added[pid] = name
		}
	}
	return r
}

func (r result) rssPerMCP() int64 { return (r.after.rss - r.before.rss) / int64(r.n) }
func (r result) pssPerMCP() int64 { return (r.after.pss - r.before.pss) / int64(r.n) }

// report prints the time to Ready and the memory the MCPs added, and says
// whether both met their targets.
func report(out io.Writer, r result) bool {
	t := r.target
	readyMet := r.all <= t.ready
	rssMet, pssMet := r.rssPerMCP() <= t.perMCP, r.pssPerMCP() <= t.perMCP
	fmt.Fprintf(out, "\n%d ManagedControlPlanes created at once, backend %s (%d CPUs, load average %s):\n", r.n, r.backend, runtime.NumCPU(), loadAverage())
	fmt.Fprintf(out, "  time to all Ready:   %s (median %s)   target ≤ %s: %s\n",
		r.all.Round(10*time.Millisecond), r.median.Round(10*time.Millisecond), t.ready, verdict(readyMet))
	fmt.Fprintf(out, "  landscape RSS:       %s → %s, per MCP %s   target ≤ %s: %s\n",
		gib(r.before.rss), gib(r.after.rss), mibs(r.rssPerMCP()), mibs(t.perMCP), verdict(rssMet))
	fmt.Fprintf(out, "  landscape PSS:       %s → %s, per MCP %s   target ≤ %s: %s\n",
		gib(r.before.pss), gib(r.after.pss), mibs(r.pssPerMCP()), mibs(t.perMCP), verdict(pssMet))
	if r.backend == landscape.BackendKCP {
		b, a := r.before.pssOfCommand(landscape.KCPProcess), r.after.pssOfCommand(landscape.KCPProcess)
		fmt.Fprintf(out, "  kcp's own PSS:       %s → %s, per MCP %s\n", gib(b), gib(a), mibs((a-b)/int64(r.n)))
	}
	fmt.Fprintf(out, "  processes:           %d → %d (%d per MCP)\n", len(r.before.procs), len(r.after.procs), len(r.added)/r.n)
	for _, line := range perCommand(r.after, r.added) {
		fmt.Fprintln(out, "   ", line)
	}
	return readyMet && rssMet && pssMet
}

// summary prints the backends' figures side by side.
func summary(out io.Writer, results []result) {
	fmt.Fprintf(out, "\n%-10s %5s %12s %12s %14s %14s %10s\n", "backend", "MCPs", "all Ready", "median", "PSS per MCP", "RSS per MCP", "processes")
	for _, r := range results {
		fmt.Fprintf(out, "%-10s %5d %12s %12s %14s %14s %10s\n", r.backend, r.n,
			r.all.Round(10*time.Millisecond), r.median.Round(10*time.Millisecond),
			mibs(r.pssPerMCP()), mibs(r.rssPerMCP()), fmt.Sprintf("%d → %d", len(r.before.procs), len(r.after.procs)))
	}
}

func verdict(met bool) string {
	if met {
		return "MET"
	}
	return "MISSED"
}

func gib(b int64) string  { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }
func mibs(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/mib) }
