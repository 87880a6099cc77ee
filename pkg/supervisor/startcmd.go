package supervisor

import (
	"os/exec"
	"sync"
)

// lasting is the Spawner of StartCmd. It is never closed, so its thread
// lives as long as the program.
var lasting = sync.OnceValue(func() *Spawner { return NewSpawner() })

// StartCmd starts cmd, like cmd.Start, in a process group of its own and,
// on Linux, with Pdeathsig, for commands that the caller waits for and
// stops itself (tests run a kube-controller-manager this way). Other fields
// of cmd.SysProcAttr are kept.
//
// It forks from a thread that lives as long as the program. A plain
// cmd.Start with Pdeathsig forks from whatever thread the goroutine runs
// on; when a Spawner's goroutine later locks that thread and ends (Close),
// the thread ends with it and the kernel kills the process, which nobody
// asked to stop.
func StartCmd(cmd *exec.Cmd) error {
	cmd.SysProcAttr = withGroup(cmd.SysProcAttr)
	return lasting().start(Command{Cmd: cmd})
}
