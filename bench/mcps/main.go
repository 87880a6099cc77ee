// Command mcps measures what ManagedControlPlanes cost on the local
// landscape (issue #15): it creates -n of them at once and prints how long
// they took to become Ready (target ≤ 60 s for 20) and how much memory each
// added (target ≤ 150 MiB per MCP), then deletes them and checks that
// their processes are gone.
//
// It starts a landscape of its own (bin/marketplane landscape up in a
// temporary state directory; the binaries must be built: make build),
// measures the landscape's memory, creates -n namespaces and in each a
// ManagedControlPlane with an admin token (as examples/quickstart/mcp.yaml
// in the README quick start), all at once, and waits until every one
// reports Ready. After -settle it measures the memory again and prints:
//
//   - the time from the first create until all were Ready, and the
//     slowest and median MCP;
//   - the landscape's memory before and after, and per MCP
//     ((after − before) / n): the sum of VmRSS over every process of the
//     landscape (the supervisor and all its descendants: etcd, API
//     servers, controller managers, the operator, the providers, the
//     broker), and the sum of their PSS (smaps_rollup: pages shared by
//     several processes, such as the text of the one kube-apiserver binary
//     that every API server runs, counted once in all), which is what the
//     machine really spends;
//   - the number of processes before and after;
//
// and then deletes the MCPs, waits until they are gone and checks that
// none of the processes they added still runs and that state.json records
// none of their clusters.
// With -strict a missed target makes the exit status 1.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
	"github.com/marketplane/marketplane/api/common"
	corev2alpha1 "github.com/marketplane/marketplane/api/core/v2alpha1"
	"github.com/marketplane/marketplane/bench/internal/landscaperun"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
)

// The targets of issue #15 for 20 MCPs, the names the benchmark gives
// what it creates, and what it reads of /proc.
const (
	readyGoal   = 60 * time.Second
	perMCPGoal  = 150 << 20
	nsPrefix    = "bench-mcp-"
	mcpName     = "mcp"
	mib         = 1 << 20
	procPath    = "/proc"
	statusFile  = "status"
	rollupFile  = "smaps_rollup"
	goneTimeout = 2 * time.Minute
)

type config struct {
	bin     string
	n       int
	timeout time.Duration
	settle  time.Duration
	strict  bool
}

func main() {
	var c config
	flag.StringVar(&c.bin, "bin", "bin", "directory of the built binaries (make build)")
	flag.IntVar(&c.n, "n", 20, "ManagedControlPlanes created at once")
	flag.DurationVar(&c.timeout, "timeout", 10*time.Minute, "how long the MCPs may take to become Ready")
	flag.DurationVar(&c.settle, "settle", 20*time.Second, "wait after the landscape started and after all MCPs are Ready before memory is measured")
	flag.BoolVar(&c.strict, "strict", false, "exit 1 when a target is missed")
	flag.Parse()
	ok, err := run(context.Background(), c, os.Stdout)
	landscaperun.Exit("mcps", ok, err, c.strict)
}

func run(ctx context.Context, c config, out io.Writer) (bool, error) {
	fmt.Fprintln(out, "starting a landscape")
	l, err := landscaperun.Start(ctx, c.bin)
	if err != nil {
		return false, err
	}
	defer func() {
		if err := l.Down(); err != nil {
			fmt.Fprintln(os.Stderr, "mcps: landscape down:", err)
		}
	}()
	root, err := supervisorPID(l)
	if err != nil {
		return false, err
	}
	time.Sleep(c.settle) // the landscape's processes finish starting
	before, err := measure(root)
	if err != nil {
		return false, err
	}

	fmt.Fprintf(out, "creating %d ManagedControlPlanes at once\n", c.n)
	names, start, err := createMCPs(ctx, l, c.n)
	if err != nil {
		return false, err
	}
	readyAfter, err := waitReady(ctx, l.Onboarding, names, start, c.timeout)
	if err != nil {
		return false, err
	}
	fmt.Fprintf(out, "all %d Ready after %s\n", c.n, slices.Max(readyAfter).Round(10*time.Millisecond))

	time.Sleep(c.settle) // the new processes finish their start-up work
	after, err := measure(root)
	if err != nil {
		return false, err
	}
	added := map[int]string{}
	for pid, name := range after.procs {
		if _, ok := before.procs[pid]; !ok {
			added[pid] = name
		}
	}
	ok := report(out, c, readyAfter, before, after, added)

	fmt.Fprintf(out, "deleting the %d ManagedControlPlanes\n", c.n)
	deleted := time.Now()
	if err := deleteAll(ctx, l, names); err != nil {
		return false, err
	}
	fmt.Fprintf(out, "  all gone after %s\n", time.Since(deleted).Round(10*time.Millisecond))
	if err := checkGone(ctx, l, added); err != nil {
		return false, err
	}
	fmt.Fprintf(out, "  their %d processes are gone and state.json records none of their clusters\n", len(added))
	return ok, nil
}

