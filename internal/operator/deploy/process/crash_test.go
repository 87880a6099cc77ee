package process_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/marketplane/marketplane/internal/operator/deploy"
	"github.com/marketplane/marketplane/internal/operator/deploy/process"
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
// then waits forever, to be killed by the test.
func runOperatorHelper() int {
	var c helperConfig
	if err := json.Unmarshal([]byte(os.Getenv(operatorHelperEnv)), &c); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	d, err := process.New(process.Config{
		StateDir: c.StateDir,
		Images:   process.ImageMap{Images: []process.ImageMapping{{Image: probeImage, Binary: c.Probe}}},
		Platform: cfg,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	w := (&fixture{ns: c.Namespace, outDir: c.OutDir}).workload()
	ctx := context.Background()
	for {
		st, err := d.Init(ctx, w)
		if err != nil || st.State == deploy.InitFailed {
			fmt.Fprintln(os.Stderr, "helper: init:", err, st.Message)
			return 1
		}
		if st.State == deploy.InitSucceeded {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling a process, not asserting
	}
	if _, err := d.Run(ctx, w); err != nil {
		fmt.Fprintln(os.Stderr, "helper: run:", err)
		return 1
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
	exited := make(chan error, 1)
	go func() { exited <- helper.Wait() }()
	t.Cleanup(func() {
		_ = helper.Process.Kill()
		<-exited
	})

	run := f.waitReports("sp-probe-0", 1)[0]
	if !alive(run.PID) {
		out, _ := os.ReadFile(logPath)
		t.Fatalf("run process %d is not running; helper output:\n%s", run.PID, out)
	}
	must(t, helper.Process.Kill())
	<-exited
	exited <- nil // for the cleanup
	poll(t, 10*time.Second, fmt.Sprintf("run process %d to die with its operator", run.PID), func() (bool, error) {
		return !alive(run.PID), nil
	})
}
