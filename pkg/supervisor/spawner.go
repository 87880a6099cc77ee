package supervisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("process spawner is closed")

// crashBuffer is how many unexpected exits Crashes holds for a reader;
// further ones are dropped rather than block the process's reaper.
const crashBuffer = 64

// Spawner starts processes from one goroutine locked to its OS thread (see
// the package documentation). Close kills every process still running.
type Spawner struct {
	clock   clock.Clock
	mu      sync.RWMutex
	closed  bool
	reqs    chan startRequest
	crashes chan *Process
	// live holds the processes that have not exited yet, for Close.
	liveMu sync.Mutex
	live   map[*Process]struct{}
}

type startRequest struct {
	cmd   *exec.Cmd
	reply chan error
}

// Option configures a Spawner.
type Option func(*Spawner)

// WithClock replaces the real clock, which dates processes (Started) and
// measures the grace period of Stop; for tests.
func WithClock(c clock.Clock) Option { return func(s *Spawner) { s.clock = c } }

// NewSpawner returns a Spawner and starts its thread.
func NewSpawner(opts ...Option) *Spawner {
	s := &Spawner{
		clock:   clock.RealClock{},
		reqs:    make(chan startRequest),
		crashes: make(chan *Process, crashBuffer),
		live:    map[*Process]struct{}{},
	}
	for _, o := range opts {
		o(s)
	}
	go s.loop()
	return s
}

func (s *Spawner) loop() {
	// Never unlocked: when the loop ends, the thread ends with it, and the
	// kernel kills whatever it started that is still running.
	runtime.LockOSThread()
	for req := range s.reqs {
		req.reply <- req.cmd.Start()
	}
}

// Close stops the Spawner and kills the process groups of the processes it
// started that still run, without waiting for them to exit.
//
// Ending the thread alone would not do: when the Go runtime happens to run
// the locked goroutine on the program's main thread, it parks that thread
// instead of ending it, and Pdeathsig only fires when the program exits.
func (s *Spawner) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.reqs)
	}
	s.mu.Unlock()
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	for p := range s.live {
		_ = signalGroup(p.PID, syscall.SIGKILL)
	}
}

// Crashes receives the processes that exited without Stop having been
// called. It holds a few of them for a reader; nobody has to read it.
func (s *Spawner) Crashes() <-chan *Process { return s.crashes }

// Command is a process to start.
type Command struct {
	// Name names the process in errors.
	Name string
	// Cmd is the command to start. Start sets its Stdout and Stderr to the
	// log and adds a process group (and on Linux Pdeathsig) to its
	// SysProcAttr; everything else (Env, Dir, ...) is the caller's.
	Cmd *exec.Cmd
	// LogPath receives the process's stdout and stderr, appended after a
	// header line; its directory is created when missing.
	LogPath string
	// Header follows the time in the header line; "starting <Name>" when
	// empty.
	Header string
	// Notes are written as further header lines, for circumstances of the
	// start that a reader of the log should know.
	Notes []string
	// Prepare, when set, may change Cmd right before it starts, with the
	// log and SysProcAttr already in place; an error fails the start.
	Prepare func(*exec.Cmd) error
}

// Start starts c and returns the running process. A failure after the log
// was opened is also written to the log.
func (s *Spawner) Start(c Command) (*Process, error) {
	if err := os.MkdirAll(filepath.Dir(c.LogPath), 0o700); err != nil {
		return nil, fmt.Errorf("create log directory of %s: %w", c.Name, err)
	}
	f, err := os.OpenFile(c.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", c.Name, err)
	}
	defer f.Close() // the child has its own descriptor
	header := c.Header
	if header == "" {
		header = "starting " + c.Name
	}
	fmt.Fprintf(f, "--- %s %s\n", s.clock.Now().UTC().Format(time.RFC3339), header)
	for _, n := range c.Notes {
		fmt.Fprintf(f, "--- %s\n", n)
	}
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat log of %s: %w", c.Name, err)
	}
	cmd := c.Cmd
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = withGroup(cmd.SysProcAttr)
	binary := cmd.Path // before Prepare, which may wrap it
	if err := s.start(c); err != nil {
		fmt.Fprintf(f, "--- start failed: %v\n", err)
		return nil, fmt.Errorf("start %s (%s): %w", c.Name, binary, err)
	}
	p := &Process{
		Name:      c.Name,
		PID:       cmd.Process.Pid,
		Started:   s.clock.Now(),
		LogPath:   c.LogPath,
		logOffset: info.Size(),
		clock:     s.clock,
		done:      make(chan struct{}),
	}
	s.liveMu.Lock()
	s.live[p] = struct{}{}
	s.liveMu.Unlock()
	go func() {
		_ = cmd.Wait() // the outcome is in ProcessState
		// Forgotten right after the reaping: a PID reused in between is
		// as unlikely as in Process.Stop.
		s.liveMu.Lock()
		delete(s.live, p)
		s.liveMu.Unlock()
		p.state, p.exitedAt = cmd.ProcessState, s.clock.Now()
		close(p.done)
		if !p.stopping.Load() {
			select {
			case s.crashes <- p:
			default:
			}
		}
	}()
	return p, nil
}

// start runs c.Prepare and starts c.Cmd on the Spawner's thread.
func (s *Spawner) start(c Command) error {
	if c.Prepare != nil {
		if err := c.Prepare(c.Cmd); err != nil {
			return err
		}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	reply := make(chan error, 1)
	s.reqs <- startRequest{cmd: c.Cmd, reply: reply}
	return <-reply
}
