//go:build unix

// Package filelock takes exclusive advisory locks on files (flock(2)). The
// kernel drops a lock when the last descriptor of its open file closes,
// so a process that dies releases its locks.
package filelock

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Lock opens path, creating it, and takes an exclusive lock on it,
// waiting while another open file holds it; with flags
// syscall.LOCK_NB it does not wait, and a held lock is an error that
// errors.Is reports as syscall.EWOULDBLOCK. Closing the returned file
// releases the lock.
func Lock(path string, flags int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|flags)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}
