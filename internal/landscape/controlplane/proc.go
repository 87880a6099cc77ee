package controlplane

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/marketplane/marketplane/pkg/supervisor"
)

// DefaultStopTimeout is how long a stopped process gets between SIGTERM and
// SIGKILL.
const DefaultStopTimeout = 10 * time.Second

// Runner starts the processes of a landscape, all with the same
// environment, through a supervisor.Spawner: they die with the landscape
// (Pdeathsig), and Close kills those still running. A Runner made with
// WithRestarts keeps its processes running (see Proc).
type Runner struct {
	spawner  *supervisor.Spawner
	env      []string
	restarts *restarts
	backoff  func(int) time.Duration
}

// restarts is what a restarting Runner needs besides its Spawner.
type restarts struct {
	store  *Store
	events func(ProcessEvent)
}

// RunnerOption configures a Runner.
type RunnerOption func(*Runner)

// WithRestarts makes the Runner restart each process it starts whenever it
// exits without Stop, with the same command (ports, certificates, data),
// after supervisor.DefaultBackoff. Each restart updates the process's
// record in store (found by name and PID, wherever the state keeps it),
// with its new PID, the count of restarts and how it last exited. events,
// when set, is told of every exit and restart (say, to log them).
func WithRestarts(store *Store, events func(ProcessEvent)) RunnerOption {
	return func(r *Runner) { r.restarts = &restarts{store: store, events: events} }
}

// WithBackoff replaces supervisor.DefaultBackoff for the restarts; for
// tests.
func WithBackoff(fn func(n int) time.Duration) RunnerOption {
	return func(r *Runner) { r.backoff = fn }
}

