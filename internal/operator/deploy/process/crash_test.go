package process_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/marketplane/marketplane/internal/operator/deploy"
	"github.com/marketplane/marketplane/internal/operator/deploy/process"
	"github.com/marketplane/marketplane/pkg/supervisor"
)

// operatorHelperEnv makes the test binary act as a minimal operator (see
// runOperatorHelper) instead of running tests.
const operatorHelperEnv = "MARKETPLANE_PROCESS_TEST_OPERATOR"

// helperConfig tells the helper operator what to run.
type helperConfig struct {
	Kubeconfig string
	StateDir   string
	Probe      string
	Namespace  string
	OutDir     string
}

// runOperatorHelper runs the probe through init and run with a Deployer and
// then waits forever, to be killed by the test. It returns only when it
// failed, with the reason.
func runOperatorHelper() error {
	var c helperConfig
	if err := json.Unmarshal([]byte(os.Getenv(operatorHelperEnv)), &c); err != nil {
		return fmt.Errorf("decode %s: %w", operatorHelperEnv, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fmt.Errorf("platform kubeconfig: %w", err)
	}
	d, err := process.New(process.Config{
		StateDir: c.StateDir,
		Images:   process.ImageMap{Images: []process.ImageMapping{{Image: probeImage, Binary: c.Probe}}},
		Platform: cfg,
	})
	if err != nil {
		return fmt.Errorf("new deployer: %w", err)
	}
	w := (&fixture{ns: c.Namespace, outDir: c.OutDir}).workload()
	ctx := context.Background()
	for {
		st, err := d.Init(ctx, w)
		if err != nil {
			return fmt.Errorf("init: %w", err)
		}
		if st.State == deploy.InitFailed {
			return fmt.Errorf("init failed: %s", st.Message)
		}
		if st.State == deploy.InitSucceeded {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling a process, not asserting
	}
	if _, err := d.Run(ctx, w); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	select {}
}

// TestProcessesDieWithOperator kills an operator with SIGKILL, so that it
// cannot clean up, and checks that its run process dies with it.
func TestProcessesDieWithOperator(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Pdeathsig is Linux only")
	}
	f := newFixture(t)
	kubeconfig, err := f.platform.KubeconfigPath()
	must(t, err)
	cfg, err := json.Marshal(helperConfig{Kubeconfig: kubeconfig, StateDir: f.stateDir, Probe: f.probe, Namespace: f.ns, OutDir: f.outDir})
	must(t, err)
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), operatorHelperEnv+"="+string(cfg))
	logPath := filepath.Join(t.TempDir(), "helper.log")
	logFile, err := os.Create(logPath)
	must(t, err)
	defer logFile.Close()
	helper.Stdout, helper.Stderr = logFile, logFile
	must(t, helper.Start())
	// exited is closed once the helper was reaped, waitErr then says how
	// it ended.
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = helper.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = helper.Process.Kill()
		<-exited
	})

	run := f.waitReports("sp-probe-0", 1)[0]
	if !alive(run.PID) {
		out, _ := os.ReadFile(logPath)
		t.Fatalf("run process %d is not running; helper output:\n%s", run.PID, out)
	}
	// The start time tells the run process from a later one that reuses
	// its PID, which on a busy machine would look like a survivor.
	started, err := supervisor.StartTime(run.PID)
	must(t, err)
	must(t, helper.Process.Kill())
	killed := time.Now()
	<-exited
	if ws, ok := helper.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		out, _ := os.ReadFile(logPath)
		t.Fatalf("the helper operator ended by itself (%v), not by the test's SIGKILL; output:\n%s", waitErr, out)
	}
	// The kernel sends the run process SIGKILL as the helper's thread that
	// started it exits, that is before Wait returned. The process still
	// has to be scheduled to die: each of its threads woken and its
	// memory unmapped, which on a loaded 2-core machine (API servers,
	// compilers, paging) once took longer than the 10 s this test
	// allowed. A process that Pdeathsig did not reach never dies, so a
	// generous timeout proves as much as a short one and costs nothing
	// when the test passes.
	poll(t, 2*time.Minute, fmt.Sprintf("run process %d to die with its operator", run.PID), func() (bool, error) {
		return !sameProcessAlive(run.PID, started), nil
	})
	t.Logf("run process %d was gone %s after the operator's SIGKILL", run.PID, time.Since(killed).Round(time.Millisecond))
}

// sameProcessAlive reports whether pid is a live process that started at
// started (clock ticks since boot, see supervisor.StartTime).
func sameProcessAlive(pid int, started uint64) bool {
	if !alive(pid) {
		return false
	}
	now, err := supervisor.StartTime(pid)
	if err != nil {
		// Gone since alive looked; any other error: alive says it is there.
		return !errors.Is(err, fs.ErrNotExist)
	}
	return now == started
}
