package main

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
)

// usage is the memory of a process tree.
type usage struct {
	rss, pss int64
	// procs are the tree's processes: command name by PID.
	procs map[int]string
	// byPID is each process's RSS, pssByPID its PSS.
	byPID, pssByPID map[int]int64
}

// pssOfCommand sums the PSS of the processes named name.
func (u usage) pssOfCommand(name string) int64 {
	var sum int64
	for pid, n := range u.procs {
		if n == name {
			sum += u.pssByPID[pid]
		}
	}
	return sum
}

// measure sums VmRSS and PSS over root and all its descendants.
func measure(root int) (usage, error) {
	entries, err := os.ReadDir(procPath)
	if err != nil {
		return usage{}, err
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	u := usage{procs: map[int]string{}, byPID: map[int]int64{}, pssByPID: map[int]int64{}}
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		queue = append(queue, children[pid]...)
		fields, err := statusFields(pid)
		if err != nil {
			continue // ended meanwhile
		}
		rss := kib(fields["VmRSS"])
		u.rss += rss
		pss := pssOf(pid)
		u.pss += pss
		u.procs[pid] = strings.TrimSpace(fields["Name"])
		u.byPID[pid], u.pssByPID[pid] = rss, pss
	}
	if len(u.procs) == 0 {
		return u, fmt.Errorf("the landscape's supervisor (pid %d) does not run", root)
	}
	return u, nil
}

func parentOf(pid int) (int, bool) {
	fields, err := statusFields(pid)
	if err != nil {
		return 0, false
	}
	ppid, err := strconv.Atoi(strings.TrimSpace(fields["PPid"]))
	return ppid, err == nil
}

// statusFields reads /proc/<pid>/status as key → value.
func statusFields(pid int) (map[string]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("%s/%d/%s", procPath, pid, statusFile))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out, nil
}

// pssOf is the PSS of a process from smaps_rollup (0 when unreadable).
func pssOf(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("%s/%d/%s", procPath, pid, rollupFile))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			return kib(v)
		}
	}
	return 0
}

// kib parses "123 kB" into bytes (0 when it cannot).
func kib(s string) int64 {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0
	}
	return n << 10
}

// perCommand summarises the added processes by command: count and
// average RSS.
func perCommand(u usage, added map[int]string) []string {
	type agg struct {
		n   int
		rss int64
	}
	by := map[string]*agg{}
	for pid, name := range added {
		a := by[name]
		if a == nil {
			a = &agg{}
			by[name] = a
		}
		a.n++
		a.rss += u.byPID[pid]
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(by)) {
		a := by[name]
		out = append(out, fmt.Sprintf("%-24s ×%d, RSS %s each", name, a.n, mibs(a.rss/int64(a.n))))
	}
	return out
}

// loadAverage is the one-, five- and fifteen-minute load average ("?" when
// unreadable).
func loadAverage() string {
	data, err := os.ReadFile(procPath + "/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
