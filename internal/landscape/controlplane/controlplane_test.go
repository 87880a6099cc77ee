package controlplane

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/marketplane/marketplane/pkg/supervisor"
)

// TestControlPlane starts etcd and two clusters on it, and checks that each
// answers with its own kubeconfig only, that their data is separate, and
// that stopping a cluster and deleting its data leaves no process, port or
// key behind.
func TestControlPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and API servers; run without -short")
	}
	bins := testBinaries(t)
	layout := Layout{Dir: t.TempDir()}
	ports, err := FreePorts(4)
	if err != nil {
		t.Fatal(err)
	}
	store := NewStore(layout.Dir, &State{
		Etcd: Etcd{ClientPort: ports[0], PeerPort: ports[1], DataDir: layout.EtcdDataDir()},
		Clusters: map[string]*Cluster{
			"a": {Name: "a", Port: ports[2], EtcdPrefix: EtcdPrefix("a")},
			"b": {Name: "b", Port: ports[3], EtcdPrefix: EtcdPrefix("b")},
		},
	})
	cp := New(layout, bins, store, WithStartTimeout(time.Minute), WithStopTimeout(5*time.Second))
	t.Cleanup(func() { _ = cp.Stop(); cp.Close() })
	ctx := t.Context()
	must(t, cp.EnsurePKI())
	start := time.Now()
	must(t, cp.StartEtcd(ctx))
	// Both at once, as a landscape starts its clusters: each waits for its
	// API server and controller manager, not for the other cluster.
	var a, b *RunningCluster
	var errA, errB error
	var wg sync.WaitGroup
	wg.Go(func() { a, errA = cp.StartCluster(ctx, "a") })
	wg.Go(func() { b, errB = cp.StartCluster(ctx, "b") })
	wg.Wait()
	must(t, errA)
	must(t, errB)
	t.Logf("etcd and two clusters started in %s", time.Since(start).Round(time.Millisecond))

	var rss int64
	for _, p := range cp.Procs() {
		n, err := supervisor.ResidentMemory(p.PID)
		must(t, err)
		t.Logf("%s: %d MiB", p.Name, n>>20)
		rss += n
	}
	t.Logf("resident memory: %d MiB", rss>>20)
	// Clusters not provisioned for a request keep the API server's
	// defaults; TestSmallProfile covers the others.
	if args := cmdline(t, a.apiServer.PID()); slices.ContainsFunc(args, func(s string) bool { return strings.HasPrefix(s, "--runtime-config") }) {
		t.Errorf("cluster a, not provisioned for a request, runs the small profile: %v", args)
	}

	// Each kubeconfig file works for its own cluster.
	for _, rc := range []*RunningCluster{a, b} {
		cfg, err := clientcmd.BuildConfigFromFlags("", rc.KubeconfigPath)
		must(t, err)
		cs := kubernetes.NewForConfigOrDie(cfg)
		_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "only-in-" + rc.Name}}, metav1.CreateOptions{})
		must(t, err)
	}
	// The admin certificate of a is not accepted by b.
	cross := *b.Config
	cross.CertData, cross.KeyData = a.Config.CertData, a.Config.KeyData
	if _, err := kubernetes.NewForConfigOrDie(&cross).CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
		t.Error("cluster b accepted the admin certificate of cluster a")
	}
	// Data is separate.
	if _, err := kubernetes.NewForConfigOrDie(b.Config).CoreV1().ConfigMaps("default").Get(ctx, "only-in-a", metav1.GetOptions{}); err == nil {
		t.Error("cluster b sees a ConfigMap created in cluster a")
	}

	recA := store.Snapshot().Clusters["a"]
	must(t, cp.StopCluster("a"))
	if Alive(recA.APIServer) || Alive(recA.ControllerManager) {
		t.Error("processes of cluster a still alive after StopCluster")
	}
	if err := CheckPortFree(recA.Port, "a"); err != nil {
		t.Errorf("port of cluster a after StopCluster: %v", err)
	}
	before, err := cp.CountKeys(ctx, "a")
	must(t, err)
	must(t, cp.DeleteData(ctx, "a"))
	after, err := cp.CountKeys(ctx, "a")
	must(t, err)
	if before == 0 || after != 0 {
		t.Errorf("etcd keys of cluster a: %d before DeleteData, %d after; want >0 and 0", before, after)
	}
	if n, err := cp.CountKeys(ctx, "b"); err != nil || n == 0 {
		t.Errorf("etcd keys of cluster b after deleting a's: %d, %v", n, err)
	}

	all := store.Snapshot().RecordedProcesses()
	must(t, cp.Stop())
	for _, p := range all {
		if Alive(p) {
			t.Errorf("%s (pid %d) alive after Stop", p.Name, p.PID)
		}
	}
	for port, use := range store.Snapshot().Ports() {
		if err := CheckPortFree(port, use); err != nil {
			t.Errorf("after Stop: %v", err)
		}
	}
}

