//go:build !linux

package controlplane

import (
	"errors"
	"syscall"
)

// errNoProc: without /proc, processes cannot be identified beyond their PID.
var errNoProc = errors.New("process details need /proc (Linux)")

// sysProcAttr gives a process its own process group. Without Pdeathsig,
// processes outlive a landscape that is killed; the next up or down stops
// them.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func signalGroup(pid int, sig syscall.Signal) error { return syscall.Kill(-pid, sig) }

func startTime(int) (uint64, error) { return 0, nil }

// sameProcess can only check that the PID exists.
func sameProcess(rec *Process) bool { return syscall.Kill(rec.PID, 0) == nil }

// ResidentMemory is not available without /proc.
func ResidentMemory(int) (int64, error) { return 0, errNoProc }
