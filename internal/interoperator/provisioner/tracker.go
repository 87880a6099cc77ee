package provisioner

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// tracker counts, per object, the consecutive transient errors of its
// current operation and how often its progress was polled. Both only tune
// retries: after a restart they start from zero, which delays a failure or
// shortens a wait, and never changes an outcome.
type tracker struct {
	mu    sync.Mutex
	byUID map[types.UID]*progress
	// onDone, when set, is told about every object whose operation ended.
	onDone func(types.UID)
}

type progress struct {
	errors int
	polls  int
	// sourcesWatched says that every source of the operation is watched:
	// a change wakes it, so it need not be polled.
	sourcesWatched bool
}

func newTracker() *tracker { return &tracker{byUID: map[types.UID]*progress{}} }

func (t *tracker) get(uid types.UID) *progress {
	p := t.byUID[uid]
	if p == nil {
		p = &progress{}
		t.byUID[uid] = p
	}
	return p
}

// transientError counts a transient error and returns how many there were
// in a row.
func (t *tracker) transientError(uid types.UID) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.get(uid)
	p.errors++
	return p.errors
}

// poll returns how long to wait before the next look at an operation in
// progress: minWait, doubling with every poll, at most maxWait. It also clears the
// error count: the operation got as far as applying.
func (t *tracker) poll(uid types.UID, minWait, maxWait time.Duration) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.get(uid)
	p.errors = 0
	d := minWait
	for i := 0; i < p.polls && d < maxWait; i++ {
		d *= 2
	}
	p.polls++
	if d > maxWait {
		d = maxWait
	}
	return d
}

// setWatched records whether every source of the operation is watched.
func (t *tracker) setWatched(uid types.UID, watched bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.get(uid).sourcesWatched = watched
}

// watched reports whether every source of the operation is watched, and
// clears the error count as poll does.
func (t *tracker) watched(uid types.UID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.get(uid)
	if p.sourcesWatched {
		p.errors = 0
	}
	return p.sourcesWatched
}

// done forgets an object whose operation ended.
func (t *tracker) done(uid types.UID) {
	t.mu.Lock()
	delete(t.byUID, uid)
	t.mu.Unlock()
	if t.onDone != nil {
		t.onDone(uid)
	}
}
