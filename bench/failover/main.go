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
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/api/install"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
)

// The sample catalog's plan "small" (examples/catalog) and the landscape's
// inter-operator.
const (
	serviceID    = "3c8ac0a4-4e0b-4bb4-9a31-5d2f0e6b7a10"
	planID       = "8f0c6f36-2b71-4c65-8a7e-2a4f7c1d9b20"
	provider     = "interoperator"
	providerNS   = "sp-" + provider
	leaseName    = provider + "-leader"
	instanceNS   = "failover"
	labelInst    = "interoperator.servicefabrik.io/instance-id"
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
	if err != nil {
		fmt.Fprintln(os.Stderr, "failover:", err)
		os.Exit(1)
	}
	if !ok && c.strict {
		os.Exit(1)
	}
}

// landscape is the one the benchmark started.
type landscape struct {
	bin, dir                     string
	platform, onboarding, target client.Client
}

func run(ctx context.Context, c config, out io.Writer) (bool, error) {
	bin, err := filepath.Abs(c.bin)
	if err != nil {
		return false, err
	}
	dir, err := os.MkdirTemp("", "marketplane-failover-")
	if err != nil {
		return false, err
	}
	l := &landscape{bin: bin, dir: dir}
	fmt.Fprintf(out, "starting a landscape in %s\n", dir)
	if err := l.cli(ctx, "up", "--bin-dir", bin); err != nil {
		return false, err
	}
	defer func() {
		if c.keep {
			fmt.Fprintf(out, "the landscape keeps running: %s landscape down --state-dir %s\n", filepath.Join(bin, "marketplane"), dir)
			return
		}
		if err := l.cli(context.Background(), "down"); err != nil {
			fmt.Fprintln(os.Stderr, "failover: landscape down:", err)
		}
	}()
	if err := l.connect(); err != nil {
		return false, err
	}

	// Two replicas with leader election.
	sp := &providerv1alpha1.ServiceProvider{}
	if err := l.platform.Get(ctx, client.ObjectKey{Name: provider}, sp); err != nil {
		return false, fmt.Errorf("get ServiceProvider %s: %w", provider, err)
	}
	patch := client.MergeFrom(sp.DeepCopy())
	sp.Spec.RunReplicas = 2
	if err := l.platform.Patch(ctx, sp, patch); err != nil {
		return false, fmt.Errorf("set runReplicas 2: %w", err)
	}
	var leader *replica
	if err := poll(ctx, 2*time.Minute, "two replicas of the inter-operator, one holding the lease", func() (bool, error) {
		r, err := l.leader(2)
		leader = r
		return err == nil && r != nil, nil
	}); err != nil {
		return false, err
	}
	fmt.Fprintf(out, "two replicas run; %s (pid %d) holds the lease\n", leader.pod, leader.pid)

	if err := l.onboarding.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: instanceNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("create namespace %s: %w", instanceNS, err)
	}

	start := time.Now()
	var created atomic.Int64
	createErr := make(chan error, 1)
	go func() { createErr <- l.createAll(ctx, c, &created) }()

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
		if succeeded, failed, err = l.count(ctx); err != nil {
			return false, err
		}
		if killed == nil && float64(succeeded) >= c.killAt*float64(c.n) {
			if oldHolder, err = l.holder(ctx); err != nil {
				return false, err
			}
			if killed, err = l.leader(2); err != nil || killed == nil {
				return false, fmt.Errorf("find the leader: %w", err)
			}
			if err := syscall.Kill(killed.pid, syscall.SIGKILL); err != nil {
				return false, fmt.Errorf("kill the leader %s (pid %d): %w", killed.pod, killed.pid, err)
			}
			killedAt = time.Now()
			fmt.Fprintf(out, "killed the leader %s (pid %d) with SIGKILL at %d/%d succeeded\n", killed.pod, killed.pid, succeeded, c.n)
		}
		if killed != nil && takeover == 0 {
			h, err := l.holder(ctx)
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

	dups, missing, err := l.duplicates(ctx, c.n)
	if err != nil {
		return false, err
	}
	restartedAfter, err := l.restartedAfter(killed.pod, killedAt)
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

// cli runs bin/marketplane landscape <args> on the benchmark's state
// directory.
func (l *landscape) cli(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(l.bin, "marketplane"), append([]string{"landscape", args[0], "--state-dir", l.dir}, args[1:]...)...)
	outb, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("marketplane landscape %s: %w\n%s", args[0], err, outb)
	}
	return nil
}

