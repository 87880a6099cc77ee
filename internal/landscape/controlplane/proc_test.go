package controlplane

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestRunnerRestartsAndRecords checks the restarts of a Runner made
// WithRestarts on a process recorded anywhere in the state (here as a
// step's process): killed, it runs again, and its record in the Store gets
// the new PID, the count and how it exited, as status shows them.
func TestRunnerRestartsAndRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes; run without -short")
	}
	dir := t.TempDir()
	store := NewStore(dir, &State{})
	events := make(chan ProcessEvent, 10)
	r := NewRunner(nil, WithRestarts(store, func(e ProcessEvent) { events <- e }), WithBackoff(func(int) time.Duration { return 10 * time.Millisecond }))
	defer r.Close()
	p, err := r.Start("sleeper", "/bin/sleep", []string{"300"}, filepath.Join(dir, "logs", "sleeper.log"))
	if err != nil {
		// /bin/sleep is coreutils', on every machine the landscape runs
		// on: a failed start is the Runner's failure, not a missing tool.
		t.Fatalf("start /bin/sleep: %v", err)
	}
	defer p.Stop(time.Second)
	rec := p.Record
	must(t, store.Update(func(s *State) error { s.Processes = map[string]*Process{"sleeper": &rec}; return nil }))

	must(t, syscall.Kill(p.Record.PID, syscall.SIGKILL))
	deadline := time.After(30 * time.Second)
	for restarted := false; !restarted; {
		select {
		case e := <-events:
			restarted = e.Record.Restarts == 1 && e.Record.PID != p.Record.PID
		case <-deadline:
			t.Fatalf("no restart within 30s after SIGKILL; record %+v", store.Snapshot().Processes["sleeper"])
		}
	}
	got := store.Snapshot().Processes["sleeper"]
	if got == nil || got.PID == p.Record.PID || !Alive(got) || got.Restarts != 1 || got.LastExit != "ended (signal: killed)" || got.LastExitAt == nil {
		t.Errorf("stored record after the restart: %+v; want the new, running process, 1 restart, last exit by SIGKILL", got)
	}
	if cur := p.Current(); cur.PID != got.PID || p.PID() != got.PID || p.Restarts() != 1 {
		t.Errorf("Current() = %+v, PID() = %d, Restarts() = %d; want the stored record's PID %d and 1 restart", cur, p.PID(), p.Restarts(), got.PID)
	}
	if !p.Exited() || p.ExitError() == nil {
		t.Error("Exited() = false or no ExitError() after an exit: a start wait would not notice that the process crashed")
	}

	// Stopped, it stays stopped.
	p.Stop(time.Second)
	select {
	case <-p.Done():
	default:
		t.Error("Done is open after Stop")
	}
	if Alive(got) {
		t.Errorf("the restarted process (pid %d) runs after Stop", got.PID)
	}
}
