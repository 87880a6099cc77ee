package supervisor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary the supervising program of
// TestPdeathsig: it starts a process, prints its PID and start time, and
// exits without stopping it.
const helperEnv = "SUPERVISOR_TEST_PDEATHSIG_HELPER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		s := NewSpawner()
		p, err := s.Start(Command{Name: "orphan", Cmd: exec.Command("sleep", "300"), LogPath: filepath.Join(dir, "orphan.log")})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		start, _ := StartTime(p.PID)
		fmt.Println(p.PID, start)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestPdeathsig checks that a process dies with the program that started
// it, which did not stop it.
func TestPdeathsig(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	var pid int
	var start uint64
	if _, err := fmt.Sscan(string(out), &pid, &start); err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	t.Cleanup(func() {
		if Running(pid, start, "sleep") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	waitFor(t, "the process of an exited program to be killed by the kernel", func() bool { return !Running(pid, start, "sleep") })
}

// TestCloseKillsProcesses checks that Close kills what still runs. The
// process runs without Pdeathsig, so that only Close can end it: the thread
// that Close ends may be the main one, which the runtime parks instead.
func TestCloseKillsProcesses(t *testing.T) {
	f := newFixture(t)
	p, err := f.s.Start(Command{
		Name: "orphan", Cmd: exec.Command("sleep", "300"), LogPath: f.log("orphan"),
		Prepare: func(cmd *exec.Cmd) error { cmd.SysProcAttr.Pdeathsig = 0; return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(0) })
	f.s.Close()
	waitFor(t, "Close to kill the process", p.Exited)
	if got, want := p.DescribeExit(), "ended (signal: killed)"; got != want {
		t.Errorf("DescribeExit() = %q, want %q", got, want)
	}
}

func TestRunning(t *testing.T) {
	self := os.Getpid()
	start, err := StartTime(self)
	if err != nil || start == 0 {
		t.Fatalf("StartTime(self) = %d, %v; want a time", start, err)
	}
	for _, tc := range []struct {
		name   string
		pid    int
		start  uint64
		binary string
		want   bool
	}{
		{"self", self, start, os.Args[0], true},
		{"any start time", self, 0, os.Args[0], true},
		{"other start time", self, start + 1, os.Args[0], false},
		{"other binary", self, start, "/bin/other", false},
		{"no pid", 0, 0, os.Args[0], false},
	} {
		if got := Running(tc.pid, tc.start, tc.binary); got != tc.want {
			t.Errorf("%s: Running = %v, want %v", tc.name, got, tc.want)
		}
	}
	if n, err := ResidentMemory(self); err != nil || n <= 0 {
		t.Errorf("ResidentMemory(self) = %d, %v; want a size", n, err)
	}
}

// onEndingThread runs f on a goroutine locked to an OS thread other than
// the main one and returns once that thread has ended: the goroutine never
// unlocks, so the runtime ends the thread with it (the main thread would be
// parked instead, so a goroutine that lands there tries again).
func onEndingThread(t *testing.T, f func()) {
	t.Helper()
	for {
		tids := make(chan int, 1)
		go func() {
			runtime.LockOSThread()
			tid := syscall.Gettid()
			if tid != os.Getpid() {
				f()
			}
			tids <- tid
		}()
		tid := <-tids
		if tid == os.Getpid() {
			continue
		}
		task := fmt.Sprintf("/proc/self/task/%d", tid)
		waitFor(t, "the locked thread "+task+" to end with its goroutine", func() bool {
			_, err := os.Stat(task)
			return os.IsNotExist(err)
		})
		return
	}
}

// TestStartCmdOutlivesCallerThread: a process that StartCmd started keeps
// running when the thread of its caller ends, while one that a plain Start
// with the same attributes forked there is killed by the kernel
// (Pdeathsig) at that moment, which nobody asked for.
func TestStartCmdOutlivesCallerThread(t *testing.T) {
	kept, plain := exec.Command("sleep", "300"), exec.Command("sleep", "300")
	onEndingThread(t, func() {
		if err := StartCmd(kept); err != nil {
			t.Errorf("StartCmd: %v", err)
		}
		plain.SysProcAttr = withGroup(nil)
		if err := plain.Start(); err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	if kept.Process == nil || plain.Process == nil {
		t.FailNow()
	}
	done := func(cmd *exec.Cmd) <-chan struct{} {
		ch := make(chan struct{})
		go func() { _ = cmd.Wait(); close(ch) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-ch })
		return ch
	}
	keptDone, plainDone := done(kept), done(plain)
	// Both got their signal, if any, when the thread ended; the plain one
	// being reaped shows the kernel sent it.
	select {
	case <-plainDone:
	case <-time.After(waitTimeout):
		t.Fatalf("the process a plain Start forked from the ended thread still runs after %s", waitTimeout)
	}
	if got := plain.ProcessState.String(); got != "signal: killed" {
		t.Errorf("plain Start: process ended with %q, want signal: killed", got)
	}
	select {
	case <-keptDone:
		t.Fatalf("the process StartCmd started ended with %s when its caller's thread ended", kept.ProcessState)
	default:
	}
	if state, _, err := procStat(kept.Process.Pid); err != nil || state == 'Z' {
		t.Errorf("the process StartCmd started: state %c, %v; want it running", state, err)
	}
}
