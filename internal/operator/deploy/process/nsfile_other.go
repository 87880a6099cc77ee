//go:build !linux

package process

import (
	"context"
	"errors"
	"os/exec"
	"runtime"
	"syscall"
)

// detectNamespaceFile reports that the namespace file needs Linux: other
// systems have no mount namespaces.
func detectNamespaceFile(context.Context) (*syscall.SysProcAttr, error) {
	return nil, errors.New("mount namespaces are Linux only, not on " + runtime.GOOS)
}

// wrapWithNamespaceFile is never called off Linux, as detectNamespaceFile
// fails there.
func wrapWithNamespaceFile(*exec.Cmd, nsHelperSpec, *syscall.SysProcAttr) error {
	return errors.New("mount namespaces are Linux only, not on " + runtime.GOOS)
}

// runNamespaceHelper refuses: the deployer never starts the helper off
// Linux.
func runNamespaceHelper(string) int {
	println("marketplane process deployer: the namespace helper is Linux only")
	return nsHelperFailed
}
