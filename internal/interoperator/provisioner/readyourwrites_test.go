package provisioner

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

// movingCache is a client whose reads return the object it holds, as a
// cache that the test moves on, and whose writes go to a fake API server.
// Every read is reported on reads.
type movingCache struct {
	client.Client
	mu     sync.Mutex
	cached *osbv1alpha1.SFServiceInstance
	reads  chan struct{}
}

func (c *movingCache) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	c.mu.Lock()
	c.cached.DeepCopyInto(obj.(*osbv1alpha1.SFServiceInstance))
	c.mu.Unlock()
	select {
	case c.reads <- struct{}{}:
	default:
	}
	return nil
}

func (c *movingCache) set(inst *osbv1alpha1.SFServiceInstance) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cached = inst.DeepCopy()
}

// TestFreshClientWaitsForTheCache reads an instance right after a status
// write of ours that the cache has not seen, with the informers'
// notifications on:
//   - the read waits for the cache and answers from it once the event of
//     the write came, without reading the API server;
//   - a cache that does not catch up within catchUp is left for the API
//     server;
//   - a cache that holds a later version than our write (someone wrote
//     since) answers at once.
func TestFreshClientWaitsForTheCache(t *testing.T) {
	s := runtime.NewScheme()
	if err := osbv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "ns", Name: "i"}
	inst := &osbv1alpha1.SFServiceInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "i"}}
	server := fake.NewClientBuilder().WithScheme(s).WithObjects(inst).WithStatusSubresource(inst).Build()
	initial := &osbv1alpha1.SFServiceInstance{}
	if err := server.Get(ctx, key, initial); err != nil {
		t.Fatal(err)
	}
	cache := &movingCache{Client: server, cached: initial.DeepCopy(), reads: make(chan struct{}, 16)}
	live := &liveReader{}
	f := newFreshClient(cache, live, &osbv1alpha1.SFServiceInstance{})
	f.watching = true // as watchCache leaves it
	write := func(state osbv1alpha1.State) *osbv1alpha1.SFServiceInstance {
		t.Helper()
		w := initial.DeepCopy()
		if err := server.Get(ctx, key, w); err != nil {
			t.Fatal(err)
		}
		w.Status.State = state
		if err := f.Status().Update(ctx, w); err != nil {
			t.Fatal(err)
		}
		live.obj = w.DeepCopy()
		return w
	}
	drain := func() {
		for {
			select {
			case <-cache.reads:
			default:
				return
			}
		}
	}

	// 1. The event comes while the read waits.
	written := write(osbv1alpha1.StateInProgress)
	drain()
	got := &osbv1alpha1.SFServiceInstance{}
	done := make(chan error, 1)
	go func() { done <- f.Get(ctx, key, got) }()
	// The first cache read finds it behind; the second comes after the
	// read listens for the object's events.
	for range 2 {
		select {
		case <-cache.reads:
		case err := <-done:
			t.Fatalf("the read did not wait for the cache: it ended (%v) with %d live reads", err, live.reads)
		}
	}
	cache.set(written)
	f.changed(written)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if live.reads != 0 || got.Status.State != osbv1alpha1.StateInProgress {
		t.Errorf("with the event of our write coming: %d live reads, state %q; want none and the written state", live.reads, got.Status.State)
	}

	// 2. The cache stays behind: the API server answers after catchUp.
	f.catchUp = 50 * time.Millisecond
	write(osbv1alpha1.StateSucceeded)
	start := time.Now()
	if err := f.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); live.reads != 1 || got.Status.State != osbv1alpha1.StateSucceeded || d < f.catchUp {
		t.Errorf("with the cache behind: %d live reads after %s, state %q; want 1 after at least %s and the written state", live.reads, d, got.Status.State, f.catchUp)
	}

	// 3. The cache holds a version later than our write.
	f.catchUp = time.Hour
	ours := write(osbv1alpha1.StateFailed)
	later := ours.DeepCopy()
	rv, err := strconv.ParseUint(ours.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	later.ResourceVersion = strconv.FormatUint(rv+1, 10)
	cache.set(later)
	if err := f.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if live.reads != 1 || got.ResourceVersion != later.ResourceVersion {
		t.Errorf("with a later version cached: %d more live reads, version %s; want none and %s", live.reads-1, got.ResourceVersion, later.ResourceVersion)
	}
}
