package controlplane

import (
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/marketplane/marketplane/internal/supervisor"
)

// DefaultStopTimeout is how long a stopped process gets between SIGTERM and
// SIGKILL.
const DefaultStopTimeout = 10 * time.Second

// Runner starts the processes of a landscape, all with the same
// environment, through a supervisor.Spawner: they die with the landscape
// (Pdeathsig), and Close kills those still running.
type Runner struct {
	spawner *supervisor.Spawner
	env     []string
}

// NewRunner returns a Runner whose processes get env as their environment.
func NewRunner(env []string) *Runner {
	return &Runner{spawner: supervisor.NewSpawner(), env: env}
}

// Close stops the Runner; processes it started and that still run are
// killed by the kernel.
func (r *Runner) Close() { r.spawner.Close() }

// Crashes receives the processes that exited without Stop.
func (r *Runner) Crashes() <-chan *supervisor.Process { return r.spawner.Crashes() }

// Proc is a process a Runner started, with its record for state.json.
type Proc struct {
	*supervisor.Process
	// Record identifies the process in state.json.
	Record Process
}

// Start starts binary with args, its output appended to logPath, and
// returns it with its record named name.
func (r *Runner) Start(name, binary string, args []string, logPath string) (*Proc, error) {
	cmd := exec.Command(binary, args...)
	cmd.Env = r.env
	p, err := r.spawner.Start(supervisor.Command{Name: name, Cmd: cmd, LogPath: logPath})
	if err != nil {
		return nil, err
	}
	rec := Process{Name: name, Binary: binary, PID: p.PID, Log: logPath}
	// The start time identifies the process for a later run; reading it
	// right after the fork cannot race with a PID reuse because the
	// process is not reaped before Wait.
	rec.StartTime, _ = supervisor.StartTime(p.PID)
	return &Proc{Process: p, Record: rec}, nil
}

// Alive reports whether the recorded process still runs: a process with
// its PID exists, started at the recorded time and runs the recorded
// binary. A PID taken over by another process is not alive.
func Alive(rec *Process) bool {
	return rec != nil && supervisor.Running(rec.PID, rec.StartTime, rec.Binary)
}

// StopRecorded stops a process recorded by an earlier run, if it is still
// alive: SIGTERM, up to timeout for it to go, then SIGKILL. It returns an
// error when the process survives SIGKILL for a few seconds.
func StopRecorded(rec *Process, timeout time.Duration) error {
	if rec == nil {
		return nil
	}
	if err := supervisor.StopPID(rec.PID, func() bool { return Alive(rec) }, timeout); err != nil {
		return fmt.Errorf("stop %s: %w", rec.Name, err)
	}
	return nil
}

// Self returns the record of the calling process, for State.Supervisor.
// Its Binary is os.Args[0], which is what its command line shows (a
// relative path when started as ./bin/marketplane).
func Self() (*Process, error) {
	st, err := supervisor.StartTime(os.Getpid())
	if err != nil {
		return nil, err
	}
	return &Process{Name: "supervisor", Binary: os.Args[0], PID: os.Getpid(), StartTime: st}, nil
}
