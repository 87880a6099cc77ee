//go:build !linux

package process

import (
	"os"
	"syscall"
)

// sysProcAttr returns nil: only Linux has Pdeathsig, and process groups
// are not portable. On other systems a crashing operator leaves its
// provider processes behind.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup signals the process pid only.
func signalGroup(pid int, sig syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Signal(sig)
}
