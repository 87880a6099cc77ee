// Package landscaperun is what the benchmarks that run on a local
// landscape share (bench/failover, bench/chaos): a landscape of their own
// started with the built binaries, admin clients of its clusters,
// instances of the sample plan "small" created as the broker records
// them, and the landscape's records (state.json, the operator's log) that
// name the processes to kill.
package landscaperun

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/marketplane/marketplane/api/install"
	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
)

// The sample catalog's plan "small" (examples/catalog): per instance, two
// Namespaces and one ResourceQuota on the workload cluster.
const (
	ServiceID = "3c8ac0a4-4e0b-4bb4-9a31-5d2f0e6b7a10"
	PlanID    = "8f0c6f36-2b71-4c65-8a7e-2a4f7c1d9b20"
	// LabelInstance labels every object an instance has on the workload
	// cluster.
	LabelInstance = "interoperator.servicefabrik.io/instance-id"
)

// Landscape is a landscape a benchmark started.
type Landscape struct {
	// Bin holds the binaries, Dir is the state directory.
	Bin, Dir string
	// Platform, Onboarding and Workload are admin clients.
	Platform, Onboarding, Workload client.Client
}

// Start starts a landscape in a new temporary state directory with the
// binaries in bin (make build) and connects to it; args go to `landscape
// up`.
func Start(ctx context.Context, bin string, args ...string) (*Landscape, error) {
	// The clients' own logging (retries while a benchmark has killed an
	// API server) is not the benchmark's output.
	logf.SetLogger(logr.Discard())
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "marketplane-bench-")
	if err != nil {
		return nil, err
	}
	l := &Landscape{Bin: bin, Dir: dir}
	if err := l.CLI(ctx, "up", append([]string{"--bin-dir", bin}, args...)...); err != nil {
		return nil, err
	}
	if err := l.connect(); err != nil {
		_ = l.CLI(context.Background(), "down")
		return nil, err
	}
	return l, nil
}

// Down removes the landscape.
func (l *Landscape) Down() error { return l.CLI(context.Background(), "down") }

// CLI runs bin/marketplane landscape <verb> [args] on the state directory.
func (l *Landscape) CLI(ctx context.Context, verb string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(l.Bin, "marketplane"), append([]string{"landscape", verb, "--state-dir", l.Dir}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("marketplane landscape %s: %w\n%s", verb, err, out)
	}
	return nil
}

