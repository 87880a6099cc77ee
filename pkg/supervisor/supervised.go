package supervisor

import (
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"time"

	"github.com/marketplane/marketplane/pkg/backoff"
)

// Restart policy of a Supervised process.
const (
	// DefaultStableAfter is how long a process must stay up for its
	// backoff to start over: a process that crashes after an hour is
	// restarted after the first wait again, not the longest one.
	DefaultStableAfter = time.Minute
)

// defaultBackoff is the schedule of DefaultBackoff.
var defaultBackoff = backoff.Doubling{Base: time.Second, Max: 30 * time.Second}

// DefaultBackoff is the wait before the n-th restart in a row (n ≥ 1) of
// a process that keeps exiting: 1s, 2s, 4s, … capped at 30s. Short enough
// that a landscape process killed once is back within seconds, long enough
// that one crashing in a loop does not keep the machine busy.
func DefaultBackoff(n int) time.Duration { return defaultBackoff.Wait(n) }

// NoRestart is a Backoff that never restarts: the process runs once, as
// one from Spawner.Start, with the accessors of a Supervised.
func NoRestart(int) time.Duration { return -1 }

// EventKind says what happened to a Supervised process.
type EventKind string

// Kinds of events.
const (
	// EventExited: the process exited without Stop; it is restarted
	// after Event.Wait.
	EventExited EventKind = "Exited"
	// EventRestartFailed: starting it again failed (Event.Err); another
	// try follows after Event.Wait.
	EventRestartFailed EventKind = "RestartFailed"
	// EventRestarted: it runs again (Event.Process is the new one).
	EventRestarted EventKind = "Restarted"
)

// Event is reported to SupervisedCommand.OnEvent.
type Event struct {
	Kind EventKind
	// Name is the SupervisedCommand's name.
	Name string
	// Process is the process that exited (EventExited) or the new one
	// (EventRestarted); nil for EventRestartFailed.
	Process *Process
	// Previous is the process that ran before the new one
	// (EventRestarted).
	Previous *Process
	// Restarts counts the restarts so far, this one included.
	Restarts int
	// Wait is the backoff before the next start (EventExited,
	// EventRestartFailed).
	Wait time.Duration
	// Err is why a restart failed (EventRestartFailed).
	Err error
}

// SupervisedCommand is a process to keep running.
type SupervisedCommand struct {
	// Name, LogPath, Notes and Prepare are those of every start's Command.
	Name    string
	LogPath string
	Notes   []string
	Prepare func(*exec.Cmd) error
	// NewCmd returns the command of each start: an exec.Cmd runs only
	// once, so a restart needs a new one (same binary, arguments and
	// environment for a restart on the same ports and data).
	NewCmd func() *exec.Cmd
	// Backoff is the wait before the n-th restart in a row
	// (DefaultBackoff when nil; NoRestart never restarts).
	Backoff func(n int) time.Duration
	// StableAfter is how long a process must stay up for the count of
	// Backoff to start over (DefaultStableAfter when 0).
	StableAfter time.Duration
	// OnEvent, when set, is told of every exit and restart, from the
	// goroutine that supervises the process; it must not block for long
	// nor call Stop.
	OnEvent func(Event)
}

// Supervised is a process a Spawner keeps running: when it exits without
// Stop having been called, it is started again with a new command from
// SupervisedCommand.NewCmd after a backoff that grows while it keeps
// exiting. The log of every start gets a header line that says which
// restart it is and why.
type Supervised struct {
	spawner *Spawner
	cmd     SupervisedCommand

	mu       sync.Mutex
	cur      *Process
	restarts int
	lastExit *Process
	stopping bool
	grace    time.Duration

	stop chan struct{}
	done chan struct{}
}

