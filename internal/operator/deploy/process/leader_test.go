package process_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/marketplane/marketplane/internal/operator/deploy"
	"github.com/marketplane/marketplane/internal/operator/deploy/process"
	"github.com/marketplane/marketplane/pkg/testenv"
)

// leaderImage is the image the leader-election test maps to leaderprobe.
const leaderImage = "ghcr.io/openmcp-project/images/service-provider-leaderprobe:v0.1.0"

var leaderProbe struct {
	once sync.Once
	path string
	err  error
}

// buildLeaderProbe builds internal/leaderprobe once.
func buildLeaderProbe(t *testing.T) string {
	t.Helper()
	probe, _ := setup(t) // shared.dir exists from here on
	leaderProbe.once.Do(func() {
		leaderProbe.path = filepath.Join(filepath.Dir(probe), "leaderprobe")
		leaderProbe.err = testenv.Build(filepath.Dir(probe), "github.com/marketplane/marketplane/internal/operator/deploy/process/internal/leaderprobe")
	})
	if leaderProbe.err != nil {
		t.Fatal(leaderProbe.err)
	}
	return leaderProbe.path
}

// leaders returns the pids of f's processes that said they were elected,
// by pod name.
func (f *fixture) leaders() map[string]string {
	files, err := filepath.Glob(filepath.Join(f.outDir, "leader.*"))
	must(f.t, err)
	out := map[string]string{}
	for _, file := range files {
		pod, pid, _ := strings.Cut(strings.TrimPrefix(filepath.Base(file), "leader."), ".")
		out[pid] = pod
	}
	return out
}

