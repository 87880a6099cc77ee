package notify

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestAwait checks that Await ends when a Wake makes done true, gives up
// at its timeout and at the end of its context, and that Notify's channel
// is closed by its key's Wake only.
func TestAwait(t *testing.T) {
	var w Waiters[string]
	other, stopOther := w.Notify("b")
	defer stopOther()

	var ready atomic.Bool
	result := make(chan bool, 1)
	calls := make(chan struct{}, 8)
	go func() {
		result <- w.Await(context.Background(), "a", time.Minute, func() bool {
			calls <- struct{}{}
			return ready.Load()
		})
	}()
	<-calls // the first look, after Await listens
	ready.Store(true)
	w.Wake("a")
	if !<-result {
		t.Error("Await gave up although a Wake made done true")
	}
	select {
	case <-other:
		t.Error("a Wake of a closed the channel of b")
	default:
	}
	w.Wake("b")
	<-other

	start := time.Now()
	if w.Await(context.Background(), "a", 20*time.Millisecond, func() bool { return false }) {
		t.Error("Await reported done although done never held")
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("Await gave up after %s, before its timeout", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if w.Await(ctx, "a", time.Minute, func() bool { return false }) {
		t.Error("Await reported done on an ended context")
	}
	if len(w.m) != 0 {
		t.Errorf("waiters left behind: %v", w.m)
	}
}
