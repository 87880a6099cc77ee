//go:build unix

package testenv

import "github.com/marketplane/marketplane/pkg/filelock"

// lockFile takes an exclusive lock on path (created if missing), waiting
// for another process that holds it, and returns its release. The lock
// goes with the process, so a test binary that dies releases it.
func lockFile(path string) (func(), error) {
	f, err := filelock.Lock(path, 0)
	if err != nil {
		return nil, err
	}
	return func() { _ = f.Close() }, nil
}