// Supervise starts c and keeps it running until Stop. The first start's
// error is returned; later starts that fail are retried with backoff.
func (s *Spawner) Supervise(c SupervisedCommand) (*Supervised, error) {
	if c.NewCmd == nil {
		return nil, fmt.Errorf("supervise %s: no command", c.Name)
	}
	if c.Backoff == nil {
		c.Backoff = DefaultBackoff
	}
	if c.StableAfter <= 0 {
		c.StableAfter = DefaultStableAfter
	}
	p, err := s.Start(c.command("", nil))
	if err != nil {
		return nil, err
	}
	sp := &Supervised{spawner: s, cmd: c, cur: p, stop: make(chan struct{}), done: make(chan struct{})}
	go sp.run(p)
	return sp, nil
}

// command returns the Command of one start.
func (c SupervisedCommand) command(header string, notes []string) Command {
	return Command{Name: c.Name, Cmd: c.NewCmd(), LogPath: c.LogPath, Header: header, Notes: append(notes, c.Notes...), Prepare: c.Prepare}
}

// run waits for each process to exit and starts the next one.
func (s *Supervised) run(p *Process) {
	defer close(s.done)
	first := true
	var event Event // reported with the wait that follows it
	run := func() Run {
		if !first {
			next, r := s.restart(p, &event)
			if next == nil {
				return r
			}
			p = next
		}
		first = false
		<-p.Done()
		if s.isStopping() || p.Stopping() {
			return Run{Stopped: true}
		}
		s.mu.Lock()
		s.lastExit = p
		s.mu.Unlock()
		event = Event{Kind: EventExited, Name: s.cmd.Name, Process: p, Restarts: s.Restarts()}
		return Run{Started: p.Started}
	}
	waiting := func(wait time.Duration) {
		event.Wait = wait
		s.report(event)
	}
	KeepRunning(s.spawner.clock, s.stop, RestartPolicy{Backoff: s.cmd.Backoff, StableAfter: s.cmd.StableAfter}, run, waiting)
}

// restart starts the process again after prev exited and returns the new
// one, or nil and how the attempt ended: a failed start sets event to say
// so.
func (s *Supervised) restart(prev *Process, event *Event) (*Process, Run) {
	next, err := s.spawner.Start(s.cmd.command(
		fmt.Sprintf("restarting %s (restart %d)", s.cmd.Name, s.Restarts()+1),
		[]string{"the previous process " + prev.DescribeExit()}))
	if errors.Is(err, ErrClosed) {
		return nil, Run{Stopped: true}
	}
	if err != nil {
		*event = Event{Kind: EventRestartFailed, Name: s.cmd.Name, Restarts: s.Restarts(), Err: err}
		return nil, Run{}
	}
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		next.Stop(s.grace)
		return nil, Run{Stopped: true}
	}
	s.cur = next
	s.restarts++
	n := s.restarts
	s.mu.Unlock()
	s.report(Event{Kind: EventRestarted, Name: s.cmd.Name, Process: next, Previous: prev, Restarts: n})
	return next, Run{}
}

func (s *Supervised) report(e Event) {
	if s.cmd.OnEvent != nil {
		s.cmd.OnEvent(e)
	}
}

func (s *Supervised) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

// Process is the process started last; it may have exited and be waiting
// for its restart.
func (s *Supervised) Process() *Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Restarts counts how often the process was started again.
func (s *Supervised) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// LastExit is the last process that exited without Stop, or nil.
func (s *Supervised) LastExit() *Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastExit
}

// Done is closed once the process has exited for good: it was stopped,
// it exited under NoRestart, or the Spawner was closed.
func (s *Supervised) Done() <-chan struct{} { return s.done }

// Stopping reports whether Stop was called.
func (s *Supervised) Stopping() bool { return s.isStopping() }

// Stop ends the supervision and stops the process (see Process.Stop); a
// restart that is pending does not happen. It returns once the process has
// exited; concurrent and later calls wait for the same.
func (s *Supervised) Stop(grace time.Duration) {
	s.mu.Lock()
	if !s.stopping {
		s.stopping, s.grace = true, grace
		close(s.stop)
	}
	p := s.cur
	s.mu.Unlock()
	p.Stop(grace)
	<-s.done
}
