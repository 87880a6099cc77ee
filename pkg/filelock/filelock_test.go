//go:build unix

package filelock_test

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/marketplane/marketplane/pkg/filelock"
)

// TestLock: a held lock refuses a second non-waiting Lock with
// EWOULDBLOCK, and closing the holder's file releases it.
func TestLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	held, err := filelock.Lock(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if f, err := filelock.Lock(path, syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		if f != nil {
			_ = f.Close()
		}
		t.Fatalf("second Lock of a held lock: %v; want EWOULDBLOCK", err)
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := filelock.Lock(path, syscall.LOCK_NB)
	if err != nil {
		t.Fatalf("Lock after the holder closed its file: %v", err)
	}
	_ = again.Close()
}
