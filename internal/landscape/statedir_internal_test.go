package landscape

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/marketplane/marketplane/internal/landscape/controlplane"
)

// holdLock records supervisor in a state directory and holds its lock, as
// the supervisor's open lock file does.
func holdLock(t *testing.T, supervisor *controlplane.Process) (controlplane.Layout, func()) {
	t.Helper()
	layout := controlplane.Layout{Dir: t.TempDir()}
	if err := controlplane.NewStore(layout.Dir, &controlplane.State{Supervisor: supervisor}).Update(func(*controlplane.State) error { return nil }); err != nil {
		t.Fatal(err)
	}
	held, err := lockFile(layout, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Close() })
	return layout, func() { _ = held.Close() }
}

// TestAcquireWaitsForAnExitedSupervisorsLock: the lock of a supervisor that
// is no longer alive (killed; its last threads still closing its files)
// is waited for, and taken when it goes.
func TestAcquireWaitsForAnExitedSupervisorsLock(t *testing.T) {
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	layout, release := holdLock(t, &controlplane.Process{Name: "supervisor", Binary: exited.Path, PID: exited.Process.Pid})
	// The lock goes a little later, as the dying supervisor's files close.
	time.AfterFunc(200*time.Millisecond, release)
	l := &Landscape{Layout: layout}
	if err := l.acquire(); err != nil {
		t.Fatalf("acquire while an exited supervisor's lock was going: %v", err)
	}
	l.release()
}

// TestAcquireRefusesARunningSupervisor: while the recorded supervisor is
// alive and holds the lock, acquire fails at once with ErrRunning and its
// PID.
func TestAcquireRefusesARunningSupervisor(t *testing.T) {
	self, err := controlplane.Self()
	if err != nil {
		t.Fatal(err)
	}
	layout, _ := holdLock(t, self)
	begin := time.Now()
	err = (&Landscape{Layout: layout}).acquire()
	if !errors.Is(err, ErrRunning) || !strings.Contains(err.Error(), fmt.Sprintf("(pid %d)", self.PID)) {
		t.Fatalf("acquire = %v, want ErrRunning naming pid %d", err, self.PID)
	}
	if waited := time.Since(begin); waited > lockReleaseWait/2 {
		t.Errorf("acquire waited %s for the lock of a running supervisor, want an answer at once", waited)
	}
}
