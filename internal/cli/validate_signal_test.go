package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestValidateStopsOnSIGTERM runs the real `marketplane validate` on the
// sample provider, sends it SIGTERM while setup starts the API servers,
// and checks that it exits non-zero saying it was interrupted, and leaves
// no process and no temporary directory behind (but the machine-wide lock
// directories of internal/freeport and pkg/startslot, which every
// process shares).
func TestValidateStopsOnSIGTERM(t *testing.T) {
	testenv.SkipIfShort(t)
	assets, err := testenv.BinaryDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	testenv.BuildBinaries(t, dir, "github.com/marketplane/marketplane/cmd/marketplane", "github.com/marketplane/marketplane/providers/sample/cmd/sample")
	sample := filepath.Join(dir, "sample")
	tmp := t.TempDir()

	var stdout, stderr testenv.SyncBuffer
	cmd := exec.Command(filepath.Join(dir, "marketplane"), "validate", "-f", "../../pkg/validation/testdata/good/all.yaml",
		"--binary", sample, "--bin-dir", assets)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			if err := <-done; err != nil {
				t.Logf("validate killed at clean-up: %v", err)
			}
		}
	})

	// Setup is under way once an API server's directory exists in TMPDIR.
	ctx := t.Context()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		entries, err := os.ReadDir(tmp)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "marketplane-platform-") || strings.HasPrefix(e.Name(), "k8s_test_framework_") {
				return true, nil
			}
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("setup did not start an API server: %v\nstderr:\n%s", err, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The flow runs its clean-up steps before it exits; on a busy
	// machine setup itself can take minutes.
	select {
	case err = <-done:
	case <-time.After(5 * time.Minute):
		t.Fatalf("still running 5 minutes after SIGTERM\nstderr:\n%s", stderr.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Errorf("exit after SIGTERM: %v, want a non-zero exit code", err)
	}
	if !strings.Contains(stderr.String(), "interrupted by a signal") {
		t.Errorf("stderr does not say it was interrupted:\n%s\nstdout:\n%s", stderr.String(), stdout.String())
	}

	// Child processes are reaped by the flow's teardown; give the kernel
	// a moment to drop their /proc entries.
	var left []string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		left = processesOf(tmp, sample)
		return len(left) == 0, nil
	})
	if err != nil {
		t.Errorf("processes left after SIGTERM: %v", left)
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	uid := strconv.Itoa(os.Getuid())
	for _, e := range entries {
		if e.Name() == "marketplane-ports-"+uid || e.Name() == "marketplane-start-slots-"+uid {
			continue
		}
		t.Errorf("left in TMPDIR after SIGTERM: %s", e.Name())
	}
}

// processesOf lists the processes whose command line names dir or whose
// executable is binary, as "pid: command line".
func processesOf(dir, binary string) []string {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var out []string
	for _, p := range procs {
		cmdline, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err != nil {
			continue
		}
		exe, _ := os.Readlink(filepath.Join(p, "exe"))
		if bytes.Contains(cmdline, []byte(dir)) || exe == binary {
			out = append(out, filepath.Base(p)+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return out
}
