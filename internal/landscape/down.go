package landscape

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/marketplane/marketplane/internal/landscape/controlplane"
)

// DownTimeout bounds how long Down waits for a running supervisor to stop
// the landscape before it kills the supervisor.
const DownTimeout = 3 * time.Minute

// Down stops the landscape of a state directory and removes the directory.
// A running supervisor is asked to stop (SIGTERM) and waited for; processes
// that are still alive afterwards (e.g. of a supervisor that was killed)
// are stopped by their record. Only a directory with the landscape's
// marker (or an empty one) is removed.
func Down(ctx context.Context, stateDir string, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	dir, err := filepath.Abs(stateDir)
	if err != nil {
		return fmt.Errorf("state directory %s: %w", stateDir, err)
	}
	layout := controlplane.Layout{Dir: dir}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(out, "No landscape in %s.\n", dir)
		return nil
	}
	ours, err := isStateDir(layout)
	if err != nil {
		return err
	}
	if !ours {
		return fmt.Errorf("%s is not a landscape state directory (it has no %s); not removing it", dir, controlplane.MarkerFile)
	}
	lock, _, err := stopAll(ctx, layout, out)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	fmt.Fprintf(out, "Removed the landscape in %s.\n", dir)
	return nil
}

// Stop stops the landscape of a state directory and keeps the directory
// (etcd's data, the PKI, the kubeconfigs, state.json) for the next start.
// It stops as Down does, then records the stop as on purpose
// (State.StoppedAt), so that status says "stopped" rather than "crashed".
// A landscape that does not run is left as it is, and Stop says so.
func Stop(ctx context.Context, stateDir string, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	dir, err := filepath.Abs(stateDir)
	if err != nil {
		return fmt.Errorf("state directory %s: %w", stateDir, err)
	}
	before, err := controlplane.ReadState(dir)
	if errors.Is(err, controlplane.ErrNoState) {
		fmt.Fprintf(out, "No landscape in %s; 'marketplane landscape up' starts one.\n", dir)
		return nil
	}
	if err != nil {
		return err
	}
	lock, ran, err := stopAll(ctx, controlplane.Layout{Dir: dir}, out)
	if err != nil {
		return err
	}
	defer lock.Close()
	after, err := controlplane.ReadState(dir)
	if err != nil {
		return err
	}
	if after.StoppedAt == nil {
		// The supervisor was gone (crashed) or had to be killed: its
		// processes are stopped now, and the stop is this one.
		markStopped(after)
		if err := controlplane.NewStore(dir, after).Update(func(*controlplane.State) error { return nil }); err != nil {
			return err
		}
	}
	if !ran {
		fmt.Fprintf(out, "The landscape in %s is not running (%s); its data is kept.\n", dir, describe(before))
	} else {
		fmt.Fprintf(out, "Stopped the landscape in %s; its data is kept.\n", dir)
	}
	fmt.Fprintln(out, "'marketplane landscape start' resumes it, 'marketplane landscape down' removes it.")
	return nil
}

// markStopped records in s that the landscape was stopped on purpose now
// and that none of its processes runs.
func markStopped(s *controlplane.State) {
	now := time.Now()
	s.Phase, s.Supervisor, s.StoppedAt = controlplane.PhaseStopped, nil, &now
	s.Processes, s.Etcd.Process = nil, nil
	if s.KCP != nil {
		s.KCP.Process = nil
	}
	for _, c := range s.Clusters {
		c.APIServer, c.ControllerManager, c.Scheduler, c.Kwok = nil, nil, nil, nil
	}
}

// stopAll stops what runs of the landscape in layout: a running supervisor
// is asked to stop (SIGTERM) and waited for, then recorded processes that
// are still alive are stopped. It returns the state directory's lock,
// held, so that no supervisor starts meanwhile, and whether anything ran.
func stopAll(ctx context.Context, layout controlplane.Layout, out io.Writer) (*os.File, bool, error) {
	ran := false
	state, err := controlplane.ReadState(layout.Dir)
	if err != nil && !errors.Is(err, controlplane.ErrNoState) {
		// An unreadable record: nothing can be stopped by it, but the
		// directory can still go once no supervisor holds the lock.
		fmt.Fprintf(out, "warning: %v\n", err)
	}
	// The supervisor's processes, the providers the operator runs
	// included, read before it stops.
	var tree []*controlplane.Process
	if state != nil && controlplane.Alive(state.Supervisor) {
		if state.Supervisor.PID == os.Getpid() {
			return nil, false, errors.New("the landscape of this state directory runs in this process: stop it first")
		}
		tree = ProcessTree(state.Supervisor.PID)
		fmt.Fprintf(out, "• stopping the landscape (supervisor pid %d)\n", state.Supervisor.PID)
		if err := stopSupervisor(ctx, state.Supervisor); err != nil {
			return nil, false, err
		}
		ran = true
	}
	// The lock shows that no supervisor runs (or starts) any more.
	lock, err := waitLock(ctx, layout)
	if err != nil {
		return nil, false, err
	}
	if state, err = controlplane.ReadState(layout.Dir); err == nil {
		for _, p := range state.RecordedProcesses() {
			if controlplane.Alive(p) {
				fmt.Fprintf(out, "• stopping %s (pid %d)\n", p.Name, p.PID)
				if err := controlplane.StopRecorded(p, DefaultStopTimeout); err != nil {
					lock.Close()
					return nil, false, err
				}
				ran = true
			}
		}
	}
	// The providers die with the operator replicas that run them
	// (Pdeathsig); stop is done once they are gone too.
	for _, p := range tree {
		if err := controlplane.StopRecorded(p, DefaultStopTimeout); err != nil {
			lock.Close()
			return nil, false, err
		}
	}
	return lock, ran, nil
}

// stopSupervisor sends SIGTERM to a supervisor and waits until it is gone;
// after DownTimeout it is killed.
func stopSupervisor(ctx context.Context, p *controlplane.Process) error {
	if err := syscall.Kill(p.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal the supervisor (pid %d): %w", p.PID, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, DownTimeout, true, func(context.Context) (bool, error) {
		return !controlplane.Alive(p), nil
	})
	if err == nil {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGKILL)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return !controlplane.Alive(p), nil
	}); err != nil {
		return fmt.Errorf("waiting for the supervisor (pid %d) to exit: still alive %s after SIGTERM and 10s after SIGKILL: %w", p.PID, DownTimeout, err)
	}
	return nil
}

// waitLock takes the state directory's lock, waiting a little for a
// supervisor that is just exiting.
func waitLock(ctx context.Context, layout controlplane.Layout) (*os.File, error) {
	var f *os.File
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var err error
		f, err = lockFile(layout, syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, fmt.Errorf("a landscape still runs in %s (its lock is held): %w", layout.Dir, err)
	}
	return f, nil
}