// NewRunner returns a Runner whose processes get env as their environment.
// Without WithRestarts, its processes run once.
func NewRunner(env []string, opts ...RunnerOption) *Runner {
	r := &Runner{spawner: supervisor.NewSpawner(), env: env}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Close stops the Runner; processes it started and that still run are
// killed by the kernel.
func (r *Runner) Close() { r.spawner.Close() }

// ProcessEvent is an exit or a restart of a process of a restarting
// Runner.
type ProcessEvent struct {
	supervisor.Event
	// Record is the process's record after the event.
	Record Process
}

// Proc is a process a Runner started, with its record for state.json.
// A Runner made WithRestarts starts it again whenever it exits without
// Stop; the Proc stays the same, its record in the Store follows.
type Proc struct {
	// Record identifies the process as first started. A restarted
	// process has a new PID: Current returns its record.
	Record Process

	sup *supervisor.Supervised
	// restarting: the Runner starts the process again when it exits.
	restarting bool
	mu         sync.Mutex
	cur        Process
}

// maxStartRestarts is how often a process of a restarting Runner may be
// started again while a start waits for it to become ready. kube-apiserver
// exits when a post-start hook does not finish in time (say, creating the
// system priority classes while etcd answers slowly on a loaded machine)
// and comes up when started again, as it does under a kubelet; a process
// that exits more often than this is broken.
const maxStartRestarts = 2

// Start starts binary with args, its output appended to logPath, and
// returns it with its record named name.
func (r *Runner) Start(name, binary string, args []string, logPath string) (*Proc, error) {
	return r.StartWithEnv(name, binary, args, nil, logPath)
}

// StartWithEnv is Start with extra variables (KEY=value) added to the
// Runner's environment, e.g. Go runtime settings for one process.
func (r *Runner) StartWithEnv(name, binary string, args, extraEnv []string, logPath string) (*Proc, error) {
	env := r.env // as it is: nil (inherit) and empty differ
	if len(extraEnv) > 0 {
		env = slices.Concat(r.env, extraEnv)
	}
	p := &Proc{}
	cmd := supervisor.SupervisedCommand{
		Name:    name,
		LogPath: logPath,
		NewCmd: func() *exec.Cmd {
			cmd := exec.Command(binary, args...)
			cmd.Env = env
			return cmd
		},
		Backoff: supervisor.NoRestart,
	}
	if r.restarts != nil {
		cmd.Backoff = r.backoff // nil: the default
		cmd.OnEvent = func(e supervisor.Event) { r.restarted(p, e) }
		p.restarting = true
	}
	sup, err := r.spawner.Supervise(cmd)
	if err != nil {
		return nil, err
	}
	p.sup = sup
	p.Record = record(name, binary, logPath, sup.Process())
	p.mu.Lock()
	p.cur = p.Record
	p.mu.Unlock()
	return p, nil
}

// record returns the record of a process a Runner started.
func record(name, binary, logPath string, sp *supervisor.Process) Process {
	rec := Process{Name: name, Binary: binary, PID: sp.PID, Log: logPath}
	// The start time identifies the process for a later run; reading it
	// right after the fork cannot race with a PID reuse because the
	// process is not reaped before Wait.
	rec.StartTime, _ = supervisor.StartTime(sp.PID)
	return rec
}

// restarted updates p's record, in p and in the Store, after an exit or a
// restart, and passes the event on.
func (r *Runner) restarted(p *Proc, e supervisor.Event) {
	p.mu.Lock()
	old := p.cur
	rec := old
	switch e.Kind {
	case supervisor.EventExited:
		rec.LastExit = e.Process.DescribeExit()
		at := e.Process.ExitedAt()
		rec.LastExitAt = &at
	case supervisor.EventRestartFailed:
		rec.LastExit = "restart failed: " + e.Err.Error()
	case supervisor.EventRestarted:
		next := record(old.Name, old.Binary, old.Log, e.Process)
		next.Restarts, next.LastExit, next.LastExitAt = e.Restarts, old.LastExit, old.LastExitAt
		rec = next
	}
	p.cur = rec
	p.mu.Unlock()
	if r.restarts.store != nil {
		// The record is found by name and PID, so that processes
		// recorded anywhere in the state (etcd, a cluster's, a step's)
		// are all kept up to date; one not (yet) recorded stays so.
		_ = r.restarts.store.Update(func(s *State) error {
			for _, stored := range s.RecordedProcesses() {
				if stored.Name == old.Name && stored.PID == old.PID {
					*stored = rec
				}
			}
			return nil
		})
	}
	if r.restarts.events != nil {
		r.restarts.events(ProcessEvent{Event: e, Record: rec})
	}
}

// Current returns the record of the process running now (or of the last
// one, while a restart is pending).
func (p *Proc) Current() Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// Restarts counts how often the process was started again.
func (p *Proc) Restarts() int { return p.sup.Restarts() }

// Exited reports whether the process exited since Start: it exited
// without Stop at least once (it may have been restarted since), or it
// was stopped and is gone. A wait for a process to become ready fails on
// it: a process that exits while it starts is broken, not unlucky.
func (p *Proc) Exited() bool {
	return p.sup.LastExit() != nil || p.sup.Process().Exited()
}

// startFailed reports whether a wait for p to become ready should give up
// because of p's exits: p exited and is not restarted, or it exited again
// after maxStartRestarts restarts. One or two exits of a restarted process
// are waited out, within the start's timeout.
func (p *Proc) startFailed() bool {
	if !p.restarting {
		return p.Exited()
	}
	return p.sup.Process().Exited() && (p.Restarts() >= maxStartRestarts || p.Stopping())
}

// ExitError describes the last exit without Stop (or the exit after Stop),
// with the last lines of the log; nil when there was none.
func (p *Proc) ExitError() error {
	if last := p.sup.LastExit(); last != nil {
		return last.ExitError()
	}
	return p.sup.Process().ExitError()
}

// Stop ends the restarts and stops the process (SIGTERM to its group, up
// to grace, then SIGKILL); it returns once the process has exited.
func (p *Proc) Stop(grace time.Duration) { p.sup.Stop(grace) }

// Stopping reports whether Stop was called.
func (p *Proc) Stopping() bool { return p.sup.Stopping() }

// Done is closed once the process has exited for good: it was stopped, or
// it exited and the Runner does not restart.
func (p *Proc) Done() <-chan struct{} { return p.sup.Done() }

// PID is the process id of the process running now (or of the last one).
func (p *Proc) PID() int { return p.sup.Process().PID }

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
