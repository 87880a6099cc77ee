package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultStopTimeout is how long a stopped process gets between SIGTERM and
// SIGKILL.
const DefaultStopTimeout = 10 * time.Second

// errRunnerClosed is returned when a process is started after Close.
var errRunnerClosed = errors.New("process runner is closed")

// Runner starts processes. All of them are forked from one goroutine locked
// to its OS thread: Pdeathsig is tied to the thread that forked a child, and
// the Go runtime may end other threads, so this makes Pdeathsig mean "the
// landscape died". Close ends the thread, and with it (through Pdeathsig)
// any process still running.
type Runner struct {
	mu     sync.RWMutex
	closed bool
	reqs   chan startRequest
	env    []string
	// crashes receives processes that exited without Stop.
	crashes chan *Proc
}

type startRequest struct {
	cmd   *exec.Cmd
	reply chan error
}

// NewRunner returns a Runner whose processes get env as their environment.
func NewRunner(env []string) *Runner {
	r := &Runner{reqs: make(chan startRequest), env: env, crashes: make(chan *Proc, 64)}
	go r.loop()
	return r
}

func (r *Runner) loop() {
	// Never unlocked: when the loop ends, so does the thread.
	runtime.LockOSThread()
	for req := range r.reqs {
		req.reply <- req.cmd.Start()
	}
}

// Close stops the Runner; processes it started and that still run are
// killed by the kernel.
func (r *Runner) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		close(r.reqs)
	}
}

// Proc is a process a Runner started.
type Proc struct {
	// Record identifies the process in state.json.
	Record Process

	done     chan struct{}
	state    *os.ProcessState
	stop     sync.Once
	stopping atomic.Bool
}

// Start starts binary with args, its output appended to logPath, and
// returns it with its record named name.
func (r *Runner) Start(name, binary string, args []string, logPath string) (*Proc, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", name, err)
	}
	defer f.Close() // the child has its own descriptor
	fmt.Fprintf(f, "--- %s starting %s\n", time.Now().UTC().Format(time.RFC3339), name)
	cmd := exec.Command(binary, args...)
	cmd.Env = r.env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	r.mu.RLock()
	if r.closed {
		r.mu.RUnlock()
		return nil, errRunnerClosed
	}
	reply := make(chan error, 1)
	r.reqs <- startRequest{cmd: cmd, reply: reply}
	err = <-reply
	r.mu.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, binary, err)
	}
	p := &Proc{
		Record: Process{Name: name, Binary: binary, PID: cmd.Process.Pid, Log: logPath},
		done:   make(chan struct{}),
	}
	// The start time identifies the process for a later run; reading it
	// right after the fork cannot race with a PID reuse because the
	// process is not reaped before Wait.
	p.Record.StartTime, _ = startTime(p.Record.PID)
	go func() {
		_ = cmd.Wait() // the outcome is in ProcessState
		p.state = cmd.ProcessState
		close(p.done)
		if !p.stopping.Load() {
			select {
			case r.crashes <- p:
			default:
			}
		}
	}()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitError describes how the process ended, with the end of its log.
func (p *Proc) ExitError() error {
	if !p.Exited() {
		return nil
	}
	return fmt.Errorf("%s exited (%s); last lines of %s:\n%s", p.Record.Name, p.state, p.Record.Log, LogTail(p.Record.Log, 15))
}

// Stop sends SIGTERM to the process group, waits up to timeout and then
// sends SIGKILL. It returns once the process is gone.
func (p *Proc) Stop(timeout time.Duration) {
	p.stopping.Store(true)
	p.stop.Do(func() {
		if p.Exited() {
			return
		}
		_ = signalGroup(p.Record.PID, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(timeout):
			_ = signalGroup(p.Record.PID, syscall.SIGKILL)
			<-p.done
		}
	})
	<-p.done
}

// LogTail returns the last n lines of a log file, for error messages.
func LogTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Alive reports whether the recorded process still runs: a process with
// its PID exists, started at the recorded time and runs the recorded
// binary. A PID taken over by another process is not alive.
func Alive(rec *Process) bool {
	if rec == nil || rec.PID <= 0 {
		return false
	}
	return sameProcess(rec)
}

// StopRecorded stops a process recorded by an earlier run, if it is still
// alive: SIGTERM, up to timeout for it to go, then SIGKILL. It returns an
// error when the process survives SIGKILL for a few seconds.
func StopRecorded(rec *Process, timeout time.Duration) error {
	if !Alive(rec) {
		return nil
	}
	// The process may have a group of its own (started by a Runner); the
	// PID is signalled too in case it does not.
	_ = signalGroup(rec.PID, syscall.SIGTERM)
	_ = syscall.Kill(rec.PID, syscall.SIGTERM)
	if waitGone(rec, timeout) {
		return nil
	}
	_ = signalGroup(rec.PID, syscall.SIGKILL)
	_ = syscall.Kill(rec.PID, syscall.SIGKILL)
	if waitGone(rec, 5*time.Second) {
		return nil
	}
	return fmt.Errorf("%s (pid %d) did not stop", rec.Name, rec.PID)
}

func waitGone(rec *Process, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if !Alive(rec) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Self returns the record of the calling process, for State.Supervisor.
// Its Binary is os.Args[0], which is what its command line shows (a
// relative path when started as ./bin/marketplane).
func Self() (*Process, error) {
	st, err := startTime(os.Getpid())
	if err != nil {
		return nil, err
	}
	return &Process{Name: "supervisor", Binary: os.Args[0], PID: os.Getpid(), StartTime: st}, nil
}

// Stopping reports whether Stop was called: an exit after it is expected.
func (p *Proc) Stopping() bool { return p.stopping.Load() }
