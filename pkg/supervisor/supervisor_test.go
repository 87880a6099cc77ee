//go:build unix

package supervisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Generous limits: the machine running the tests may be loaded. The grace
// periods of the stop tests are far below them, so that a test can tell a
// SIGTERM that was honoured from a SIGKILL after the grace period.
const (
	waitTimeout = 30 * time.Second
	longGrace   = 30 * time.Second
	shortGrace  = 300 * time.Millisecond
)

// fixture starts shell scripts in a temporary directory.
type fixture struct {
	t   *testing.T
	dir string
	s   *Spawner
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	s := NewSpawner()
	t.Cleanup(s.Close)
	return &fixture{t: t, dir: t.TempDir(), s: s}
}

// start runs script with /bin/sh, logging to <name>.log, and stops it when
// the test ends.
func (f *fixture) start(name, script string) *Process {
	f.t.Helper()
	p, err := f.s.Start(Command{Name: name, Cmd: exec.Command("/bin/sh", "-c", script), LogPath: f.log(name)})
	if err != nil {
		f.t.Fatalf("start %s: %v", name, err)
	}
	f.t.Cleanup(func() { p.Stop(0) })
	return p
}

func (f *fixture) log(name string) string { return filepath.Join(f.dir, "logs", name+".log") }

// waitForLog waits until the log of name contains want, e.g. a line that
// says the script has set its signal traps.
func (f *fixture) waitForLog(name, want string) {
	f.t.Helper()
	waitFor(f.t, "log of "+name+" to contain "+strconv.Quote(want), func() bool {
		data, _ := os.ReadFile(f.log(name))
		return strings.Contains(string(data), want)
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", waitTimeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readPID reads a PID a script wrote to a file.
func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, "the PID in "+path, func() bool {
		data, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil
	})
	return pid
}

func TestStopHonouredSIGTERM(t *testing.T) {
	f := newFixture(t)
	p := f.start("polite", `trap 'echo got TERM; exit 0' TERM; echo ready; while :; do sleep 0.05; done`)
	f.waitForLog("polite", "ready")

	begin := time.Now()
	p.Stop(longGrace)
	if took := time.Since(begin); took >= longGrace {
		t.Errorf("Stop took %s, the whole grace period: SIGTERM was not delivered or not waited for", took)
	}
	if !p.Exited() || !p.Stopping() {
		t.Errorf("after Stop: Exited() = %v, Stopping() = %v, want both true", p.Exited(), p.Stopping())
	}
	if got := p.ExitCode(); got != 0 {
		t.Errorf("ExitCode() = %d, want 0 from the script's TERM trap", got)
	}
	if got := p.OutputTail(5, 400); !strings.Contains(got, "got TERM") {
		t.Errorf("OutputTail() = %q, want the TERM trap's output", got)
	}
	select {
	case c := <-f.s.Crashes():
		t.Errorf("Crashes() delivered %s, which was stopped on purpose", c.Name)
	default:
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	f := newFixture(t)
	// An ignored signal stays ignored in the children (the sleeps), so
	// nothing in the group ends on SIGTERM.
	p := f.start("stubborn", `trap '' TERM; echo ready; while :; do sleep 0.05; done`)
	f.waitForLog("stubborn", "ready")

	begin := time.Now()
	p.Stop(shortGrace)
	took := time.Since(begin)
	if took < shortGrace {
		t.Errorf("Stop took %s, less than the grace period %s of a process that ignores SIGTERM", took, shortGrace)
	}
	if got, want := p.DescribeExit(), "ended (signal: killed)"; got != want {
		t.Errorf("DescribeExit() = %q, want %q", got, want)
	}
	if got := p.ExitCode(); got != -1 {
		t.Errorf("ExitCode() = %d, want -1 for a process ended by a signal", got)
	}
}

func TestStopReachesTheProcessGroup(t *testing.T) {
	for name, script := range map[string]string{
		// The child ends on the SIGTERM to the group.
		"SIGTERM": `sleep 300 & echo $! > child.pid; wait`,
		// The child ignores SIGTERM and ends on the SIGKILL to the group.
		"SIGKILL": `trap '' TERM; sleep 300 & echo $! > child.pid; wait`,
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			cmd := exec.Command("/bin/sh", "-c", script)
			cmd.Dir = f.dir
			p, err := f.s.Start(Command{Name: "parent", Cmd: cmd, LogPath: f.log("parent")})
			if err != nil {
				t.Fatal(err)
			}
			child := readPID(t, filepath.Join(f.dir, "child.pid"))
			start, err := StartTime(child)
			if err != nil {
				t.Fatal(err)
			}
			// A failed test must not leave the child behind.
			t.Cleanup(func() {
				if Running(child, start, "sleep") {
					_ = syscall.Kill(child, syscall.SIGKILL)
				}
			})
			// The shell writes the pid right after it forks, possibly
			// before the child has exec'd sleep (and Running checks the
			// command name), so wait for it to be sleep before Stop.
			waitFor(t, fmt.Sprintf("the child (pid %d) to run sleep before Stop", child), func() bool { return Running(child, start, "sleep") })
			p.Stop(shortGrace)
			// The child is not ours to reap: it is gone once it is a zombie.
			waitFor(t, "the child of the stopped process to end", func() bool { return !Running(child, start, "sleep") })
		})
	}
}

