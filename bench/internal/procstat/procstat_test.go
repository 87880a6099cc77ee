package procstat

import (
	"math"
	"os"
	"testing"
)

// TestParse reads a stat line whose command name holds spaces and a
// parenthesis, as a process may name itself.
func TestParse(t *testing.T) {
	line := "4242 (kube (api) server) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 50 30 20 20 0 12 0 1000 1 1 0\n"
	p, ok := parse(line)
	if !ok {
		t.Fatal("the line was not parsed")
	}
	want := Process{PID: 4242, PPID: 17, Comm: "kube (api) server", CPU: 3, ChildrenCPU: 0.5}
	if p != want {
		t.Errorf("parse = %+v, want %+v", p, want)
	}
	if _, ok := parse("4242 kube S 17"); ok {
		t.Error("a line without the command's parentheses was parsed")
	}
}

// TestAllHoldsThisProcess finds the test's own process with its parent.
func TestAllHoldsThisProcess(t *testing.T) {
	for _, p := range All() {
		if p.PID == os.Getpid() {
			if p.PPID != os.Getppid() {
				t.Errorf("parent %d, want %d", p.PPID, os.Getppid())
			}
			if TreeCPU(os.Getppid()) < p.CPU {
				t.Errorf("the parent's tree has less CPU than this process")
			}
			return
		}
	}
	t.Fatal("this process is not among All()")
}

func TestParseLoadAverage(t *testing.T) {
	if got := ParseLoadAverage("2.31 1.29 0.48 3/412 9876\n"); got != 2.31 {
		t.Errorf("ParseLoadAverage = %v, want 2.31", got)
	}
	if got := ParseLoadAverage(""); !math.IsNaN(got) {
		t.Errorf("ParseLoadAverage of nothing = %v, want NaN", got)
	}
}
