// Package procstat reads the processes of the machine and their CPU times
// from /proc, for the benchmarks that count the CPU of the processes they
// start, and the machine's load average.
package procstat

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux this runs on.
const clockTicks = 100

// Process is one process as /proc/<pid>/stat describes it.
type Process struct {
	PID, PPID int
	// Comm is the command name.
	Comm string
	// CPU is its user and system time in seconds; ChildrenCPU that of its
	// children that ended and were waited for.
	CPU, ChildrenCPU float64
}

// All returns the processes /proc lists; one that ends while it reads is
// left out.
func All() []Process {
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	out := make([]Process, 0, len(paths))
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if p, ok := parse(string(b)); ok {
			out = append(out, p)
		}
	}
	return out
}

// parse reads a /proc/<pid>/stat line: "pid (comm) state ppid …", where
// comm may hold spaces and parentheses; after it come state(3) ppid(4) …
// utime(14) stime(15) cutime(16) cstime(17).
func parse(s string) (Process, bool) {
	lp, rp := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if lp < 0 || rp < lp {
		return Process{}, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:lp]))
	f := strings.Fields(s[rp+1:])
	if err != nil || len(f) < 15 {
		return Process{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	ticks := make([]float64, 4)
	for i, t := range f[11:15] {
		ticks[i], _ = strconv.ParseFloat(t, 64)
	}
	return Process{PID: pid, PPID: ppid, Comm: s[lp+1 : rp],
		CPU: (ticks[0] + ticks[1]) / clockTicks, ChildrenCPU: (ticks[2] + ticks[3]) / clockTicks}, true
}

// ChildrenCPU returns the CPU seconds of the children of the process ppid,
// by command name.
func ChildrenCPU(ppid int) map[string]float64 {
	out := map[string]float64{}
	for _, p := range All() {
		if p.PPID == ppid {
			out[p.Comm] += p.CPU
		}
	}
	return out
}

// TreeCPU returns the CPU seconds of the process root and its
// descendants, with those of their children that ended.
func TreeCPU(root int) float64 {
	children := map[int][]Process{}
	var sum float64
	for _, p := range All() {
		if p.PID == root {
			sum += p.CPU + p.ChildrenCPU
		}
		children[p.PPID] = append(children[p.PPID], p)
	}
	var walk func(pid int)
	walk = func(pid int) {
		for _, c := range children[pid] {
			sum += c.CPU + c.ChildrenCPU
			walk(c.PID)
		}
	}
	walk(root)
	return sum
}

// LoadAverage returns the 1-minute load average of /proc/loadavg, NaN
// when it cannot be read.
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	return ParseLoadAverage(string(b))
}

// ParseLoadAverage returns the first field of a /proc/loadavg line, NaN
// when it is not a number.
func ParseLoadAverage(s string) float64 {
	f := strings.Fields(s)
	if len(f) == 0 {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return math.NaN()
	}
	return v
}