// httpOK checks that GET url answers 200.
func httpOK(t *testing.T, url string) {
	t.Helper()
	var last string
	poll(t, 30*time.Second, "GET "+url+" to answer 200", func() (bool, error) {
		res, err := http.Get(url) //nolint:gosec // a test URL on loopback
		if err != nil {
			last = err.Error()
			return false, nil
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		last = res.Status
		return res.StatusCode == http.StatusOK, nil
	})
	if t.Failed() {
		t.Logf("last answer of %s: %s", url, last)
	}
}

// TestLeaderElectionOfLocalReplicas runs a provider the way an unmodified
// openMCP provider runs (leaderprobe: kubebuilder flags, health probe on
// :8081 by default, controller-runtime leader election without a
// configured namespace) with two replicas: both start (each on ports of
// its own, published in the status), exactly one holds the Lease in the
// provider's namespace on the platform cluster, and when it is killed the
// other takes over.
func TestLeaderElectionOfLocalReplicas(t *testing.T) {
	f := newFixture(t)
	bin := buildLeaderProbe(t)
	d, err := process.New(process.Config{
		StateDir: f.stateDir,
		Images:   process.ImageMap{Images: []process.ImageMapping{{Image: leaderImage, Binary: bin}}},
		Platform: f.platform.Config,
	}, process.WithReadyGrace(time.Second),
		// The killed leader must not come back before the follower took
		// over, or it could win the Lease again.
		process.WithRestartBackoff(func(int32) time.Duration { return time.Hour }))
	must(t, err)
	t.Cleanup(func() {
		_ = d.Close()
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(f.providerDir(), "run-*.log"))
			for _, l := range logs {
				data, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", filepath.Base(l), data[max(len(data)-6000, 0):])
			}
		}
	})
	if err := process.NamespaceFileError(d); err != nil {
		process.SkipUnsupportedf(t, "this system cannot give processes the service-account namespace file, so leader election without a configured namespace cannot work: %v", err)
	}

	// What the provider reconciler grants a run service account: leases
	// in its own namespace.
	ctx := t.Context()
	must(t, f.platform.Client.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "leader-election"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		},
	}))
	must(t, f.platform.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "leader-election"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "leader-election"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: f.ns, Name: "sp-probe"}},
	}))

	w := f.workload(func(w *deploy.Workload) {
		w.Image = leaderImage
		w.Replicas = 2
		// As the provider reconciler sets them for two replicas with
		// metrics on; pprof as a provider's spec could pass it.
		w.RunCommand = []string{"run", "--pprof-bind-address=:6060"}
		w.RunArgs = []string{"--leader-elect=true", "--metrics-bind-address=:8080"}
		w.Metrics = deploy.Metrics{Enabled: true, Port: 8080, Path: "/metrics"}
	})
	initSucceeded(t, d, w)
	rs := waitReady(t, d, w)

	pods := map[string]string{} // pid -> pod
	var addrs []string
	for _, pod := range []string{"sp-probe-0", "sp-probe-1"} {
		r := f.waitReports(pod, 1)[0]
		pods[fmt.Sprint(r.PID)] = pod
		if r.NamespaceFile != f.ns {
			t.Errorf("%s read %q from the namespace file, want %q", pod, r.NamespaceFile, f.ns)
		}
		metrics, probe, pprof := flagArg(r.Args, "--metrics-bind-address"), flagArg(r.Args, "--health-probe-bind-address"), flagArg(r.Args, "--pprof-bind-address")
		addrs = append(addrs, metrics, probe, pprof)
		want := fmt.Sprintf("%s listens on metrics %s, health probe %s, pprof %s", pod, metrics, probe, pprof)
		if !strings.Contains(rs.Message, want) {
			t.Errorf("Ready message %q does not publish where %s listens: want it to contain %q", rs.Message, pod, want)
		}
		httpOK(t, "http://"+probe+"/healthz")
		httpOK(t, "http://"+metrics+"/metrics")
		httpOK(t, "http://"+pprof+"/debug/pprof/")
	}
	checkListenAddresses(t, "two replicas", addrs...)

	// Exactly one leader, holding the Lease in the provider's namespace.
	var leader string
	poll(t, 60*time.Second, "a leader to be elected", func() (bool, error) {
		l := f.leaders()
		if len(l) > 1 {
			return false, fmt.Errorf("more than one replica was elected at once: %v", l)
		}
		for pid := range l {
			leader = pid
		}
		return leader != "", nil
	})
	var lease coordinationv1.Lease
	must(t, f.platform.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "leaderprobe"}, &lease))
	holder := ptrString(lease.Spec.HolderIdentity)
	if holder == "" {
		t.Fatalf("Lease %s/leaderprobe has no holder", f.ns)
	}
	var follower string
	for pid := range pods {
		if pid != leader {
			follower = pid
		}
	}
	var pid int
	_, _ = fmt.Sscan(follower, &pid)
	if !alive(pid) {
		t.Fatalf("the follower %s (pid %s) is not running", pods[follower], follower)
	}

	// Kill the leader without giving it a chance to release the Lease.
	_, _ = fmt.Sscan(leader, &pid)
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	poll(t, 90*time.Second, fmt.Sprintf("%s (pid %s) to take over from the killed leader %s", pods[follower], follower, pods[leader]), func() (bool, error) {
		_, ok := f.leaders()[follower]
		return ok, nil
	})
	must(t, f.platform.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "leaderprobe"}, &lease))
	if now := ptrString(lease.Spec.HolderIdentity); now == holder || now == "" {
		t.Errorf("Lease holder after the takeover is %q, want another than the killed leader's %q", now, holder)
	}

	// The Lease lives in the provider's namespace only.
	var all coordinationv1.LeaseList
	must(t, f.platform.Client.List(ctx, &all))
	for _, l := range all.Items {
		if l.Name == "leaderprobe" && l.Namespace != f.ns {
			t.Errorf("Lease leaderprobe in namespace %s, want only in the provider's %s", l.Namespace, f.ns)
		}
	}
	waitRemoved(t, d, w)
}

// TestWithoutNamespaceFile checks the fallback when the system cannot give
// processes the namespace file: they start without it, and the run status
// says so.
func TestWithoutNamespaceFile(t *testing.T) {
	f := newFixture(t)
	d := f.deployer(process.WithReadyGrace(300*time.Millisecond),
		process.WithoutNamespaceFile())
	w := f.workload()
	initSucceeded(t, d, w)
	rs := waitReady(t, d, w)
	want := "no " + process.ServiceAccountNamespaceFile + " for leader election: turned off (WithoutNamespaceFile)"
	if !strings.Contains(rs.Message, want) {
		t.Errorf("Ready message %q, want it to contain %q", rs.Message, want)
	}
	r := f.waitReports("sp-probe-0", 1)[0]
	if _, err := os.Stat(process.ServiceAccountNamespaceFile); err != nil && r.NamespaceFile != "error: open "+process.ServiceAccountNamespaceFile+": no such file or directory" {
		t.Errorf("the process read %q from the namespace file, want no file", r.NamespaceFile)
	}
	log, err := os.ReadFile(filepath.Join(f.providerDir(), "run-0.log"))
	must(t, err)
	if !strings.Contains(string(log), "started without the service-account namespace file: "+want) {
		t.Errorf("run-0.log does not say the process started without the namespace file:\n%s", log)
	}
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
