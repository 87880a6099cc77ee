package controlplane

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestStartWaitsOutAnAPIServerExit starts two clusters whose kube-apiserver
// is a wrapper script. For cluster "flaky" it exits once as kube-apiserver
// does when a post-start hook times out on a loaded machine ("PostStartHook
// \"scheduling/bootstrap-system-priority-classes\" failed"), then runs the
// real binary: the start must wait out the restart and succeed. For cluster
// "broken" it always exits: the start must fail with its exit after
// maxStartRestarts restarts, not wait for the timeout.
func TestStartWaitsOutAnAPIServerExit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and API servers; run without -short")
	}
	bins := testBinaries(t)
	layout := Layout{Dir: t.TempDir()}
	wrapper := filepath.Join(t.TempDir(), "kube-apiserver")
	script := fmt.Sprintf(`#!/bin/sh
case "$*" in
*/broken/*)
	n=$(( $(cat "$0.broken" 2>/dev/null || echo 0) + 1 ))
	echo "$n" > "$0.broken"
	echo "F0000 simulated: exit $n"
	exit 3 ;;
esac
if [ ! -e "$0.exited" ]; then
	: > "$0.exited"
	echo 'F0000 hooks.go] PostStartHook "scheduling/bootstrap-system-priority-classes" failed (simulated)'
	exit 255
fi
exec %q "$@"
`, bins.APIServer)
	must(t, os.WriteFile(wrapper, []byte(script), 0o755))
	bins.APIServer = wrapper

	ports, err := FreePorts(4)
	must(t, err)
	store := NewStore(layout.Dir, &State{
		Etcd: Etcd{ClientPort: ports[0], PeerPort: ports[1], DataDir: layout.EtcdDataDir()},
		Clusters: map[string]*Cluster{
			"flaky":  {Name: "flaky", Port: ports[2], EtcdPrefix: EtcdPrefix("flaky")},
			"broken": {Name: "broken", Port: ports[3], EtcdPrefix: EtcdPrefix("broken")},
		},
	})
	const startTimeout = 2 * time.Minute
	cp := New(layout, bins, store, WithStartTimeout(startTimeout), WithStopTimeout(5*time.Second),
		WithRestartBackoff(func(int) time.Duration { return 100 * time.Millisecond }))
	t.Cleanup(func() { _ = cp.Stop(); cp.Close() })
	ctx := t.Context()
	must(t, cp.EnsurePKI())
	must(t, cp.StartEtcd(ctx))

	rc, err := cp.StartCluster(ctx, "flaky")
	if err != nil {
		t.Fatalf("a kube-apiserver that exits once while starting: the start failed: %v", err)
	}
	if n := rc.apiServer.Restarts(); n < 1 {
		t.Errorf("kube-apiserver of flaky restarted %d times; want at least 1 (the wrapper exits once)", n)
	}

	start := time.Now()
	_, err = cp.StartCluster(ctx, "broken")
	if err == nil {
		t.Fatal("a kube-apiserver that always exits: the start succeeded")
	}
	// The error ends with the log of the exit that ended the wait: the
	// one after maxStartRestarts restarts (later runs may follow it).
	want := fmt.Sprintf("simulated: exit %d", maxStartRestarts+1)
	if !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), want) {
		t.Errorf("start of broken: %v\nwant its exit and the end of its log, with %q", err, want)
	}
	if waited := time.Since(start); waited > startTimeout/2 {
		t.Errorf("start of broken failed after %s; want it to fail on the exits, not the %s timeout", waited, startTimeout)
	}
}

// TestReadyzNamesFailingChecks checks that a not-ready answer of /readyz
// is reported with the checks that fail, which is what a start that gives
// up on an API server shows.
func TestReadyzNamesFailingChecks(t *testing.T) {
	var ready atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || !r.URL.Query().Has("verbose") {
			http.NotFound(w, r)
			return
		}
		if ready.Load() {
			fmt.Fprintln(w, "[+]ping ok\nreadyz check passed")
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintln(w, "[+]ping ok\n[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\n[+]etcd ok\n[-]informer-sync failed: reason withheld\nreadyz check failed")
	}))
	defer srv.Close()
	err := Readyz(t.Context(), srv.Client(), srv.URL)
	want := "500 Internal Server Error: [-]poststarthook/rbac/bootstrap-roles failed: reason withheld; [-]informer-sync failed: reason withheld"
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("Readyz of a server that is not ready: %v; want it to end with %q", err, want)
	}
	ready.Store(true)
	if err := Readyz(t.Context(), srv.Client(), srv.URL); err != nil {
		t.Errorf("Readyz of a ready server: %v", err)
	}
}

// TestWaitReadyzWaitsForASlowAnswer starts a wait for an API server whose
// /readyz answers only after 6 s, as a starting kube-apiserver on a loaded
// machine was seen to: the wait must take that answer rather than cut each
// request short and time out.
func TestWaitReadyzWaitsForASlowAnswer(t *testing.T) {
	const slow = 6 * time.Second
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // an API server slow to answer, not a wait for an order
		case <-time.After(slow):
		case <-r.Context().Done():
			return
		}
		fmt.Fprintln(w, "readyz check passed")
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	// The wait also watches the API server's process: a stand-in that
	// runs until the test ends.
	runner := NewRunner(nil)
	defer runner.Close()
	proc, err := runner.Start("stand-in", "sleep", []string{"600"}, filepath.Join(t.TempDir(), "stand-in.log"))
	must(t, err)
	defer proc.Stop(time.Second)

	c := &ControlPlane{startTimeout: time.Minute}
	rc := &RunningCluster{Name: "slow", Host: srv.URL, apiServer: proc,
		Config: &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}}
	if err := c.waitReadyz(t.Context(), rc); err != nil {
		t.Fatalf("wait for an API server whose /readyz answers after %s: %v", slow, err)
	}
}