// supervisorPID returns the PID of the landscape's supervisor, the root
// of the process tree measured.
func supervisorPID(l *landscaperun.Landscape) (int, error) {
	state, err := controlplane.ReadState(l.Dir)
	if err != nil {
		return 0, err
	}
	if state.Supervisor == nil {
		return 0, fmt.Errorf("state.json of %s records no supervisor", l.Dir)
	}
	return state.Supervisor.PID, nil
}

// createMCPs creates n namespaces and then, all at once, an MCP in each;
// it returns the namespaces and when the MCPs' creation began.
func createMCPs(ctx context.Context, l *landscaperun.Landscape, n int) ([]string, time.Time, error) {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s%02d", nsPrefix, i)
		if err := l.Onboarding.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i]}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, time.Time{}, fmt.Errorf("create namespace %s: %w", names[i], err)
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, ns := range names {
		wg.Go(func() { errs[i] = l.Onboarding.Create(ctx, newMCP(ns)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("create ManagedControlPlane %s/%s: %w", names[i], mcpName, err)
		}
	}
	return names, start, nil
}

// report prints the time to Ready and the memory the MCPs added, and says
// whether both met their targets.
func report(out io.Writer, c config, readyAfter []time.Duration, before, after usage, added map[int]string) bool {
	all := slices.Max(readyAfter)
	sorted := slices.Sorted(slices.Values(readyAfter))
	rssPer := (after.rss - before.rss) / int64(c.n)
	pssPer := (after.pss - before.pss) / int64(c.n)
	readyMet := all <= readyGoal
	rssMet, pssMet := rssPer <= perMCPGoal, pssPer <= perMCPGoal
	fmt.Fprintf(out, "\n%d ManagedControlPlanes created at once (%d CPUs):\n", c.n, runtime.NumCPU())
	fmt.Fprintf(out, "  time to all Ready:   %s (median %s)   target ≤ %s: %s\n",
		all.Round(10*time.Millisecond), sorted[len(sorted)/2].Round(10*time.Millisecond), readyGoal, verdict(readyMet))
	fmt.Fprintf(out, "  landscape RSS:       %s → %s, per MCP %s   target ≤ %d MiB: %s\n",
		gib(before.rss), gib(after.rss), mibs(rssPer), perMCPGoal/mib, verdict(rssMet))
	fmt.Fprintf(out, "  landscape PSS:       %s → %s, per MCP %s   target ≤ %d MiB: %s\n",
		gib(before.pss), gib(after.pss), mibs(pssPer), perMCPGoal/mib, verdict(pssMet))
	fmt.Fprintf(out, "  processes:           %d → %d (%d per MCP)\n", len(before.procs), len(after.procs), len(added)/max(c.n, 1))
	for _, line := range perCommand(after, added) {
		fmt.Fprintln(out, "   ", line)
	}
	return readyMet && rssMet && pssMet
}

// newMCP is the quick start's ManagedControlPlane in namespace ns.
func newMCP(ns string) *corev2alpha1.ManagedControlPlane {
	return &corev2alpha1.ManagedControlPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mcpName},
		Spec: corev2alpha1.ManagedControlPlaneSpec{IAM: corev2alpha1.IAMConfig{Tokens: []corev2alpha1.TokenConfig{{
			Name:        "admin",
			TokenConfig: clustersv1alpha1.TokenConfig{RoleRefs: []common.RoleRef{{Kind: "ClusterRole", Name: "cluster-admin"}}},
		}}}},
	}
}

// waitReady waits until every MCP reports Ready and returns, per MCP, when
// it was first seen Ready after start.
func waitReady(ctx context.Context, c client.Client, names []string, start time.Time, timeout time.Duration) ([]time.Duration, error) {
	readyAfter := make([]time.Duration, len(names))
	err := landscaperun.Poll(ctx, timeout, "every ManagedControlPlane Ready", func() (bool, error) {
		done := true
		for i, ns := range names {
			if readyAfter[i] != 0 {
				continue
			}
			mcp := &corev2alpha1.ManagedControlPlane{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: mcpName}, mcp); err != nil {
				done = false
				continue
			}
			if apimeta.IsStatusConditionTrue(mcp.Status.Conditions, common.ConditionTypeReady) {
				readyAfter[i] = time.Since(start)
			} else {
				done = false
			}
		}
		return done, nil
	})
	if err != nil {
		var pending []string
		for i, ns := range names {
			if readyAfter[i] == 0 {
				pending = append(pending, ns)
			}
		}
		return nil, fmt.Errorf("%w; not Ready: %s", err, strings.Join(pending, ", "))
	}
	return readyAfter, nil
}

