//go:build !unix

package supervisor

import (
	"errors"
	"os"
	"syscall"
)

// errNoProc: without /proc, processes cannot be identified beyond their PID.
var errNoProc = errors.New("process details need /proc (Linux)")

// withGroup returns attr, a new one when nil: process groups and Pdeathsig
// are Unix features, so a stop reaches the process only, and processes
// outlive a supervising program that is killed.
func withGroup(attr *syscall.SysProcAttr) *syscall.SysProcAttr {
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	return attr
}

// signalGroup signals the process pid only.
func signalGroup(pid int, sig syscall.Signal) error { return signalPID(pid, sig) }

// StartTime is 0 without /proc: processes are identified by PID only.
func StartTime(int) (uint64, error) { return 0, nil }

// Running reports whether a process with the PID exists.
func Running(pid int, _ uint64, _ string) bool {
	if pid <= 0 {
		return false
	}
	_, err := os.FindProcess(pid)
	return err == nil
}

// ResidentMemory is not available without /proc.
func ResidentMemory(int) (int64, error) { return 0, errNoProc }
