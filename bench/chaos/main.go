// Command chaos kills one landscape process after another with SIGKILL,
// each during a run of -n instances, and checks that the landscape heals
// with nothing lost and no one stepping in (issue #14): every instance
// ends succeeded, the workload cluster holds each instance's objects
// exactly once, and the killed process runs again.
//
// It starts a landscape of its own (bin/marketplane landscape up in a
// temporary state directory; the binaries must be built: make build) with
// the operator's own leader-election timings (--operator-lease 10s). For
// each victim it creates -n SFServiceInstances of the sample plan "small"
// in a namespace of their own, as the broker records them (-workers at
// once; requests are retried while the onboarding API server is down) —
// except for the broker's round, which orders them through the broker
// (PUT with accepts_incomplete, repeated while the broker is down, as an
// OSB platform does) — and once -kill-at of them succeeded it kills the
// victim:
//
//   - landscape processes (etcd, the kube-apiservers, the broker, and, as
//     "operator", the operator replica that leads) by the PID in
//     state.json; they are back when state.json records a restart; the
//     providers die with the operator's leader and the other replica
//     starts them again once it leads;
//   - provider processes (the inter-operator, the sample provider) by the
//     PID of the operator's last "Started a run process" line; they are
//     back when the operator started them again.
//
// It prints, per victim, the instances that succeeded, duplicates and
// missing objects, how long after the kill the process ran again and how
// long after the kill the last instance succeeded. The landscape's
// supervising process is not a victim: a killed supervisor is resumed by
// `landscape up` (docs/operations.md).
// With -strict any victim that did not heal makes the exit status 1.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/marketplane/marketplane/bench/internal/landscaperun"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
)

// victimOperator is the operator replica that leads when it is killed.
const victimOperator = "operator"

// defaultVictims are the processes killed, in order.
var defaultVictims = []string{
	"etcd",
	"kube-apiserver-onboarding",
	"kube-apiserver-workload",
	"kube-apiserver-platform",
	"broker",
	victimOperator,
	"provider:interoperator",
	"provider:sample",
}

type config struct {
	bin     string
	n       int
	workers int
	killAt  float64
	timeout time.Duration
	victims string
	strict  bool
}

// result is one victim's round.
type result struct {
	victim           string
	succeeded        int
	failed           int
	dups, missing    int
	backAfter        time.Duration
	doneAfterKill    time.Duration
	err              error
	killedAtProgress int
}

func (r result) healed(n int) bool {
	return r.err == nil && r.succeeded == n && r.dups == 0 && r.missing == 0 && r.backAfter > 0
}

func main() {
	var c config
	flag.StringVar(&c.bin, "bin", "bin", "directory of the built binaries (make build)")
	flag.IntVar(&c.n, "n", 100, "instances per victim")
	flag.IntVar(&c.workers, "workers", 8, "instances created at once")
	flag.Float64Var(&c.killAt, "kill-at", 0.2, "fraction of the instances that succeeded when the victim is killed")
	flag.DurationVar(&c.timeout, "timeout", 5*time.Minute, "how long each victim's instances may take")
	flag.StringVar(&c.victims, "victims", strings.Join(defaultVictims, ","), "processes to kill, in order (provider:<name> for a provider's run process)")
	flag.BoolVar(&c.strict, "strict", false, "exit 1 when a victim did not heal")
	flag.Parse()
	ok, err := run(context.Background(), c, os.Stdout)
	landscaperun.Exit("chaos", ok, err, c.strict)
}

func run(ctx context.Context, c config, out io.Writer) (bool, error) {
	fmt.Fprintln(out, "starting a landscape")
	l, err := landscaperun.Start(ctx, c.bin, "--operator-lease", "10s")
	if err != nil {
		return false, err
	}
	defer func() {
		if err := l.Down(); err != nil {
			fmt.Fprintln(os.Stderr, "chaos: landscape down:", err)
		}
	}()
	var results []result
	for i, victim := range strings.Split(c.victims, ",") {
		r := round(ctx, l, c, i, strings.TrimSpace(victim))
		results = append(results, r)
		fmt.Fprintf(out, "%s: %d/%d succeeded, back after %s, last instance %s after the kill", r.victim, r.succeeded, c.n,
			r.backAfter.Round(10*time.Millisecond), r.doneAfterKill.Round(10*time.Millisecond))
		if r.err != nil {
			fmt.Fprintf(out, " (%v)", r.err)
		}
		fmt.Fprintln(out)
	}

	ok := true
	fmt.Fprintf(out, "\n%d instances per victim, killed with SIGKILL at %.0f%% succeeded (the broker: at %.0f%% of its PUTs answered, the instances ordered through it):\n", c.n, c.killAt*100, c.killAt*100)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "victim\tsucceeded\tfailed\tduplicates\tmissing\tback after\tlast instance after kill\thealed")
	for _, r := range results {
		healed := r.healed(c.n)
		ok = ok && healed
		fmt.Fprintf(tw, "%s\t%d/%d\t%d\t%d\t%d\t%s\t%s\t%v\n", r.victim, r.succeeded, c.n, r.failed, r.dups, r.missing,
			r.backAfter.Round(10*time.Millisecond), r.doneAfterKill.Round(10*time.Millisecond), healed)
	}
	_ = tw.Flush()
	return ok, nil
}

