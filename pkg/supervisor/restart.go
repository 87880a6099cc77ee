package supervisor

import (
	"time"

	"k8s.io/utils/clock"
)

// RestartPolicy says when a process that ended is started again.
type RestartPolicy struct {
	// Backoff is the wait before the start that follows the n-th end or
	// failed start in a row (n ≥ 1); a negative wait starts nothing more.
	Backoff func(n int) time.Duration
	// StableAfter is how long a process must have run for the count of
	// Backoff to start over.
	StableAfter time.Duration
}

// Run is how one start of a process ended.
type Run struct {
	// Started is when the process started; zero when it could not start.
	Started time.Time
	// Stopped ends the restarts: the process was stopped, or nothing may
	// start any more.
	Stopped bool
}

// KeepRunning calls run, which starts a process (or fails to) and waits for
// it to end, again and again, waiting between two calls as pol says. It
// returns once run reports Stopped, stop is closed during a wait, or the
// backoff is negative. waiting, when set, is told of every wait before it
// starts. Spawner.Supervise and the operator's process deployer share this
// loop; what a start is and what is reported differ between them.
func KeepRunning(clk clock.Clock, stop <-chan struct{}, pol RestartPolicy, run func() Run, waiting func(time.Duration)) {
	failures := 0 // in a row
	for {
		r := run()
		if r.Stopped {
			return
		}
		if !r.Started.IsZero() && clk.Since(r.Started) >= pol.StableAfter {
			failures = 0
		}
		failures++
		wait := pol.Backoff(failures)
		if wait < 0 {
			return
		}
		if waiting != nil {
			waiting(wait)
		}
		select {
		case <-stop:
			return
		case <-clk.After(wait):
		}
	}
}
