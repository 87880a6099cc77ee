//go:build unix

package startslot

import (
	"errors"
	"syscall"

	"github.com/marketplane/marketplane/pkg/filelock"
)

// tryLock takes the lock on path without waiting: nil release and no
// error when another process (or start) holds it.
func tryLock(path string) (release func(), err error) {
	f, err := filelock.Lock(path, syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return func() { _ = f.Close() }, nil
}
