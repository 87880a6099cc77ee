package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/internal/landscape/controlplane"
)

// TestLandscapeUpRejectsBadFlags checks that a bad --image-map,
// --image-map-file, --manifest or --mcp-backend fails `landscape up` before anything
// starts: no supervisor in the background, no state recorded.
func TestLandscapeUpRejectsBadFlags(t *testing.T) {
	// Flags are checked before the binaries are looked for: an empty
	// --bin-dir must not hide a flag error (and the test needs no bin/).
	binDir := t.TempDir()
	dir := t.TempDir()
	badYAML := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badYAML, []byte("kind: [unclosed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		args    []string
		wantErr string
	}{
		"image map without a binary":    {args: []string{"--image-map", "registry.invalid/acme/p:v1"}, wantErr: "want IMAGE=BINARY"},
		"image map to a missing binary": {args: []string{"--image-map", "registry.invalid/acme/p:v1=" + filepath.Join(dir, "nope")}, wantErr: "no such file"},
		"missing image map file":        {args: []string{"--image-map-file", filepath.Join(dir, "nope.yaml")}, wantErr: "read image map"},
		"missing manifest":              {args: []string{"--manifest", filepath.Join(dir, "nope.yaml")}, wantErr: "read manifest"},
		"manifest that is not YAML":     {args: []string{"--manifest", badYAML}, wantErr: "bad.yaml"},
		"unknown MCP backend":           {args: []string{"--mcp-backend", "vcluster"}, wantErr: `--mcp-backend "vcluster": want one of apiserver, kcp`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state")
			var out bytes.Buffer
			cmd := NewRootCommand(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(append([]string{"landscape", "up", "--state-dir", state, "--bin-dir", binDir}, tc.args...))
			err := cmd.ExecuteContext(t.Context())
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("landscape up %v = %v; want an error with %q", tc.args, err, tc.wantErr)
			}
			if _, err := os.Stat(state); !os.IsNotExist(err) {
				t.Errorf("the state directory was created although the flags were rejected: %v", err)
			}
		})
	}
}

// TestLandscapeStatusTree checks the wiring of `landscape status --tree`
// on a landscape that is not running: the tree comes from state.json
// alone (no API server is asked), with every cluster, and without --tree
// the table is printed as before.
func TestLandscapeStatusTree(t *testing.T) {
	dir := t.TempDir()
	st := &controlplane.State{Phase: controlplane.PhaseStopped, Clusters: map[string]*controlplane.Cluster{}}
	for i, name := range []string{"platform", "onboarding", "workload"} {
		st.Clusters[name] = &controlplane.Cluster{Name: name, Port: 1000 + i}
	}
	if err := controlplane.NewStore(dir, st).Update(func(*controlplane.State) error { return nil }); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		cmd := NewRootCommand(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append([]string{"landscape", "status", "--state-dir", dir}, args...))
		if err := cmd.ExecuteContext(t.Context()); err != nil {
			t.Fatalf("landscape status %v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	want := "landscape " + dir + " (not running, last phase Stopped)\n" +
		"├── platform    https://127.0.0.1:1000  not running\n" +
		"├── onboarding  https://127.0.0.1:1001  not running\n" +
		"└── workload    https://127.0.0.1:1002  not running\n"
	if got := run("--tree"); got != want {
		t.Errorf("status --tree:\n%s\nwant\n%s", got, want)
	}
	if got := run(); !strings.Contains(got, "CLUSTER") || strings.Contains(got, "└──") {
		t.Errorf("status without --tree is not the table:\n%s", got)
	}
}

// TestLandscapeStopStartWithoutARunningLandscape checks stop, start and
// status where no supervisor runs: no landscape (stop says so, start names
// up), a crashed one (status says so; stop records the stop and status
// then says stopped, keeping the state directory), and a second stop.
func TestLandscapeStopStartWithoutARunningLandscape(t *testing.T) {
	run := func(args ...string) (string, error) {
		t.Helper()
		var out bytes.Buffer
		cmd := NewRootCommand(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append([]string{"landscape"}, args...))
		err := cmd.ExecuteContext(t.Context())
		return out.String(), err
	}
	empty := filepath.Join(t.TempDir(), "none")
	if out, err := run("stop", "--state-dir", empty); err != nil || !strings.Contains(out, "No landscape in") {
		t.Errorf("stop without a landscape = %v:\n%s\nwant success saying there is none", err, out)
	}
	if _, err := run("start", "--state-dir", empty); err == nil || !strings.Contains(err.Error(), "'marketplane landscape up' creates one") {
		t.Errorf("start without a landscape = %v; want an error naming up", err)
	}

	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, controlplane.MarkerFile), nil, 0o600))
	gone := &controlplane.Process{Name: "marketplane", Binary: "/nonexistent/marketplane", PID: 1 << 22, StartTime: 1}
	crashed := &controlplane.State{Phase: controlplane.PhaseReady, Supervisor: gone, Clusters: map[string]*controlplane.Cluster{
		"platform": {Name: "platform", Port: 1000, APIServer: &controlplane.Process{Name: "kube-apiserver-platform", Binary: "/nonexistent/kube-apiserver", PID: 1<<22 + 1, StartTime: 1}},
	}}
	must(controlplane.NewStore(dir, crashed).Update(func(*controlplane.State) error { return nil }))
	out, err := run("status", "--state-dir", dir)
	must(err)
	if want := "not running (unexpectedly: crashed or killed in phase Ready, its supervisor, pid 4194304, is gone)"; !strings.Contains(out, want) {
		t.Errorf("status of a crashed landscape lacks %q:\n%s", want, out)
	}
	out, err = run("stop", "--state-dir", dir)
	must(err)
	if !strings.Contains(out, "is not running (unexpectedly: crashed") || !strings.Contains(out, "'marketplane landscape start' resumes it") {
		t.Errorf("stop of a crashed landscape does not say it was not running:\n%s", out)
	}
	st, err := controlplane.ReadState(dir)
	must(err)
	if st.Phase != controlplane.PhaseStopped || st.StoppedAt == nil || st.Supervisor != nil || len(st.RecordedProcesses()) != 0 || st.Clusters["platform"].Port != 1000 {
		t.Errorf("state after stop: %+v; want Stopped on purpose, no processes, the clusters kept", st)
	}
	out, err = run("status", "--state-dir", dir)
	must(err)
	if !strings.Contains(out, ": stopped (stopped on purpose at ") || !strings.Contains(out, "'marketplane landscape start' resumes it") {
		t.Errorf("status after stop does not say stopped:\n%s", out)
	}
	if out, err := run("stop", "--state-dir", dir); err != nil || !strings.Contains(out, "is not running (stopped on purpose at ") {
		t.Errorf("a second stop = %v:\n%s\nwant success saying it is stopped", err, out)
	}
}