// connect makes the admin clients of the landscape's clusters.
func (l *landscape) connect() error {
	scheme, err := install.NewScheme()
	if err != nil {
		return err
	}
	for name, c := range map[string]*client.Client{"platform": &l.platform, "onboarding": &l.onboarding, "workload": &l.target} {
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(l.dir, "kubeconfigs", name+".kubeconfig"))
		if err != nil {
			return fmt.Errorf("kubeconfig of %s: %w", name, err)
		}
		cfg.QPS, cfg.Burst = 200, 400
		if *c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
			return fmt.Errorf("client of %s: %w", name, err)
		}
	}
	return nil
}

// createAll creates the instances, c.workers at once.
func (l *landscape) createAll(ctx context.Context, c config, created *atomic.Int64) error {
	names := make(chan string)
	var wg sync.WaitGroup
	var first error
	var once sync.Once
	for range c.workers {
		wg.Go(func() {
			for name := range names {
				if err := l.provision(ctx, name); err != nil {
					once.Do(func() { first = err })
					return
				}
				created.Add(1)
			}
		})
	}
	for i := range c.n {
		names <- fmt.Sprintf("fo-%04d", i)
	}
	close(names)
	wg.Wait()
	return first
}

// provision records a provision request as the broker does: the instance
// with the broker's finalizer and last-operation label, then its status
// in_queue unless the provisioner already wrote one.
func (l *landscape) provision(ctx context.Context, name string) error {
	inst := &osbv1alpha1.SFServiceInstance{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: instanceNS, Name: name,
			Finalizers: []string{osbv1alpha1.FinalizerBroker},
			Labels:     map[string]string{osbv1alpha1.LabelLastOperation: string(osbv1alpha1.StateInQueue)},
		},
		Spec: osbv1alpha1.SFServiceInstanceSpec{
			InstanceID: name, ServiceID: serviceID, PlanID: planID,
			OrganizationGUID: "failover-org", SpaceGUID: "failover-space",
			Context: &runtime.RawExtension{Raw: []byte(`{"platform":"kubernetes","namespace":"failover"}`)},
		},
	}
	if err := l.onboarding.Create(ctx, inst); err != nil {
		return fmt.Errorf("create instance %s: %w", name, err)
	}
	for attempt := 0; attempt < 5 && inst.Status.State == ""; attempt++ {
		inst.Status.State = osbv1alpha1.StateInQueue
		err := l.onboarding.Status().Update(ctx, inst)
		if err == nil || !apierrors.IsConflict(err) {
			return err
		}
		if err := l.onboarding.Get(ctx, client.ObjectKeyFromObject(inst), inst); err != nil {
			return err
		}
	}
	return nil
}

// count returns how many instances succeeded and failed.
func (l *landscape) count(ctx context.Context) (succeeded, failed int, err error) {
	list := &osbv1alpha1.SFServiceInstanceList{}
	if err := l.onboarding.List(ctx, list, client.InNamespace(instanceNS)); err != nil {
		return 0, 0, fmt.Errorf("list instances: %w", err)
	}
	for i := range list.Items {
		switch list.Items[i].Status.State {
		case osbv1alpha1.StateSucceeded:
			succeeded++
		case osbv1alpha1.StateFailed:
			failed++
		}
	}
	return succeeded, failed, nil
}

