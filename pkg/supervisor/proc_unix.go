//go:build unix && !linux

package supervisor

import (
	"errors"
	"syscall"
)

// errNoProc: without /proc, processes cannot be identified beyond their PID.
var errNoProc = errors.New("process details need /proc (Linux)")

// withGroup adds a process group to attr (a new one when nil), so that a
// stop reaches what the process started too, and returns it. Without
// Pdeathsig, processes outlive a supervising program that is killed.
func withGroup(attr *syscall.SysProcAttr) *syscall.SysProcAttr {
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Setpgid, attr.Pgid = true, 0
	return attr
}

// signalGroup signals the process group led by pid.
func signalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }

// StartTime is 0 without /proc: processes are identified by PID only.
func StartTime(int) (uint64, error) { return 0, nil }

// Running can only check that the PID exists.
func Running(pid int, _ uint64, _ string) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}

// ResidentMemory is not available without /proc.
func ResidentMemory(int) (int64, error) { return 0, errNoProc }