// round provisions c.n instances, kills victim during the run and waits
// until they are done and the victim runs again.
func round(ctx context.Context, l *landscaperun.Landscape, c config, index int, victim string) result {
	r := result{victim: victim}
	ns := fmt.Sprintf("chaos-%d", index)
	names := make([]string, c.n)
	for i := range names {
		names[i] = fmt.Sprintf("c%d-%04d", index, i)
	}
	// The broker's round orders its instances through the broker, so
	// that the kill hits requests on their way; the other rounds record
	// them as the broker does, so that the figures are the victim's.
	// Its kill comes when -kill-at of the PUTs were answered (they are
	// answered at once, long before the instances succeed).
	count, progress, createErr := startCreating(ctx, l, c, ns, names, victim == "broker")

	var killedAt time.Time
	var back func() (bool, error)
	deadline := time.Now().Add(c.timeout)
	for {
		if time.Now().After(deadline) {
			r.err = fmt.Errorf("after %s: %d succeeded, %d failed", c.timeout, r.succeeded, r.failed)
			return r
		}
		succeeded, failed, err := count()
		if err == nil {
			r.succeeded, r.failed = succeeded, failed
		}
		if killedAt.IsZero() && float64(progress(r.succeeded)) >= c.killAt*float64(c.n) {
			if back, err = kill(l, victim); err != nil {
				r.err = err
				return r
			}
			killedAt = time.Now()
			r.killedAtProgress = r.succeeded
		}
		if !killedAt.IsZero() {
			r.noteRecovery(killedAt, back, c.n)
		}
		if r.doneAfterKill != 0 && r.backAfter != 0 {
			break
		}
		select {
		case err := <-createErr:
			if err != nil {
				r.err = fmt.Errorf("create the instances: %w", err)
				return r
			}
			createErr = nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	r.dups, r.missing, r.err = l.Duplicates(ctx, names)
	return r
}

// startCreating starts ordering the instances in the background and
// returns how to count them, how far the ordering is (what -kill-at
// compares) and the channel that reports the end of the ordering.
func startCreating(ctx context.Context, l *landscaperun.Landscape, c config, ns string, names []string, viaBroker bool) (func() (int, int, error), func(int) int, chan error) {
	createErr := make(chan error, 1)
	if viaBroker {
		var answered atomic.Int64
		go func() { createErr <- l.ProvisionViaBroker(ctx, names, c.workers, &answered) }()
		return func() (int, int, error) { return l.CountIDs(ctx, names) },
			func(int) int { return int(answered.Load()) }, createErr
	}
	go func() { createErr <- l.CreateAll(ctx, ns, names, c.workers) }()
	return func() (int, int, error) { return l.Count(ctx, ns) },
		func(succeeded int) int { return succeeded }, createErr
}

// noteRecovery records, once each, when the victim killed at killedAt ran
// again and when all n instances were done.
func (r *result) noteRecovery(killedAt time.Time, back func() (bool, error), n int) {
	if r.backAfter == 0 {
		if ok, err := back(); err == nil && ok {
			r.backAfter = time.Since(killedAt)
		}
	}
	if r.succeeded+r.failed == n && r.doneAfterKill == 0 {
		r.doneAfterKill = time.Since(killedAt)
	}
}

// kill kills victim with SIGKILL and returns a check of whether it runs
// again.
func kill(l *landscaperun.Landscape, victim string) (func() (bool, error), error) {
	if name, ok := strings.CutPrefix(victim, "provider:"); ok {
		pod := "sp-" + name + "-0"
		started, err := l.Started(pod)
		if err != nil || len(started) == 0 {
			return nil, fmt.Errorf("no run process %s in the operator log: %w", pod, err)
		}
		pid, before := started[len(started)-1].PID, len(started)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return nil, fmt.Errorf("kill %s (pid %d): %w", pod, pid, err)
		}
		return func() (bool, error) {
			started, err := l.Started(pod)
			return len(started) > before, err
		}, nil
	}
	var p *controlplane.Process
	var err error
	if victim == victimOperator {
		// The replica that leads; the providers it runs die with it,
		// and the other replica starts them again once it leads.
		if p, err = l.OperatorLeader(); err == nil {
			victim = p.Name
		}
	} else {
		p, err = l.Process(victim)
	}
	if err != nil {
		return nil, err
	}
	restarts := p.Restarts
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
		return nil, fmt.Errorf("kill %s (pid %d): %w", victim, p.PID, err)
	}
	return func() (bool, error) {
		p, err := l.Process(victim)
		if err != nil {
			return false, err
		}
		return p.Restarts > restarts && p.PID != 0, nil
	}, nil
}