// deleteAll deletes the MCPs and their namespaces and waits until the MCPs
// are gone.
func deleteAll(ctx context.Context, l *landscaperun.Landscape, names []string) error {
	for _, ns := range names {
		if err := l.Onboarding.Delete(ctx, &corev2alpha1.ManagedControlPlane{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: mcpName}}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete ManagedControlPlane %s/%s: %w", ns, mcpName, err)
		}
	}
	err := landscaperun.Poll(ctx, goneTimeout, "the ManagedControlPlanes to be gone", func() (bool, error) {
		list := &corev2alpha1.ManagedControlPlaneList{}
		if err := l.Onboarding.List(ctx, list); err != nil {
			return false, nil
		}
		return len(list.Items) == 0, nil
	})
	if err != nil {
		return err
	}
	for _, ns := range names {
		if err := l.Onboarding.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete namespace %s: %w", ns, err)
		}
	}
	return nil
}

// checkGone waits until none of the processes added is alive and
// state.json records no cluster provisioned for a request.
func checkGone(ctx context.Context, l *landscaperun.Landscape, added map[int]string) error {
	var left []string
	err := landscaperun.Poll(ctx, goneTimeout, "the MCPs' processes to end", func() (bool, error) {
		left = left[:0]
		for pid, name := range added {
			if _, err := os.Stat(fmt.Sprintf("%s/%d", procPath, pid)); err == nil {
				left = append(left, fmt.Sprintf("%s (pid %d)", name, pid))
			}
		}
		state, err := controlplane.ReadState(l.Dir)
		if err != nil {
			return false, nil
		}
		for name, rec := range state.Clusters {
			if rec.Request != nil {
				left = append(left, "cluster "+name+" in state.json")
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		slices.Sort(left)
		return fmt.Errorf("%w; still there: %s", err, strings.Join(left, ", "))
	}
	return nil
}

// usage is the memory of a process tree.
type usage struct {
	rss, pss int64
	// procs are the tree's processes: command name by PID.
	procs map[int]string
	// byPID is each process's RSS.
	byPID map[int]int64
}

// measure sums VmRSS and PSS over root and all its descendants.
func measure(root int) (usage, error) {
	entries, err := os.ReadDir(procPath)
	if err != nil {
		return usage{}, err
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	u := usage{procs: map[int]string{}, byPID: map[int]int64{}}
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		queue = append(queue, children[pid]...)
		fields, err := statusFields(pid)
		if err != nil {
			continue // ended meanwhile
		}
		rss := kib(fields["VmRSS"])
		u.rss += rss
		u.pss += pssOf(pid)
		u.procs[pid] = strings.TrimSpace(fields["Name"])
		u.byPID[pid] = rss
	}
	if len(u.procs) == 0 {
		return u, fmt.Errorf("the landscape's supervisor (pid %d) does not run", root)
	}
	return u, nil
}

func parentOf(pid int) (int, bool) {
	fields, err := statusFields(pid)
	if err != nil {
		return 0, false
	}
	ppid, err := strconv.Atoi(strings.TrimSpace(fields["PPid"]))
	return ppid, err == nil
}

// statusFields reads /proc/<pid>/status as key → value.
func statusFields(pid int) (map[string]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("%s/%d/%s", procPath, pid, statusFile))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out, nil
}

// pssOf is the PSS of a process from smaps_rollup (0 when unreadable).
func pssOf(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("%s/%d/%s", procPath, pid, rollupFile))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			return kib(v)
		}
	}
	return 0
}

// kib parses "123 kB" into bytes (0 when it cannot).
func kib(s string) int64 {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0
	}
	return n << 10
}

// perCommand summarises the added processes by command: count and
// average RSS.
func perCommand(u usage, added map[int]string) []string {
	type agg struct {
		n   int
		rss int64
	}
	by := map[string]*agg{}
	for pid, name := range added {
		a := by[name]
		if a == nil {
			a = &agg{}
			by[name] = a
		}
		a.n++
		a.rss += u.byPID[pid]
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(by)) {
		a := by[name]
		out = append(out, fmt.Sprintf("%-24s ×%d, RSS %s each", name, a.n, mibs(a.rss/int64(a.n))))
	}
	return out
}

func verdict(met bool) string {
	if met {
		return "MET"
	}
	return "MISSED"
}

func gib(b int64) string  { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }
func mibs(b int64) string { return fmt.Sprintf("%d MiB", b/mib) }
