package supervisor

import (
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestKeepRunning checks the count KeepRunning gives the backoff: it grows
// with each end or failed start in a row, starts over after a run that
// lasted StableAfter, and a negative wait ends the loop.
func TestKeepRunning(t *testing.T) {
	for name, tc := range map[string]struct {
		// runs are how long each run lasted; a negative one could not
		// start.
		runs []time.Duration
		want []int
	}{
		"crash loop":             {runs: []time.Duration{0, 0, 0}, want: []int{1, 2, 3}},
		"failed starts count":    {runs: []time.Duration{0, -1, -1}, want: []int{1, 2, 3}},
		"stable run starts over": {runs: []time.Duration{0, 0, time.Minute, 0}, want: []int{1, 2, 1, 2}},
		"failed start after a stable run continues the count": {runs: []time.Duration{time.Minute, -1}, want: []int{1, 2}},
	} {
		t.Run(name, func(t *testing.T) {
			clk := instantClock{clocktesting.NewFakeClock(time.Unix(0, 0))}
			var got []int
			var waits []time.Duration
			i := 0
			run := func() Run {
				d := tc.runs[i]
				i++
				if d < 0 {
					return Run{}
				}
				started := clk.Now()
				clk.Step(d)
				return Run{Started: started}
			}
			pol := RestartPolicy{StableAfter: time.Minute, Backoff: func(n int) time.Duration {
				got = append(got, n)
				if len(got) == len(tc.runs) {
					return -1 // stop
				}
				return 0
			}}
			KeepRunning(clk, nil, pol, run, func(w time.Duration) { waits = append(waits, w) })
			if !slices.Equal(got, tc.want) {
				t.Errorf("backoff asked for %v, want %v", got, tc.want)
			}
			if len(waits) != len(tc.runs)-1 {
				t.Errorf("told of %d waits, want %d (none for the negative one)", len(waits), len(tc.runs)-1)
			}
		})
	}
}

// instantClock is a fake clock whose waits are over at once.
type instantClock struct{ *clocktesting.FakeClock }

func (c instantClock) After(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

// TestKeepRunningStops checks that a run reporting Stopped ends the loop
// without a wait, and that closing stop ends a wait.
func TestKeepRunningStops(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	runs := 0
	KeepRunning(clk, nil, RestartPolicy{Backoff: func(int) time.Duration { t.Error("backoff asked after Stopped"); return 0 }},
		func() Run { runs++; return Run{Stopped: true} }, nil)
	if runs != 1 {
		t.Errorf("run called %d times, want 1", runs)
	}

	stop := make(chan struct{})
	done := make(chan struct{})
	runs = 0
	go func() {
		defer close(done)
		KeepRunning(clk, stop, RestartPolicy{Backoff: func(int) time.Duration { return time.Hour }},
			func() Run { runs++; return Run{} }, func(time.Duration) { close(stop) })
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("KeepRunning did not return once stop was closed")
	}
	if runs != 1 {
		t.Errorf("run called %d times, want 1", runs)
	}
}