func TestCrashIsReported(t *testing.T) {
	f := newFixture(t)
	// An earlier process's output in the same log is not this one's.
	if err := os.MkdirAll(filepath.Dir(f.log("crasher")), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.log("crasher"), []byte("output of an earlier run\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := f.start("crasher", `echo starting up; echo boom >&2; exit 3`)

	select {
	case c := <-f.s.Crashes():
		if c != p {
			t.Fatalf("Crashes() delivered %s (pid %d), want crasher (pid %d)", c.Name, c.PID, p.PID)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("Crashes() delivered nothing within %s after the process exited with code 3", waitTimeout)
	}
	if p.Stopping() {
		t.Error("Stopping() = true for a process nobody stopped")
	}
	if got := p.ExitCode(); got != 3 {
		t.Errorf("ExitCode() = %d, want 3", got)
	}
	if got, want := p.DescribeExit(), "exited with code 3"; got != want {
		t.Errorf("DescribeExit() = %q, want %q", got, want)
	}
	if got, want := p.OutputTail(5, 400), "starting up | boom"; got != want {
		t.Errorf("OutputTail() = %q, want %q (this process's output only)", got, want)
	}
	err := p.ExitError()
	for _, want := range []string{"crasher exited (exit status 3)", "--- ", "starting crasher", "boom"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ExitError() = %v, want it to contain %q", err, want)
		}
	}
	if got := p.OutputTail(1, 3); got != "…oom" {
		t.Errorf("OutputTail(1, 3) = %q, want the last line cut to 3 bytes after an ellipsis", got)
	}
}

func TestRunningProcessReportsNoExit(t *testing.T) {
	f := newFixture(t)
	p := f.start("sleeper", `exec sleep 300`)
	if p.Exited() || p.ExitCode() != -1 || p.DescribeExit() != "" || p.ExitError() != nil {
		t.Errorf("running process: Exited() = %v, ExitCode() = %d, DescribeExit() = %q, ExitError() = %v; want false, -1, empty, nil",
			p.Exited(), p.ExitCode(), p.DescribeExit(), p.ExitError())
	}
}

func TestStartFailures(t *testing.T) {
	f := newFixture(t)
	_, err := f.s.Start(Command{Name: "missing", Cmd: exec.Command(filepath.Join(f.dir, "no-such-binary")), LogPath: f.log("missing")})
	if err == nil || !strings.Contains(err.Error(), "start missing") {
		t.Errorf("Start of a missing binary: error %v, want one naming the process", err)
	}
	if tail := LogTail(f.log("missing"), 5); !strings.Contains(tail, "--- start failed") {
		t.Errorf("log of a failed start: %q, want the failure recorded", tail)
	}

	errPrepare := errors.New("cannot prepare")
	_, err = f.s.Start(Command{
		Name: "unprepared", Cmd: exec.Command("/bin/true"), LogPath: f.log("unprepared"),
		Prepare: func(*exec.Cmd) error { return errPrepare },
	})
	if !errors.Is(err, errPrepare) {
		t.Errorf("Start with a failing Prepare: error %v, want %v", err, errPrepare)
	}

	f.s.Close()
	_, err = f.s.Start(Command{Name: "late", Cmd: exec.Command("/bin/true"), LogPath: f.log("late")})
	if !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: error %v, want %v", err, ErrClosed)
	}
}

func TestLogHeaderAndNotes(t *testing.T) {
	f := newFixture(t)
	p, err := f.s.Start(Command{
		Name: "noted", Cmd: exec.Command("/bin/sh", "-c", "echo hello"), LogPath: f.log("noted"),
		Header: "run generation 2", Notes: []string{"started without something"},
		Prepare: func(cmd *exec.Cmd) error {
			cmd.Args = append(cmd.Args[:2], "echo prepared")
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	lines := strings.Split(strings.TrimSpace(LogTail(f.log("noted"), 10)), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "--- ") || !strings.HasSuffix(lines[0], " run generation 2") ||
		lines[1] != "--- started without something" || lines[2] != "prepared" {
		t.Errorf("log lines %q, want the header with the time, the note and the output of the prepared command", lines)
	}
}

func TestStopPID(t *testing.T) {
	f := newFixture(t)
	p := f.start("recorded", `trap '' TERM; echo ready; while :; do sleep 0.05; done`)
	f.waitForLog("recorded", "ready")
	alive := func() bool { return !p.Exited() }
	begin := time.Now()
	if err := StopPID(p.PID, alive, shortGrace); err != nil {
		t.Fatalf("StopPID: %v", err)
	}
	if took := time.Since(begin); took < shortGrace {
		t.Errorf("StopPID took %s, less than the grace period %s of a process that ignores SIGTERM", took, shortGrace)
	}
	if got, want := p.DescribeExit(), "ended (signal: killed)"; got != want {
		t.Errorf("DescribeExit() = %q, want %q", got, want)
	}
	if err := StopPID(p.PID, func() bool { return false }, shortGrace); err != nil {
		t.Errorf("StopPID of a process that is gone: %v, want nil", err)
	}
}
