// Command failover measures how the inter-operator or the operator fails
// over on the local landscape (issue #14 item 2): it runs two replicas of
// each with leader election, kills the leader of -victim with SIGKILL
// while instances are provisioned, and prints how many instances
// succeeded, how many duplicate resources there are on the workload
// cluster (must be 0) and how long the other replica took to take over
// (target ≤ 15 s).
//
// With -victim operator the killed process is the leading replica of
// marketplane-operator (the landscape runs two). The provider processes it
// runs die with it (process deployer), so the inter-operator stops too
// until the new leader starts it again; the figures say when that was.
//
// It starts a landscape of its own (bin/marketplane landscape up in a
// temporary state directory; the binaries must be built: make build), with
// the operator's own leader-election timings (--operator-lease 10s rather
// than the landscape's longer lease: the target is the operator's), sets
// the inter-operator's ServiceProvider to runReplicas 2, creates -n
// SFServiceInstances of the sample plan "small" as the broker records them
// (-workers at once), and once -kill-at of them succeeded, finds the leader
// (the replica whose run log says it acquired the lease last; its PID from
// the operator's log) and kills it. The takeover time runs from the kill to
// the moment the Lease names another holder. It then waits until every
// instance succeeded (or -timeout), counts the objects each instance has on
// the workload cluster (plan "small": two Namespaces and one ResourceQuota
// per instance; more is a duplicate, fewer is missing), checks that the
// operator started the killed replica again, and removes the landscape.
// With -strict a missed target makes the exit status 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
	"github.com/marketplane/marketplane/bench/internal/landscaperun"
	"github.com/marketplane/marketplane/internal/landscape"
)

// The landscape's inter-operator and its lease.
const (
	provider     = "interoperator"
	providerNS   = "sp-" + provider
	leaseName    = provider + "-leader"
	instanceNS   = "failover"
	takeoverGoal = 15 * time.Second
)

type config struct {
	bin     string
	n       int
	workers int
	killAt  float64
	timeout time.Duration
	keep    bool
	strict  bool
	victim  string
}

func main() {
	var c config
	flag.StringVar(&c.bin, "bin", "bin", "directory of the built binaries (make build)")
	flag.IntVar(&c.n, "n", 500, "instances to provision")
	flag.IntVar(&c.workers, "workers", 8, "instances created at once")
	flag.Float64Var(&c.killAt, "kill-at", 0.2, "fraction of the instances that succeeded when the leader is killed")
	flag.DurationVar(&c.timeout, "timeout", 15*time.Minute, "how long every instance may take")
	flag.BoolVar(&c.keep, "keep", false, "keep the landscape (and print its state directory) instead of removing it")
	flag.BoolVar(&c.strict, "strict", false, "exit 1 when a target is missed")
	flag.StringVar(&c.victim, "victim", provider, "whose leader is killed: interoperator or operator")
	flag.Parse()
	if c.victim != provider && c.victim != victimOperator {
		landscaperun.Exit("failover", false, fmt.Errorf("-victim %q: want %s or %s", c.victim, provider, victimOperator), true)
	}
	ok, err := run(context.Background(), c, os.Stdout)
	landscaperun.Exit("failover", ok, err, c.strict)
}

func run(ctx context.Context, c config, out io.Writer) (bool, error) {
	fmt.Fprintln(out, "starting a landscape")
	l, err := landscaperun.Start(ctx, c.bin, "--operator-lease", "10s")
	if err != nil {
		return false, err
	}
	defer func() {
		if c.keep {
			fmt.Fprintf(out, "the landscape keeps running: %s landscape down --state-dir %s\n", filepath.Join(l.Bin, "marketplane"), l.Dir)
			return
		}
		if err := l.Down(); err != nil {
			fmt.Fprintln(os.Stderr, "failover: landscape down:", err)
		}
	}()

	leader, err := twoReplicas(ctx, l)
	if err != nil {
		return false, err
	}
	fmt.Fprintf(out, "two replicas run; %s (pid %d) holds the lease\n", leader.pod, leader.pid)

	m := &measurement{c: c, l: l, out: out, leader: leader}
	if err := m.provisionAndKill(ctx); err != nil {
		return false, err
	}
	if err := m.check(ctx); err != nil {
		return false, err
	}
	return m.report(), nil
}

