// Package startslot limits how many API servers the processes of one user
// start at the same time on a machine. A start (until /readyz answers) is
// the most CPU an API server takes; a loaded test run that starts thirty at
// once starves them all, and etcd with them, past their start timeouts. A
// start waits for one of Slots slots instead, held as a lock on a file that
// the kernel releases when its process ends.
package startslot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"
)

// EnvSlots names the environment variable that sets how many starts may
// run at once (at least 1); unset, it is Slots' default.
const EnvSlots = "MARKETPLANE_START_SLOTS"

// pollInterval is how often a waiting start tries the slots again: a held
// slot is freed when another start finishes, which nothing signals across
// processes.
const pollInterval = 100 * time.Millisecond

// Slots returns how many starts may run at once: EnvSlots, or twice the
// CPUs of the machine and at least 4 (a local landscape starts three
// clusters at once; a start spends part of its time waiting on etcd).
func Slots() int {
	if n, err := strconv.Atoi(os.Getenv(EnvSlots)); err == nil && n > 0 {
		return n
	}
	return max(4, 2*runtime.NumCPU())
}

// Dir is the directory of the slots' lock files: one per user, shared by
// every process of that user.
func Dir() string {
	return filepath.Join(os.TempDir(), "marketplane-start-slots-"+strconv.Itoa(os.Getuid()))
}

// Acquire waits for a free slot and returns its release, which the caller
// calls once the API server is ready or its start failed (calling it again
// does nothing). It returns an
// error when ctx ends first, or when the lock directory cannot be used.
func Acquire(ctx context.Context) (release func(), err error) {
	dir := Dir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("start slots: %w", err)
	}
	n := Slots()
	// Start at a slot of this process, so that concurrent starts of one
	// moment try different files first.
	first := os.Getpid()
	for {
		for i := range n {
			slot := filepath.Join(dir, "slot-"+strconv.Itoa((first+i)%n))
			release, err := tryLock(slot)
			if err != nil {
				return nil, fmt.Errorf("start slots: %w", err)
			}
			if release != nil {
				return sync.OnceFunc(release), nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for one of %d API server start slots (%s; %s=%d): %w", n, dir, EnvSlots, n, context.Cause(ctx))
		case <-time.After(pollInterval):
		}
	}
}
