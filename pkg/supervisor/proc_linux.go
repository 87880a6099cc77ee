package supervisor

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// withGroup adds a process group (so that a stop reaches what the process
// started too) and Pdeathsig (so that the kernel kills it when the thread
// that forked it ends) to attr, a new one when nil, and returns it.
func withGroup(attr *syscall.SysProcAttr) *syscall.SysProcAttr {
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Setpgid, attr.Pgid = true, 0
	attr.Pdeathsig = syscall.SIGKILL
	return attr
}

// signalGroup signals the process group led by pid.
func signalGroup(pid int, sig syscall.Signal) error {
	return syscall.Kill(-pid, sig)
}

// procStat returns the state letter and the start time (field 22, clock
// ticks since boot) of /proc/<pid>/stat.
func procStat(pid int) (state byte, start uint64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may contain
	// spaces and parentheses; the fields after the last ')' are plain.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	fields := strings.Fields(string(data[i+1:]))
	// fields[0] is field 3 (state), so field 22 is fields[19].
	if len(fields) < 20 || len(fields[0]) != 1 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	start, err = strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: start time: %w", pid, err)
	}
	return fields[0][0], start, nil
}

// StartTime returns when process pid started, in clock ticks since boot:
// with the PID it identifies a process across a PID's reuse.
func StartTime(pid int) (uint64, error) {
	_, start, err := procStat(pid)
	return start, err
}

// Running reports whether pid is a live (not zombie) process that started
// at startTime (unless 0) and runs binary (its argv[0]).
func Running(pid int, startTime uint64, binary string) bool {
	if pid <= 0 {
		return false
	}
	state, start, err := procStat(pid)
	if err != nil || state == 'Z' || state == 'X' {
		return false
	}
	if startTime != 0 && start != startTime {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return string(argv0) == binary
}

// ResidentMemory returns the resident set size (VmRSS) of a process in
// bytes.
func ResidentMemory(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status VmRSS: %w", pid, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
}