func TestCheckPortFree(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	err = CheckPortFree(port, "kube-apiserver of cluster platform")
	if !errors.Is(err, ErrPortInUse) || !strings.Contains(err.Error(), l.Addr().String()) || !strings.Contains(err.Error(), "platform") {
		t.Errorf("CheckPortFree on a used port = %v; want ErrPortInUse naming %s and its use", err, l.Addr())
	}
}

func TestFindBinariesMissing(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, EtcdBinary), []byte("#!/bin/sh\n"), 0o755))
	_, err := FindBinaries(dir)
	if !errors.Is(err, ErrBinaryMissing) || !strings.Contains(err.Error(), "make tools") || !strings.Contains(err.Error(), APIServerBinary) {
		t.Errorf("FindBinaries without kube-apiserver = %v; want ErrBinaryMissing naming kube-apiserver and make tools", err)
	}
}

func TestAlive(t *testing.T) {
	self, err := Self()
	must(t, err)
	if !Alive(self) {
		t.Fatal("Alive(Self()) = false")
	}
	cases := map[string]func(p *Process){
		"OtherStartTime": func(p *Process) { p.StartTime++ },
		"OtherBinary":    func(p *Process) { p.Binary = "/usr/bin/true" },
		"NoPID":          func(p *Process) { p.PID = 0 },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			p := *self
			change(&p)
			if Alive(&p) {
				t.Errorf("Alive(%+v) = true for a record that is not this process", p)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestMoveTakenPorts holds two recorded ports and checks that they move,
// to free ports no record uses, that each move is reported, and that a
// moved cluster keeps the service-account issuer of its first port.
func TestMoveTakenPorts(t *testing.T) {
	// The held ports are this test's own listeners, so they are taken for
	// sure; the others are merely free now, and may be taken by another
	// process meanwhile (then they move too, reported like the others).
	var held []int
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		t.Cleanup(func() { _ = l.Close() })
		held = append(held, l.Addr().(*net.TCPAddr).Port)
	}
	free, err := FreePorts(2)
	must(t, err)
	s := &State{
		Etcd: Etcd{ClientPort: held[0], PeerPort: free[0]},
		Clusters: map[string]*Cluster{
			"a": {Name: "a", Port: held[1]},
			"b": {Name: "b", Port: free[1], ServiceAccountIssuer: "https://127.0.0.1:1"},
		},
	}
	moves, err := MoveTakenPorts(s)
	must(t, err)
	moved := map[int]int{}
	for _, m := range moves {
		moved[m.From] = m.To
		if !strings.Contains(m.String(), "127.0.0.1:"+strconv.Itoa(m.From)) || !strings.Contains(m.String(), m.Use) {
			t.Errorf("move %q does not name the port and its use", m)
		}
		if slices.Contains(held, m.To) || slices.Contains(free, m.To) {
			t.Errorf("moved to %d, a port the state already records", m.To)
		}
	}
	if moved[held[0]] == 0 || moved[held[0]] != s.Etcd.ClientPort || moved[held[1]] == 0 || moved[held[1]] != s.Clusters["a"].Port {
		t.Fatalf("moves %+v, state etcd %+v, a %+v; want the held etcd client port and cluster a's port moved", moves, s.Etcd, s.Clusters["a"])
	}
	if (s.Etcd.PeerPort != free[0]) != (moved[free[0]] != 0) || (s.Clusters["b"].Port != free[1]) != (moved[free[1]] != 0) {
		t.Errorf("a port changed without a reported move: etcd peer %d (was %d), b %d (was %d), moves %+v", s.Etcd.PeerPort, free[0], s.Clusters["b"].Port, free[1], moves)
	}
	if want := "https://127.0.0.1:" + strconv.Itoa(held[1]); s.Clusters["a"].ServiceAccountIssuer != want {
		t.Errorf("cluster a's issuer after the move = %q, want %q (its first port)", s.Clusters["a"].ServiceAccountIssuer, want)
	}
	if s.Clusters["b"].ServiceAccountIssuer != "https://127.0.0.1:1" {
		t.Errorf("cluster b's recorded issuer changed to %q", s.Clusters["b"].ServiceAccountIssuer)
	}
}

// testBinaries returns the binaries in bin/ (or KUBEBUILDER_ASSETS).
// Missing binaries fail the test rather than skip it: `make test` builds
// them, and a skipped test would pass CI untested.
func testBinaries(t *testing.T) Binaries {
	t.Helper()
	dir, err := BinDir("")
	if err != nil {
		t.Fatalf("%v (run 'make tools')", err)
	}
	bins, err := FindBinaries(dir)
	if err != nil {
		t.Fatalf("%v (run 'make tools')", err)
	}
	return bins
}