func (l *Landscape) connect() error {
	scheme, err := install.NewScheme()
	if err != nil {
		return err
	}
	for name, c := range map[string]*client.Client{"platform": &l.Platform, "onboarding": &l.Onboarding, "workload": &l.Workload} {
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(l.Dir, "kubeconfigs", name+".kubeconfig"))
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

// CreateAll creates the instances names in namespace ns on the onboarding
// cluster, workers at once (the namespace is created first).
func (l *Landscape) CreateAll(ctx context.Context, ns string, names []string, workers int) error {
	if err := l.Onboarding.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return forEach(names, workers, func(name string) error { return l.provision(ctx, ns, name) })
}

// forEach calls do for every item, workers at once, and returns the first
// error; the other items are still done.
func forEach(items []string, workers int, do func(string) error) error {
	queue := make(chan string)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range workers {
		wg.Go(func() {
			for item := range queue {
				if err := do(item); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	for _, item := range items {
		queue <- item
	}
	close(queue)
	wg.Wait()
	return first
}

// provision records a provision request as the broker does: the instance
// with the broker's finalizer and last-operation label, created once (an
// empty state means in_queue). Requests are retried
// while the onboarding API server does not answer (a benchmark may have
// killed it): an instance that exists already is not created again.
func (l *Landscape) provision(ctx context.Context, ns, name string) error {
	inst := &osbv1alpha1.SFServiceInstance{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Finalizers: []string{osbv1alpha1.FinalizerBroker},
			Labels:     map[string]string{osbv1alpha1.LabelLastOperation: string(osbv1alpha1.StateInQueue)},
		},
		Spec: osbv1alpha1.SFServiceInstanceSpec{
			InstanceID: name, ServiceID: ServiceID, PlanID: PlanID,
			OrganizationGUID: "bench-org", SpaceGUID: "bench-space",
			Context: &runtime.RawExtension{Raw: []byte(`{"platform":"kubernetes","namespace":"` + ns + `"}`)},
		},
	}
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := l.Onboarding.Create(ctx, inst.DeepCopy())
		return err == nil || apierrors.IsAlreadyExists(err), nil
	})
}

// Count returns how many instances in ns succeeded and failed.
func (l *Landscape) Count(ctx context.Context, ns string) (succeeded, failed int, err error) {
	list := &osbv1alpha1.SFServiceInstanceList{}
	if err := l.Onboarding.List(ctx, list, client.InNamespace(ns)); err != nil {
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

// Duplicates counts, over the instances names, the objects on the
// workload cluster beyond plan "small"'s two Namespaces and one
// ResourceQuota per instance, and those missing.
func (l *Landscape) Duplicates(ctx context.Context, names []string) (dups, missing int, err error) {
	namespaces := &corev1.NamespaceList{}
	if err := l.Workload.List(ctx, namespaces, client.HasLabels{LabelInstance}); err != nil {
		return 0, 0, fmt.Errorf("list namespaces: %w", err)
	}
	quotas := &corev1.ResourceQuotaList{}
	if err := l.Workload.List(ctx, quotas, client.HasLabels{LabelInstance}); err != nil {
		return 0, 0, fmt.Errorf("list resource quotas: %w", err)
	}
	count := map[string][2]int{}
	for _, ns := range namespaces.Items {
		c := count[ns.Labels[LabelInstance]]
		c[0]++
		count[ns.Labels[LabelInstance]] = c
	}
	for _, q := range quotas.Items {
		c := count[q.Labels[LabelInstance]]
		c[1]++
		count[q.Labels[LabelInstance]] = c
	}
	for _, n := range names {
		c := count[n]
		dups += max(0, c[0]-2) + max(0, c[1]-1)
		missing += max(0, 2-c[0]) + max(0, 1-c[1])
	}
	return dups, missing, nil
}

// Process returns the landscape's record of the process name (etcd,
// kube-apiserver-onboarding, broker, …) from state.json.
func (l *Landscape) Process(name string) (*controlplane.Process, error) {
	s, err := controlplane.ReadState(l.Dir)
	if err != nil {
		return nil, err
	}
	for _, p := range s.RecordedProcesses() {
		if p.Name == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no process %s in the landscape's state", name)
}

// LogLine is what the benchmarks read of a JSON log line.
type LogLine struct {
	TS  string `json:"ts"`
	Msg string `json:"msg"`
	Pod string `json:"pod"`
	PID int    `json:"pid"`
}

// Time is the line's timestamp (zero when it has none).
func (l LogLine) Time() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, l.TS)
	return t
}

// Started returns the "Started a run process" lines of the provider
// process pod (sp-<provider>-<i>) in the logs of every operator replica,
// oldest first: each leader logs the processes it started.
func (l *Landscape) Started(pod string) ([]LogLine, error) {
	var out []LogLine
	for i := range landscape.OperatorReplicas {
		err := EachLine(filepath.Join(l.Dir, "logs", landscape.OperatorProcess(i)+".log"), func(line LogLine) {
			if line.Msg == "Started a run process" && line.Pod == pod {
				out = append(out, line)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(out, func(a, b LogLine) int { return a.Time().Compare(b.Time()) })
	return out, nil
}

// OperatorLeader returns the record of the operator replica that leads
// (landscape.OperatorLeader), or an error while none does.
func (l *Landscape) OperatorLeader() (*controlplane.Process, error) {
	s, err := controlplane.ReadState(l.Dir)
	if err != nil {
		return nil, err
	}
	name := landscape.OperatorLeader(s)
	if name == "" {
		return nil, errors.New("no operator replica leads (none logged that it acquired the lease)")
	}
	return s.Processes[name], nil
}

// RunLog is the log file of run process i of the ServiceProvider
// provider.
func (l *Landscape) RunLog(provider string, i int) string {
	return filepath.Join(l.Dir, "providers", "serviceprovider-"+provider, fmt.Sprintf("run-%d.log", i))
}

// EachLine calls fn with every JSON line of the file at path (a file that
// does not exist has none).
func EachLine(path string, fn func(LogLine)) error {
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
		var line LogLine
		if json.Unmarshal(text, &line) == nil {
			fn(line)
		}
	}
	return sc.Err()
}

// Poll calls cond every 200 ms until it is true, for at most d; what
// names the wait in the error.
func Poll(ctx context.Context, d time.Duration, what string, cond func() (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, d, true, func(context.Context) (bool, error) { return cond() })
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

// Exit ends a benchmark's main: status 1 with the error when run failed,
// or when a target was missed (ok false) and strict is set.
func Exit(name string, ok bool, err error, strict bool) {
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
	if !ok && strict {
		os.Exit(1)
	}
}
