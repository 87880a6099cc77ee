package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// errClosed is returned when the Deployer was closed.
var errClosed = errors.New("process deployer is closed")

// spawner starts every process of a Deployer from one goroutine locked to
// its OS thread. Pdeathsig is tied to the thread that forked the child, not
// to the process, and the Go runtime may end threads (for example the
// thread of a goroutine that exits while locked); forking from a thread
// that lives as long as the Deployer makes Pdeathsig mean "the operator
// died".
type spawner struct {
	mu     sync.RWMutex
	closed bool
	reqs   chan spawnRequest
}

type spawnRequest struct {
	cmd   *exec.Cmd
	reply chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnRequest)}
	go s.loop()
	return s
}

func (s *spawner) loop() {
	// Never unlocked: when the loop ends, the thread ends with it, and the
	// kernel kills whatever it started that is still running.
	runtime.LockOSThread()
	for req := range s.reqs {
		req.reply <- req.cmd.Start()
	}
}

// start starts cmd on the spawner's thread.
func (s *spawner) start(cmd *exec.Cmd) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errClosed
	}
	reply := make(chan error, 1)
	s.reqs <- spawnRequest{cmd: cmd, reply: reply}
	return <-reply
}

func (s *spawner) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.reqs)
	}
}

// command is one process to start.
type command struct {
	binary string
	args   []string
	env    []string
	dir    string
	// logPath receives the process's stdout and stderr, appended after a
	// header line.
	logPath string
	header  string
	// namespace goes into the service-account namespace file of the
	// process's mount namespace (see nsfile.go).
	namespace string
	// tokenFile and caFile are linked as the service account's token and
	// ca.crt next to it, for providers that use the in-cluster
	// configuration (see nsfile.go).
	tokenFile, caFile string
}

// process is a started process.
type process struct {
	pid     int
	started time.Time
	// logPath and logOffset locate this process's output in its log.
	logPath   string
	logOffset int64
	// done is closed once the process has exited and was reaped; state is
	// set before.
	done  chan struct{}
	state *os.ProcessState
}

// startProcess starts c, output appended to its log, in a private mount
// namespace with the service-account namespace file when the system allows
// it.
func (d *Deployer) startProcess(ctx context.Context, c command) (*process, error) {
	ns, nsErr := d.namespaceFile(ctx)
	f, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	defer f.Close() // the child has its own descriptor
	fmt.Fprintf(f, "--- %s %s\n", d.clock.Now().UTC().Format(time.RFC3339), c.header)
	if nsErr != nil {
		fmt.Fprintf(f, "--- started without the service-account namespace file: %v\n", nsErr)
	}
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat log: %w", err)
	}
	cmd := exec.Command(c.binary, c.args...)
	cmd.Env, cmd.Dir = c.env, c.dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	if ns != nil {
		cmd.Env = d.inClusterEnv(cmd.Env)
		if err := wrapWithNamespaceFile(cmd, nsHelperSpec{Namespace: c.namespace, Token: c.tokenFile, CA: c.caFile}, ns); err != nil {
			fmt.Fprintf(f, "--- start failed: %v\n", err)
			return nil, fmt.Errorf("start %s: %w", c.binary, err)
		}
	}
	if err := d.spawner.start(cmd); err != nil {
		fmt.Fprintf(f, "--- start failed: %v\n", err)
		return nil, fmt.Errorf("start %s: %w", c.binary, err)
	}
	p := &process{
		pid:       cmd.Process.Pid,
		started:   d.clock.Now(),
		logPath:   c.logPath,
		logOffset: info.Size(),
		done:      make(chan struct{}),
	}
	go func() {
		_ = cmd.Wait() // the outcome is in ProcessState
		p.state = cmd.ProcessState
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitCode is the exit code, or -1 when a signal ended the process. Only
// valid after done.
func (p *process) exitCode() int { return p.state.ExitCode() }

// describeExit says how the process ended. Only valid after done.
func (p *process) describeExit() string {
	if code := p.state.ExitCode(); code >= 0 {
		return fmt.Sprintf("exited with code %d", code)
	}
	return "ended (" + p.state.String() + ")"
}

// terminate sends SIGTERM to the process group, SIGKILL after timeout, and
// returns once the process has exited.
func (p *process) terminate(clk clock.Clock, timeout time.Duration) {
	if p.exited() {
		return
	}
	_ = signalGroup(p.pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-clk.After(timeout):
	}
	// The process could have exited just now and its pid be reused; the
	// window is too small to matter for a local landscape.
	if !p.exited() {
		_ = signalGroup(p.pid, syscall.SIGKILL)
	}
	<-p.done
}

// Limits of the log excerpt in a status message.
const (
	tailLines = 5
	tailBytes = 400
)

// outputTail returns the last lines the process wrote, joined by " | " and
// cut to tailBytes, for a status message.
func (p *process) outputTail() string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return ""
	}
	start := max(p.logOffset, info.Size()-4*tailBytes)
	buf := make([]byte, max(info.Size()-start, 0))
	if _, err := f.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	var lines []string
	for l := range strings.SplitSeq(string(buf), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	lines = lines[max(len(lines)-tailLines, 0):]
	s := strings.ToValidUTF8(strings.Join(lines, " | "), "")
	if len(s) > tailBytes {
		s = strings.ToValidUTF8("…"+s[len(s)-tailBytes:], "")
	}
	return s
}
