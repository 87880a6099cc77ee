package provisioner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	osbv1alpha1 "github.com/marketplane/marketplane/api/osb/v1alpha1"
)

func TestTrackerPoll(t *testing.T) {
	tr := newTracker()
	var got []time.Duration
	for range 7 {
		got = append(got, tr.poll("a", time.Second, 30*time.Second))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("poll backoff doubles up to the maximum, -want +got:\n%s", diff)
	}
	tr.done("a")
	if d := tr.poll("a", time.Second, 30*time.Second); d != time.Second {
		t.Errorf("after done, poll = %s, want it to start again at 1s", d)
	}
	for i := 1; i <= 3; i++ {
		if n := tr.transientError("b"); n != i {
			t.Errorf("transientError #%d = %d", i, n)
		}
	}
	tr.poll("b", time.Second, time.Second)
	if n := tr.transientError("b"); n != 1 {
		t.Errorf("a poll (the operation got as far as applying) resets the error count; got %d", n)
	}
}

func TestLabelValue(t *testing.T) {
	tests := map[string]struct {
		reason string
		name   string
		hashed bool
	}{
		"GUID":     {"An OSB GUID is a valid label value.", "6f1e2d3c-0000-4000-8000-00000000a001", false},
		"TooLong":  {"A name longer than 63 characters is hashed.", strings.Repeat("a", 64), true},
		"BadChars": {"A name with dots at the end is hashed.", "a.", true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := labelValue(tc.name)
			if (got != tc.name) != tc.hashed || len(got) > 63 {
				t.Errorf("%s\nlabelValue(%q) = %q", tc.reason, tc.name, got)
			}
		})
	}
}

func TestUnionMinus(t *testing.T) {
	a := osbv1alpha1.Source{APIVersion: "v1", Kind: "ConfigMap", Name: "a"}
	b := osbv1alpha1.Source{APIVersion: "v1", Kind: "ConfigMap", Name: "b"}
	c := osbv1alpha1.Source{APIVersion: "v1", Kind: "ConfigMap", Name: "c"}
	if diff := cmp.Diff([]osbv1alpha1.Source{a, b, c}, union([]osbv1alpha1.Source{a, b}, []osbv1alpha1.Source{b, c})); diff != "" {
		t.Errorf("union, -want +got:\n%s", diff)
	}
	if diff := cmp.Diff([]osbv1alpha1.Source{a}, minus([]osbv1alpha1.Source{a, b}, []osbv1alpha1.Source{b, c})); diff != "" {
		t.Errorf("minus, -want +got:\n%s", diff)
	}
}

// liveReader counts reads and answers with obj.
type liveReader struct {
	reads int
	obj   *osbv1alpha1.SFServiceInstance
}

func (l *liveReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	l.reads++
	l.obj.DeepCopyInto(obj.(*osbv1alpha1.SFServiceInstance))
	return nil
}

func (l *liveReader) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// laggingCache is a client whose reads return a fixed object, as a cache
// that has not seen the latest writes, and whose writes go to a fake API
// server.
type laggingCache struct {
	client.Client
	cached *osbv1alpha1.SFServiceInstance
}

func (c *laggingCache) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	c.cached.DeepCopyInto(obj.(*osbv1alpha1.SFServiceInstance))
	return nil
}

func TestFreshClient(t *testing.T) {
	s := runtime.NewScheme()
	if err := osbv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	key := client.ObjectKey{Namespace: "ns", Name: "i"}
	inst := &osbv1alpha1.SFServiceInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "i"}}
	server := fake.NewClientBuilder().WithScheme(s).WithObjects(inst).WithStatusSubresource(inst).Build()
	initial := &osbv1alpha1.SFServiceInstance{}
	must(server.Get(ctx, key, initial))
	cache := &laggingCache{Client: server, cached: initial.DeepCopy()}
	live := &liveReader{}
	f := newFreshClient(cache, live, &osbv1alpha1.SFServiceInstance{})

	// No write of ours: reads come from the cache.
	got := &osbv1alpha1.SFServiceInstance{}
	must(f.Get(ctx, key, got))
	if live.reads != 0 {
		t.Fatalf("read the API server without a write of ours")
	}

	// Our status write, which the cache has not seen: the read goes to
	// the API server.
	written := initial.DeepCopy()
	written.Status.State = osbv1alpha1.StateSucceeded
	must(f.Status().Update(ctx, written))
	live.obj = written.DeepCopy()
	must(f.Get(ctx, key, got))
	if live.reads != 1 || got.Status.State != osbv1alpha1.StateSucceeded {
		t.Errorf("with the cache behind: %d live reads, state %q; want 1 and the written state", live.reads, got.Status.State)
	}

	// Once the cache holds the written version, reads come from it again.
	cache.cached = written.DeepCopy()
	must(f.Get(ctx, key, got))
	must(f.Get(ctx, key, got))
	if live.reads != 1 {
		t.Errorf("the cache caught up, yet %d more live reads", live.reads-1)
	}

	// Kinds it does not track are never read live.
	other := newFreshClient(cache, live, &osbv1alpha1.SFServiceBinding{})
	must(other.Status().Update(ctx, written))
	cache.cached = initial.DeepCopy()
	must(other.Get(ctx, key, got))
	if live.reads != 1 {
		t.Errorf("an untracked kind was read live")
	}
}

// TestScheduledAfterRecording checks that only the scheduler's own
// decision, Unknown until spec.clusterId holds it, turns True once it is
// recorded, with the message without its recording prefix; an accepted
// pin or a refusal stays as it is.
func TestScheduledAfterRecording(t *testing.T) {
	tests := map[string]struct {
		reason string
		in     metav1.Condition
		want   metav1.Condition
	}{
		"Decision": {
			reason: "The scheduler's decision is recorded.",
			in:     metav1.Condition{Status: metav1.ConditionUnknown, Reason: ReasonScheduling, Message: recordingPrefix + "Scheduled on SFCluster w1 by the default scheduler: the default cluster"},
			want:   metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonScheduled, Message: "Scheduled on SFCluster w1 by the default scheduler: the default cluster"},
		},
		"Refused": {
			reason: "A refused pin is not turned into a placement.",
			in:     metav1.Condition{Status: metav1.ConditionFalse, Reason: string(ReasonClusterNotAllowed), Message: "cordoned"},
			want:   metav1.Condition{Status: metav1.ConditionFalse, Reason: string(ReasonClusterNotAllowed), Message: "cordoned"},
		},
		"Pinned": {
			reason: "An accepted pin stays as it is.",
			in:     metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonPinned, Message: "accepted"},
			want:   metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonPinned, Message: "accepted"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.in.Type = ConditionScheduled
			inst := &osbv1alpha1.SFServiceInstance{Status: osbv1alpha1.SFServiceInstanceStatus{Conditions: []metav1.Condition{tc.in}}}
			scheduled(inst)
			got := inst.Status.Conditions[0]
			if got.Status != tc.want.Status || got.Reason != tc.want.Reason || got.Message != tc.want.Message {
				t.Errorf("%s\ngot %s/%s %q, want %s/%s %q", tc.reason, got.Status, got.Reason, got.Message, tc.want.Status, tc.want.Reason, tc.want.Message)
			}
		})
	}
}
