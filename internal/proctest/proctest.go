// Package proctest helps tests check that a process is quiet again after an
// attack: that its goroutines return to a baseline and that neither it nor
// its child processes keep using CPU. It reads Linux's /proc; elsewhere the
// checks skip the test.
package proctest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// clockTicks is the unit of the CPU times in /proc/<pid>/stat (USER_HZ,
// 100 on every architecture Linux runs Go on).
const clockTicks = 100

// Scope says whose CPU time counts.
type Scope int

const (
	// Process counts this process only: for tests whose process has
	// children that work on their own, such as API servers.
	Process Scope = iota
	// ProcessTree counts this process and its children, live or waited
	// for: for work the process hands to child processes.
	ProcessTree
)

// CPU returns the CPU time (user and system) used so far by scope.
func CPU(scope Scope) (time.Duration, error) {
	if runtime.GOOS != "linux" {
		return 0, fmt.Errorf("proctest reads /proc, which %s lacks", runtime.GOOS)
	}
	who := []int{syscall.RUSAGE_SELF}
	if scope == ProcessTree {
		who = append(who, syscall.RUSAGE_CHILDREN)
	}
	var total time.Duration
	for _, w := range who {
		var ru syscall.Rusage
		if err := syscall.Getrusage(w, &ru); err != nil {
			return 0, fmt.Errorf("getrusage: %w", err)
		}
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if scope == ProcessTree {
		live, err := liveChildrenCPU(os.Getpid())
		if err != nil {
			return 0, err
		}
		total += live
	}
	return total, nil
}

// liveChildrenCPU sums the CPU time of the processes whose parent is pid.
func liveChildrenCPU(pid int) (time.Duration, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// The command name, in parentheses, may hold spaces: the fields
		// that follow start after its last ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			return 0, fmt.Errorf("/proc/%d/stat: %q", child, s)
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid != pid {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(utime+stime) * time.Second / clockTicks
	}
	return total, nil
}

// Mark is a moment and the CPU time its scope used until then.
type Mark struct {
	At    time.Time
	CPU   time.Duration
	Scope Scope
}

// Now returns a Mark for the present; it skips the test where the CPU time
// cannot be read.
func Now(t testing.TB, scope Scope) Mark {
	t.Helper()
	cpu, err := CPU(scope)
	if err != nil {
		t.Skip(err)
	}
	return Mark{At: time.Now(), CPU: cpu, Scope: scope}
}

// CPUInWindow waits until window has passed since m (a measurement window,
// not a wait for something to happen) and returns the CPU time m's scope
// used since m.
func CPUInWindow(t testing.TB, m Mark, window time.Duration) time.Duration {
	t.Helper()
	time.Sleep(time.Until(m.At.Add(window)))
	cpu, err := CPU(m.Scope)
	if err != nil {
		t.Fatal(err)
	}
	return cpu - m.CPU
}

// WaitGoroutines waits until the process runs at most baseline goroutines
// and fails the test when it does not within timeout.
func WaitGoroutines(t testing.TB, baseline int, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) { return runtime.NumGoroutine() <= baseline, nil })
	if err != nil {
		t.Errorf("%d goroutines %s after the failure, want at most the %d of before", runtime.NumGoroutine(), timeout, baseline)
	}
}

// Goroutines returns the stacks of the goroutines whose stack mentions
// frame, for example "text/template.(*state).walk".
func Goroutines(frame string) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, frame) {
			out = append(out, g)
		}
	}
	return out
}

// WaitNoGoroutines waits until no goroutine's stack mentions frame and
// fails the test, showing them, when some still do after timeout.
func WaitNoGoroutines(t testing.TB, frame string, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) { return len(Goroutines(frame)) == 0, nil })
	if err != nil {
		gs := Goroutines(frame)
		t.Errorf("%d goroutines still run %s after %s:\n%s", len(gs), frame, timeout, strings.Join(gs, "\n\n"))
	}
}