// twoReplicas sets the inter-operator's ServiceProvider to two replicas
// with leader election and returns the one holding the lease.
func twoReplicas(ctx context.Context, l *landscaperun.Landscape) (*replica, error) {
	sp := &providerv1alpha1.ServiceProvider{}
	if err := l.Platform.Get(ctx, client.ObjectKey{Name: provider}, sp); err != nil {
		return nil, fmt.Errorf("get ServiceProvider %s: %w", provider, err)
	}
	patch := client.MergeFrom(sp.DeepCopy())
	sp.Spec.RunReplicas = 2
	if err := l.Platform.Patch(ctx, sp, patch); err != nil {
		return nil, fmt.Errorf("set runReplicas 2: %w", err)
	}
	var leader *replica
	if err := landscaperun.Poll(ctx, 2*time.Minute, "two replicas of the inter-operator, one holding the lease", func() (bool, error) {
		r, err := findLeader(l, 2)
		leader = r
		return err == nil && r != nil, nil
	}); err != nil {
		return nil, err
	}
	return leader, nil
}

// measurement is one failover run: what was killed when, and what the
// landscape did after.
type measurement struct {
	c      config
	l      *landscaperun.Landscape
	out    io.Writer
	leader *replica // the inter-operator's leader before the kill
	names  []string

	killed              *replica
	killedAt            time.Time
	oldHolder           string
	takeover, restarted time.Duration
	providerBack        time.Duration
	succeeded, failed   int
	dups, missing       int
	total               time.Duration
}

// provisionAndKill creates the instances, kills the victim's leader once
// -kill-at of them succeeded and waits until every instance is done and
// another replica took over.
func (m *measurement) provisionAndKill(ctx context.Context) error {
	m.names = make([]string, m.c.n)
	for i := range m.names {
		m.names[i] = fmt.Sprintf("fo-%04d", i)
	}
	start := time.Now()
	createErr := make(chan error, 1)
	go func() { createErr <- m.l.CreateAll(ctx, instanceNS, m.names, m.c.workers) }()

	deadline := time.Now().Add(m.c.timeout)
	for {
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %d of %d instances succeeded, %d failed", m.c.timeout, m.succeeded, m.c.n, m.failed)
		}
		var err error
		if m.succeeded, m.failed, err = m.l.Count(ctx, instanceNS); err != nil {
			return err
		}
		if m.killed == nil && float64(m.succeeded) >= m.c.killAt*float64(m.c.n) {
			if err := m.killLeader(ctx); err != nil {
				return err
			}
		}
		if m.killed != nil {
			m.watchTakeover(ctx)
		}
		if m.succeeded+m.failed == m.c.n && m.takeover != 0 && (m.c.victim != victimOperator || m.restarted != 0) {
			break
		}
		select {
		case err := <-createErr:
			if err != nil {
				return err
			}
			createErr = nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	m.total = time.Since(start)
	return nil
}

// killLeader kills the victim's leading replica with SIGKILL.
func (m *measurement) killLeader(ctx context.Context) error {
	var err error
	if m.oldHolder, err = holder(ctx, m.l, m.c.victim); err != nil {
		return err
	}
	if m.killed, err = victimLeader(m.l, m.c.victim); err != nil || m.killed == nil {
		return fmt.Errorf("find the leader: %w", err)
	}
	if err := syscall.Kill(m.killed.pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill the leader %s (pid %d): %w", m.killed.pod, m.killed.pid, err)
	}
	m.killedAt = time.Now()
	fmt.Fprintf(m.out, "killed the leader %s (pid %d) with SIGKILL at %d/%d succeeded\n", m.killed.pod, m.killed.pid, m.succeeded, m.c.n)
	return nil
}

// watchTakeover records when another replica took the lease and, for the
// operator, when the landscape started the killed replica again.
func (m *measurement) watchTakeover(ctx context.Context) {
	if m.takeover == 0 {
		h, err := holder(ctx, m.l, m.c.victim)
		if err == nil && h != "" && h != m.oldHolder {
			m.takeover = time.Since(m.killedAt)
			fmt.Fprintf(m.out, "another replica took the lease %s after the kill\n", m.takeover.Round(10*time.Millisecond))
		}
	}
	if m.restarted == 0 && m.c.victim == victimOperator {
		// Seen here, within the loop's 100 ms, not after it.
		if p, err := m.l.Process(m.killed.pod); err == nil && p.Restarts > m.killed.restarts {
			m.restarted = time.Since(m.killedAt)
		}
	}
}

// check counts the instances' objects on the workload cluster and when
// the killed process (or, for the operator, the inter-operator) ran again.
func (m *measurement) check(ctx context.Context) error {
	var err error
	if m.dups, m.missing, err = m.l.Duplicates(ctx, m.names); err != nil {
		return err
	}
	if m.c.victim == victimOperator {
		m.providerBack, err = restartedAfter(m.l, m.leader.pod, m.killedAt)
		return err
	}
	m.restarted, err = restartedAfter(m.l, m.killed.pod, m.killedAt)
	return err
}

// report prints the figures and says whether every target was met.
func (m *measurement) report() bool {
	c, out := m.c, m.out
	ok := m.succeeded == c.n && m.dups == 0 && m.missing == 0 && m.takeover <= takeoverGoal
	fmt.Fprintf(out, "\nfailover of the %s (2 replicas, leader killed with SIGKILL at %.0f%%):\n", c.victim, c.killAt*100)
	fmt.Fprintf(out, "  succeeded: %d / %d (failed %d)\n", m.succeeded, c.n, m.failed)
	fmt.Fprintf(out, "  duplicate resources on the workload cluster: %d (target 0); missing: %d\n", m.dups, m.missing)
	fmt.Fprintf(out, "  takeover (kill → another replica holds the lease): %s (target ≤ %s) %s\n", m.takeover.Round(10*time.Millisecond), takeoverGoal, verdict(m.takeover <= takeoverGoal))
	starter := "the operator"
	if c.victim == victimOperator {
		starter = "the landscape"
	}
	if m.restarted > 0 {
		fmt.Fprintf(out, "  %s started the killed replica again %s after the kill\n", starter, m.restarted.Round(10*time.Millisecond))
	} else {
		fmt.Fprintf(out, "  %s did not start the killed replica again\n", starter)
		ok = false
	}
	if c.victim == victimOperator {
		if m.providerBack > 0 {
			fmt.Fprintf(out, "  the new leader started the inter-operator (%s) again %s after the kill\n", m.leader.pod, m.providerBack.Round(10*time.Millisecond))
		} else {
			fmt.Fprintf(out, "  the new leader did not start the inter-operator again\n")
			ok = false
		}
	}
	fmt.Fprintf(out, "  all %d instances done %s after the first create (%.1f instances/s)\n", c.n, m.total.Round(100*time.Millisecond), float64(c.n)/m.total.Seconds())
	return ok
}

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}

