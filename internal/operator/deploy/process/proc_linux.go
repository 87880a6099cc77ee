package process

import "syscall"

// sysProcAttr puts the process into its own process group, so that a stop
// reaches what it started too, and has the kernel kill it when the thread
// that started it ends (see spawner).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup signals the process group led by pid.
func signalGroup(pid int, sig syscall.Signal) error {
	return syscall.Kill(-pid, sig)
}
