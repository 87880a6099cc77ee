package testenv_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/marketplane/marketplane/pkg/testenv"
)

// startOnEndingThread starts a cluster from a goroutine locked to an OS
// thread (not the main one, which the runtime would park) that ends right
// after: a kube-controller-manager forked there with a plain Start would
// get Pdeathsig then, as when a parallel test's Spawner ends a thread the
// cluster was started from.
func startOnEndingThread(t *testing.T, opts ...testenv.Option) *testenv.Cluster {
	t.Helper()
	testenv.SkipIfShort(t)
	type result struct {
		c   *testenv.Cluster
		err error
		tid int
	}
	for {
		done := make(chan result, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			r := result{tid: syscall.Gettid()}
			if r.tid != os.Getpid() {
				r.c, r.err = testenv.New(opts...)
			}
			done <- r
		}()
		r := <-done
		if r.tid == os.Getpid() {
			continue
		}
		if r.err != nil {
			t.Fatal(r.err)
		}
		t.Cleanup(func() {
			if err := r.c.Stop(); err != nil {
				t.Error(err)
			}
		})
		task := fmt.Sprintf("/proc/self/task/%d", r.tid)
		err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := os.Stat(task)
			return os.IsNotExist(err), nil
		})
		if err != nil {
			t.Fatalf("the locked thread %s did not end with its goroutine: %v", task, err)
		}
		return r.c
	}
}