// victimOperator is -victim's value for the operator.
const victimOperator = "operator"

// holder returns the holder of victim's lease.
func holder(ctx context.Context, l *landscaperun.Landscape, victim string) (string, error) {
	key := client.ObjectKey{Namespace: providerNS, Name: leaseName}
	if victim == victimOperator {
		key = client.ObjectKey{Namespace: landscape.Namespace, Name: "marketplane-operator-" + landscape.OperatorProviderName}
	}
	lease := &coordinationv1.Lease{}
	if err := l.Platform.Get(ctx, key, lease); err != nil {
		return "", err
	}
	if lease.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *lease.Spec.HolderIdentity, nil
}

// victimLeader returns the leading replica of victim: an inter-operator
// run process or an operator process of the landscape.
func victimLeader(l *landscaperun.Landscape, victim string) (*replica, error) {
	if victim != victimOperator {
		return findLeader(l, 2)
	}
	p, err := l.OperatorLeader()
	if err != nil {
		return nil, err
	}
	return &replica{pod: p.Name, pid: p.PID, restarts: p.Restarts}, nil
}

// replica is one run process of the inter-operator.
type replica struct {
	pod string
	pid int
	// restarts is the landscape's restart count of an operator replica.
	restarts int
}

// findLeader returns the replica that acquired the lease last, once all
// replicas run, or nil while none holds it.
func findLeader(l *landscaperun.Landscape, replicas int) (*replica, error) {
	var best *replica
	var bestTS time.Time
	for i := range replicas {
		pod := fmt.Sprintf("sp-%s-%d", provider, i)
		if started, err := l.Started(pod); err != nil || len(started) == 0 {
			// Not running yet.
			return nil, err
		}
		err := landscaperun.EachLine(l.RunLog(provider, i), func(line landscaperun.LogLine) {
			if ts := line.Time(); line.Msg == "Successfully acquired lease" && ts.After(bestTS) {
				best, bestTS = &replica{pod: pod}, ts
			}
		})
		if err != nil {
			return nil, err
		}
	}
	if best == nil {
		return nil, nil
	}
	started, err := l.Started(best.pod)
	if err != nil || len(started) == 0 {
		return nil, errors.Join(err, fmt.Errorf("no start of %s in the operator log", best.pod))
	}
	best.pid = started[len(started)-1].PID
	return best, nil
}

// restartedAfter returns how long after t the operator started pod again,
// or 0 when it did not within a minute.
func restartedAfter(l *landscaperun.Landscape, pod string, t time.Time) (time.Duration, error) {
	var d time.Duration
	err := landscaperun.Poll(context.Background(), time.Minute, "the operator to start "+pod+" again", func() (bool, error) {
		lines, err := l.Started(pod)
		if err != nil {
			return false, err
		}
		for _, line := range lines {
			if ts := line.Time(); ts.After(t) {
				d = ts.Sub(t)
				return true, nil
			}
		}
		return false, nil
	})
	if wait.Interrupted(err) {
		return 0, nil
	}
	return d, err
}
