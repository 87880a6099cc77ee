package main

// Machine load: -load N starts N busy loops before the first phase, as
// `make test-under-load` does, so that the figures can be read on a loaded
// machine; each phase's first line names the 1-minute load average at its
// start and end.

import (
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"

	"github.com/marketplane/marketplane/pkg/supervisor"
)

// busyLoop is the shell command of one busy loop.
const busyLoop = "while :; do :; done"

// busyPIDs are the process IDs of the running busy loops, so that
// cpuSeconds names their CPU time apart from the benchmark's processes.
var busyPIDs sync.Map // int → struct{}

// startBusyLoops starts n busy loops, each a shell in a process group of
// its own that the kernel kills if this process dies (supervisor.StartCmd).
// stop kills them and waits until they are gone; it may be called again.
func startBusyLoops(n int) (stop func() error, err error) {
	cmds := make([]*exec.Cmd, 0, n)
	var once sync.Once
	var stopErr error
	stop = func() error {
		once.Do(func() { stopErr = killBusyLoops(cmds) })
		return stopErr
	}
	for range n {
		cmd := exec.Command("sh", "-c", busyLoop)
		if err := supervisor.StartCmd(cmd); err != nil {
			return nil, errors.Join(fmt.Errorf("start busy loop: %w", err), stop())
		}
		busyPIDs.Store(cmd.Process.Pid, struct{}{})
		cmds = append(cmds, cmd)
	}
	return stop, nil
}

// killBusyLoops kills the process groups of cmds and reaps them.
func killBusyLoops(cmds []*exec.Cmd) error {
	var errs []error
	for _, cmd := range cmds {
		pid := cmd.Process.Pid
		if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kill busy loop %d: %w", pid, err))
		}
		// Killed: Wait reports the signal, which is what was asked for.
		_ = cmd.Wait()
		busyPIDs.Delete(pid)
	}
	return errors.Join(errs...)
}

// isBusyLoop reports whether pid is one of the running busy loops.
func isBusyLoop(pid int) bool {
	_, ok := busyPIDs.Load(pid)
	return ok
}

// describeLoad describes the 1-minute load averages at a phase's start
// and end, for its first line.
func describeLoad(start, end float64) string {
	return fmt.Sprintf("[load average (1 min) %.2f → %.2f]", start, end)
}
