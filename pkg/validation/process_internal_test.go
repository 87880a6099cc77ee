package validation

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// TestProcessesOfMatchesItsDirectory: a process counts as the provider's
// when it runs the binary and its environment names a path below the
// provider's directory; the same binary run for another directory does
// not count.
func TestProcessesOfMatchesItsDirectory(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skipf("no sleep binary: %v", err)
	}
	// A copy, so no other process on the machine runs this binary.
	bin := filepath.Join(t.TempDir(), "provider")
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(t.TempDir(), "serviceprovider-x") + string(filepath.Separator)
	other := filepath.Join(t.TempDir(), "serviceprovider-x") + string(filepath.Separator)
	cmd := exec.Command(bin, "60")
	cmd.Env = []string{"KUBECONFIG=" + mine + "run.kubeconfig"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := strconv.Itoa(cmd.Process.Pid)

	if got := processesOf(bin, mine); !slices.Equal(got, []string{pid}) {
		t.Errorf("processesOf(binary, its directory) = %v, want [%s]", got, pid)
	}
	if got := processesOf(bin, other); len(got) != 0 {
		t.Errorf("processesOf(binary, another directory) = %v, want none", got)
	}
	if got := processesOf(bin, ""); !slices.Equal(got, []string{pid}) {
		t.Errorf("processesOf(binary, no directory) = %v, want [%s]", got, pid)
	}
}
