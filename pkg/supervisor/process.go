package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// Process is a process a Spawner started.
type Process struct {
	// Name is the Command's name.
	Name string
	// PID is the process id; the process leads the process group of the
	// same id.
	PID int
	// Started is when the process started, by the Spawner's clock.
	Started time.Time
	// LogPath is the log the process writes to.
	LogPath string

	// logOffset is where this process's output starts in its log.
	logOffset int64
	clock     clock.Clock
	// done is closed once the process has exited and was reaped; state is
	// set before.
	done     chan struct{}
	state    *os.ProcessState
	exitedAt time.Time
	stop     sync.Once
	stopping atomic.Bool
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitedAt is when the process was seen to exit, by the Spawner's clock;
// zero while it runs.
func (p *Process) ExitedAt() time.Time {
	if !p.Exited() {
		return time.Time{}
	}
	return p.exitedAt
}

// ExitCode is the exit code, or -1 when a signal ended the process or it
// has not exited yet.
func (p *Process) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.state.ExitCode()
}

// DescribeExit says how the process ended: "exited with code 3" or
// "ended (signal: killed)"; empty while it runs.
func (p *Process) DescribeExit() string {
	if !p.Exited() {
		return ""
	}
	if code := p.state.ExitCode(); code >= 0 {
		return fmt.Sprintf("exited with code %d", code)
	}
	return "ended (" + p.state.String() + ")"
}

// ExitError describes how the process ended, with the last lines of its
// log; nil while it runs.
func (p *Process) ExitError() error {
	if !p.Exited() {
		return nil
	}
	return fmt.Errorf("%s exited (%s); last lines of %s:\n%s", p.Name, p.state, p.LogPath, LogTail(p.LogPath, 15))
}

// Stopping reports whether Stop was called: an exit after it is expected.
func (p *Process) Stopping() bool { return p.stopping.Load() }

// Stop sends SIGTERM to the process group, waits up to grace for the
// process to exit and then sends SIGKILL to the group. It returns once the
// process has exited; concurrent and later calls wait for the same.
func (p *Process) Stop(grace time.Duration) {
	p.stopping.Store(true)
	p.stop.Do(func() {
		if p.Exited() {
			return
		}
		_ = signalGroup(p.PID, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-p.clock.After(grace):
			// The process could have exited just now and its group id
			// been reused; the window is too small to matter for local
			// processes.
			if !p.Exited() {
				_ = signalGroup(p.PID, syscall.SIGKILL)
			}
		}
	})
	<-p.done
}

// OutputTail returns the last lines (at most maxLines, none empty) that
// this process wrote to its log, without earlier processes' output in the
// same log, joined by " | " and cut to about maxBytes from the end: a
// one-line excerpt for a status message. Empty when there is none or the
// log cannot be read.
func (p *Process) OutputTail(maxLines, maxBytes int) string {
	f, err := os.Open(p.LogPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return ""
	}
	// Lines longer than this are cut below anyway.
	start := max(p.logOffset, info.Size()-4*int64(maxBytes))
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
	lines = lines[max(len(lines)-maxLines, 0):]
	s := strings.ToValidUTF8(strings.Join(lines, " | "), "")
	if len(s) > maxBytes {
		s = strings.ToValidUTF8("…"+s[len(s)-maxBytes:], "")
	}
	return s
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

// pollInterval is how often StopPID checks whether a process is gone: it
// is not our child, so there is no exit to wait for.
const pollInterval = 50 * time.Millisecond

// killWait is how long StopPID waits for a process to go after SIGKILL.
const killWait = 5 * time.Second

// StopPID stops a process that this program did not start (one recorded by
// an earlier run): SIGTERM to its process group and to pid itself (in case
// it leads no group), up to grace for alive to turn false, then SIGKILL
// likewise. alive identifies the process (see Running) so that a PID taken
// over by another process counts as gone. It returns an error when the
// process survives SIGKILL for a few seconds.
func StopPID(pid int, alive func() bool, grace time.Duration) error {
	if !alive() {
		return nil
	}
	_ = signalGroup(pid, syscall.SIGTERM)
	_ = signalPID(pid, syscall.SIGTERM)
	if waitGone(alive, grace) {
		return nil
	}
	_ = signalGroup(pid, syscall.SIGKILL)
	_ = signalPID(pid, syscall.SIGKILL)
	if waitGone(alive, killWait) {
		return nil
	}
	return fmt.Errorf("pid %d did not stop", pid)
}

func waitGone(alive func() bool, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if !alive() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollInterval)
	}
}

// signalPID signals the process pid only.
func signalPID(pid int, sig syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Signal(sig)
}
