// Command failover measures how the inter-operator fails over on the local
// landscape (issue #14 item 2): it runs two replicas with leader election,
// kills the leader with SIGKILL while instances are provisioned, and prints
// how many instances succeeded, how many duplicate resources there are on
// the workload cluster (must be 0) and how long the other replica took to
// take over (target ≤ 15 s).
//
// It starts a landscape of its own (bin/marketplane landscape up in a
// temporary state directory; the binaries must be built: make build), sets
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
	flag.Parse()
	ok, err := run(context.Background(), c, os.Stdout)
	landscaperun.Exit("failover", ok, err, c.strict)
}

func run(ctx context.Context, c config, out io.Writer) (bool, error) {
	fmt.Fprintln(out, "starting a landscape")
	l, err := landscaperun.Start(ctx, c.bin)
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

	// Two replicas with leader election.
	sp := &providerv1alpha1.ServiceProvider{}
	if err := l.Platform.Get(ctx, client.ObjectKey{Name: provider}, sp); err != nil {
		return false, fmt.Errorf("get ServiceProvider %s: %w", provider, err)
	}
	patch := client.MergeFrom(sp.DeepCopy())
	sp.Spec.RunReplicas = 2
	if err := l.Platform.Patch(ctx, sp, patch); err != nil {
		return false, fmt.Errorf("set runReplicas 2: %w", err)
	}
	var leader *replica
	if err := landscaperun.Poll(ctx, 2*time.Minute, "two replicas of the inter-operator, one holding the lease", func() (bool, error) {
		r, err := findLeader(l, 2)
		leader = r
		return err == nil && r != nil, nil
	}); err != nil {
		return false, err
	}
	fmt.Fprintf(out, "two replicas run; %s (pid %d) holds the lease\n", leader.pod, leader.pid)

	names := make([]string, c.n)
	for i := range names {
		names[i] = fmt.Sprintf("fo-%04d", i)
	}
	start := time.Now()
	createErr := make(chan error, 1)
	go func() { createErr <- l.CreateAll(ctx, instanceNS, names, c.workers) }()

	var killedAt time.Time
	var killed *replica
	var oldHolder string
	var takeover time.Duration
	var succeeded, failed int
	deadline := time.Now().Add(c.timeout)
	for {
		if time.Now().After(deadline) {
			return false, fmt.Errorf("after %s: %d of %d instances succeeded, %d failed", c.timeout, succeeded, c.n, failed)
		}
		if succeeded, failed, err = l.Count(ctx, instanceNS); err != nil {
			return false, err
		}
		if killed == nil && float64(succeeded) >= c.killAt*float64(c.n) {
			if oldHolder, err = holder(ctx, l); err != nil {
				return false, err
			}
			if killed, err = findLeader(l, 2); err != nil || killed == nil {
				return false, fmt.Errorf("find the leader: %w", err)
			}
			if err := syscall.Kill(killed.pid, syscall.SIGKILL); err != nil {
				return false, fmt.Errorf("kill the leader %s (pid %d): %w", killed.pod, killed.pid, err)
			}
			killedAt = time.Now()
			fmt.Fprintf(out, "killed the leader %s (pid %d) with SIGKILL at %d/%d succeeded\n", killed.pod, killed.pid, succeeded, c.n)
		}
		if killed != nil && takeover == 0 {
			h, err := holder(ctx, l)
			if err == nil && h != "" && h != oldHolder {
				takeover = time.Since(killedAt)
				fmt.Fprintf(out, "another replica took the lease %s after the kill\n", takeover.Round(10*time.Millisecond))
			}
		}
		if succeeded+failed == c.n && takeover != 0 {
			break
		}
		select {
		case err := <-createErr:
			if err != nil {
				return false, err
			}
			createErr = nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	total := time.Since(start)

	dups, missing, err := l.Duplicates(ctx, names)
	if err != nil {
		return false, err
	}
	restartedAfter, err := restartedAfter(l, killed.pod, killedAt)
	if err != nil {
		return false, err
	}

	ok := succeeded == c.n && dups == 0 && missing == 0 && takeover <= takeoverGoal
	fmt.Fprintf(out, "\nfailover of the inter-operator (2 replicas, leader killed with SIGKILL at %.0f%%):\n", c.killAt*100)
	fmt.Fprintf(out, "  succeeded: %d / %d (failed %d)\n", succeeded, c.n, failed)
	fmt.Fprintf(out, "  duplicate resources on the workload cluster: %d (target 0); missing: %d\n", dups, missing)
	fmt.Fprintf(out, "  takeover (kill → another replica holds the lease): %s (target ≤ %s) %s\n", takeover.Round(10*time.Millisecond), takeoverGoal, verdict(takeover <= takeoverGoal))
	if restartedAfter > 0 {
		fmt.Fprintf(out, "  the operator started the killed replica again %s after the kill\n", restartedAfter.Round(10*time.Millisecond))
	} else {
		fmt.Fprintf(out, "  the operator did not start the killed replica again\n")
		ok = false
	}
	fmt.Fprintf(out, "  all %d instances done %s after the first create (%.1f instances/s)\n", c.n, total.Round(100*time.Millisecond), float64(c.n)/total.Seconds())
	return ok, nil
}

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}

// holder returns the holder of the inter-operator's lease.
func holder(ctx context.Context, l *landscaperun.Landscape) (string, error) {
	lease := &coordinationv1.Lease{}
	if err := l.Platform.Get(ctx, client.ObjectKey{Namespace: providerNS, Name: leaseName}, lease); err != nil {
		return "", err
	}
	if lease.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *lease.Spec.HolderIdentity, nil
}

// replica is one run process of the inter-operator.
type replica struct {
	pod string
	pid int
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