// holder returns the holder of the inter-operator's lease.
func (l *landscape) holder(ctx context.Context) (string, error) {
	lease := &coordinationv1.Lease{}
	if err := l.platform.Get(ctx, client.ObjectKey{Namespace: providerNS, Name: leaseName}, lease); err != nil {
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

// logLine is what the benchmark reads of a JSON log line.
type logLine struct {
	TS  string `json:"ts"`
	Msg string `json:"msg"`
	Pod string `json:"pod"`
	PID int    `json:"pid"`
}

// leader returns the replica that acquired the lease last, once replicas
// run, or nil while none holds it.
func (l *landscape) leader(replicas int) (*replica, error) {
	dir := filepath.Join(l.dir, "providers", "serviceprovider-"+provider)
	var best *replica
	var bestTS time.Time
	for i := range replicas {
		pod := fmt.Sprintf("sp-%s-%d", provider, i)
		if started, err := l.started(pod); err != nil || len(started) == 0 {
			// Not running yet.
			return nil, err
		}
		err := eachLine(filepath.Join(dir, fmt.Sprintf("run-%d.log", i)), func(line logLine) {
			ts, err := time.Parse(time.RFC3339Nano, line.TS)
			if err == nil && line.Msg == "Successfully acquired lease" && ts.After(bestTS) {
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
	started, err := l.started(best.pod)
	if err != nil || len(started) == 0 {
		return nil, errors.Join(err, fmt.Errorf("no start of %s in the operator log", best.pod))
	}
	best.pid = started[len(started)-1].PID
	return best, nil
}

// started returns the operator's "Started a run process" lines of pod.
func (l *landscape) started(pod string) ([]logLine, error) {
	var out []logLine
	err := eachLine(filepath.Join(l.dir, "logs", "operator.log"), func(line logLine) {
		if line.Msg == "Started a run process" && line.Pod == pod {
			out = append(out, line)
		}
	})
	return out, err
}

// restartedAfter returns how long after t the operator started pod again,
// or 0 when it did not.
func (l *landscape) restartedAfter(pod string, t time.Time) (time.Duration, error) {
	var d time.Duration
	err := poll(context.Background(), time.Minute, "the operator to start "+pod+" again", func() (bool, error) {
		lines, err := l.started(pod)
		if err != nil {
			return false, err
		}
		for _, line := range lines {
			ts, err := time.Parse(time.RFC3339Nano, line.TS)
			if err == nil && ts.After(t) {
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

// duplicates counts, over the instances, the objects on the workload
// cluster beyond the plan's two Namespaces and one ResourceQuota per
// instance, and those missing.
func (l *landscape) duplicates(ctx context.Context, n int) (dups, missing int, err error) {
	namespaces := &corev1.NamespaceList{}
	if err := l.target.List(ctx, namespaces, client.HasLabels{labelInst}); err != nil {
		return 0, 0, fmt.Errorf("list namespaces: %w", err)
	}
	quotas := &corev1.ResourceQuotaList{}
	if err := l.target.List(ctx, quotas, client.HasLabels{labelInst}); err != nil {
		return 0, 0, fmt.Errorf("list resource quotas: %w", err)
	}
	count := map[string][2]int{}
	for _, ns := range namespaces.Items {
		c := count[ns.Labels[labelInst]]
		c[0]++
		count[ns.Labels[labelInst]] = c
	}
	for _, q := range quotas.Items {
		c := count[q.Labels[labelInst]]
		c[1]++
		count[q.Labels[labelInst]] = c
	}
	for i := range n {
		c := count[fmt.Sprintf("fo-%04d", i)]
		dups += max(0, c[0]-2) + max(0, c[1]-1)
		missing += max(0, 2-c[0]) + max(0, 1-c[1])
	}
	return dups, missing, nil
}

// eachLine calls fn with every JSON line of the file at path (a file that
// does not exist has none).
func eachLine(path string, fn func(logLine)) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		text := sc.Bytes()
		if len(text) == 0 || text[0] != '{' || !strings.Contains(string(text), `"msg"`) {
			continue
		}
		var line logLine
		if json.Unmarshal(text, &line) == nil {
			fn(line)
		}
	}
	return sc.Err()
}

// poll calls cond every 200 ms until it is true, for at most d.
func poll(ctx context.Context, d time.Duration, what string, cond func() (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, d, true, func(context.Context) (bool, error) { return cond() })
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}
