package landscape

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/marketplane/marketplane/internal/landscape/controlplane"
)

// ProcessTree returns the processes below pid (its children, theirs, and
// so on) as records, read from /proc. Below a landscape's supervisor these
// are its recorded processes and the providers the operator replicas run,
// which state.json does not record. Without /proc it returns none.
func ProcessTree(pid int) []*controlplane.Process {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]*controlplane.Process{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		rec, ppid, ok := readProc(p)
		if ok {
			children[ppid] = append(children[ppid], rec)
		}
	}
	var out []*controlplane.Process
	queue := children[pid]
	for len(queue) > 0 {
		rec := queue[0]
		queue = append(queue[1:], children[rec.PID]...)
		out = append(out, rec)
	}
	return out
}

// readProc reads the record and the parent of process pid from
// /proc/<pid>/stat and cmdline.
func readProc(pid int) (*controlplane.Process, int, bool) {
	dir := "/proc/" + strconv.Itoa(pid)
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return nil, 0, false
	}
	// The fields after the command's name in parentheses: fields[0] is
	// field 3 (state), fields[1] the parent, fields[19] the start time.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 20 {
		return nil, 0, false
	}
	ppid, err1 := strconv.Atoi(fields[1])
	start, err2 := strconv.ParseUint(fields[19], 10, 64)
	cmdline, err3 := os.ReadFile(dir + "/cmdline")
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, 0, false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return &controlplane.Process{Name: filepath.Base(string(argv0)), Binary: string(argv0), PID: pid, StartTime: start}, ppid, true
}
