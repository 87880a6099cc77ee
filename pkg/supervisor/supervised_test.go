//go:build unix

package supervisor

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// supervise keeps script running with a backoff of wait per restart and
// collects its events; it is stopped when the test ends.
func (f *fixture) supervise(name, script string, wait time.Duration) (*Supervised, *eventLog) {
	f.t.Helper()
	events := &eventLog{}
	s, err := f.s.Supervise(SupervisedCommand{
		Name:    name,
		LogPath: f.log(name),
		NewCmd:  func() *exec.Cmd { return exec.Command("/bin/sh", "-c", script) },
		Backoff: func(int) time.Duration { return wait },
		OnEvent: events.add,
	})
	if err != nil {
		f.t.Fatalf("supervise %s: %v", name, err)
	}
	f.t.Cleanup(func() {
		// Bounded, so that a Stop that hangs fails the test instead of
		// hanging it.
		stopped := make(chan struct{})
		go func() { s.Stop(0); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(waitTimeout):
			f.t.Errorf("%s did not stop within %s", name, waitTimeout)
		}
	})
	return s, events
}

// eventLog records the events of a Supervised.
type eventLog struct {
	mu     sync.Mutex
	events []Event
}

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) kinds() []EventKind {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []EventKind
	for _, e := range l.events {
		out = append(out, e.Kind)
	}
	return out
}

func TestSupervisedRestartsAKilledProcess(t *testing.T) {
	f := newFixture(t)
	s, events := f.supervise("server", `echo serving; exec sleep 300`, 10*time.Millisecond)
	first := s.Process()
	for i := 1; i <= 2; i++ {
		killed := s.Process()
		if err := syscall.Kill(killed.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the killed process to be started again", func() bool {
			p := s.Process()
			return p != killed && !p.Exited()
		})
		if got := s.Restarts(); got != i {
			t.Errorf("Restarts() = %d after %d kills", got, i)
		}
		if last := s.LastExit(); last != killed || last.DescribeExit() != "ended (signal: killed)" {
			t.Errorf("LastExit() = %v (%s); want the killed process, ended by SIGKILL", last, last.DescribeExit())
		}
	}
	if s.Process() == first {
		t.Error("the process was not replaced")
	}
	want := []EventKind{EventExited, EventRestarted, EventExited, EventRestarted}
	// The event of a restart follows the new process.
	waitFor(t, "four events", func() bool { return len(events.kinds()) == len(want) })
	if got := events.kinds(); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	log, err := os.ReadFile(f.log("server"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"restarting server (restart 1)", "restarting server (restart 2)", "the previous process ended (signal: killed)"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	select {
	case <-s.Done():
		t.Error("Done is closed while the process is kept running")
	default:
	}
}

func TestSupervisedStopEndsTheRestarts(t *testing.T) {
	f := newFixture(t)
	// A process that exits at once, restarted only after a long wait: Stop
	// during the wait must not wait for it, nor restart it afterwards.
	s, events := f.supervise("crasher", `exit 3`, time.Hour)
	waitFor(t, "the crash to be seen", func() bool { return s.LastExit() != nil })
	stopped := make(chan struct{})
	go func() { s.Stop(shortGrace); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(waitTimeout):
		t.Fatalf("Stop did not return within %s during a pending restart", waitTimeout)
	}
	select {
	case <-s.Done():
	default:
		t.Error("Done is open after Stop returned")
	}
	if got := s.Restarts(); got != 0 {
		t.Errorf("Restarts() = %d after Stop; want 0", got)
	}
	if got := events.kinds(); !slices.Equal(got, []EventKind{EventExited}) {
		t.Errorf("events %v, want one Exited", got)
	}
	if e := events.events[0]; e.Wait != time.Hour || e.Process.ExitCode() != 3 {
		t.Errorf("Exited event %+v; want the backoff and the process that exited with 3", e)
	}
}

func TestSupervisedWithoutRestarts(t *testing.T) {
	f := newFixture(t)
	s, err := f.s.Supervise(SupervisedCommand{
		Name: "once", LogPath: f.log("once"), Backoff: NoRestart,
		NewCmd: func() *exec.Cmd { return exec.Command("/bin/sh", "-c", "exit 2") },
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(waitTimeout):
		t.Fatalf("a process that runs once and exited is not Done within %s", waitTimeout)
	}
	if s.Restarts() != 0 || s.LastExit() == nil || s.LastExit().ExitCode() != 2 {
		t.Errorf("Restarts() = %d, LastExit() = %v; want 0 and the exit with 2", s.Restarts(), s.LastExit())
	}
}

func TestDefaultBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 5: 16 * time.Second, 6: 30 * time.Second, 100: 30 * time.Second} {
		if got := DefaultBackoff(n); got != want {
			t.Errorf("DefaultBackoff(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestSupervisedBackoffGrowsWhileCrashing(t *testing.T) {
	for name, tc := range map[string]struct {
		stableAfter time.Duration
		want        []int
	}{
		// Each start exits at once: the count of failures in a row grows.
		"crash loop": {stableAfter: time.Hour, want: []int{1, 2, 3}},
		// Each start counts as having stayed up: the count starts over.
		"stable": {stableAfter: time.Nanosecond, want: []int{1, 1, 1}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			var mu sync.Mutex
			var got []int
			s, err := f.s.Supervise(SupervisedCommand{
				Name: "crasher", LogPath: f.log("crasher"), StableAfter: tc.stableAfter,
				NewCmd: func() *exec.Cmd { return exec.Command("/bin/sh", "-c", "exit 1") },
				Backoff: func(n int) time.Duration {
					mu.Lock()
					defer mu.Unlock()
					got = append(got, n)
					return time.Millisecond
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "three restarts", func() bool { return s.Restarts() >= 3 })
			s.Stop(shortGrace)
			mu.Lock()
			defer mu.Unlock()
			if len(got) < len(tc.want) || !slices.Equal(got[:len(tc.want)], tc.want) {
				t.Errorf("backoff asked for %v, want %v first", got, tc.want)
			}
		})
	}
}
