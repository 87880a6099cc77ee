// Package notify lets a request or a reconcile wait for the next change of
// an object that an informer reports, instead of polling: waiters keyed by
// object, woken by the informer's event handler after the cache changed.
package notify

import (
	"context"
	"sync"
	"time"
)

// Waiters hands out channels that the next Wake of their key closes. The
// zero value is ready to use.
type Waiters[K comparable] struct {
	mu sync.Mutex
	m  map[K]map[chan struct{}]struct{}
}

// Notify returns a channel that the next Wake(k) closes, and a function
// that stops listening; it must be called. A Wake before Notify is not
// reported: look at the object after Notify.
func (w *Waiters[K]) Notify(k K) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	w.mu.Lock()
	if w.m == nil {
		w.m = map[K]map[chan struct{}]struct{}{}
	}
	if w.m[k] == nil {
		w.m[k] = map[chan struct{}]struct{}{}
	}
	w.m[k][ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if set := w.m[k]; set != nil {
			delete(set, ch)
			if len(set) == 0 {
				delete(w.m, k)
			}
		}
	}
}

// Wake closes the channels that Notify handed out for k.
func (w *Waiters[K]) Wake(k K) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.m[k] {
		close(ch)
	}
	delete(w.m, k)
}

// Await calls done at once and after every Wake of k until it returns
// true, for up to timeout, and reports whether it did. It listens before
// each call, so that no change slips between done's look and the wait.
func (w *Waiters[K]) Await(ctx context.Context, k K, timeout time.Duration, done func() bool) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		ch, stop := w.Notify(k)
		if done() {
			stop()
			return true
		}
		select {
		case <-ch:
			stop()
		case <-timer.C:
			stop()
			return false
		case <-ctx.Done():
			stop()
			return false
		}
	}
}
