package testenv_test

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/marketplane/marketplane/pkg/testenv"
)

// TestSyncBufferConcurrentWriters writes lines from many goroutines (run
// with -race to see the lock matter) and finds one writer's lines again.
func TestSyncBufferConcurrentWriters(t *testing.T) {
	var b testenv.SyncBuffer
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 100 {
				if w%2 == 0 {
					b.WriteString(fmt.Sprintf("writer-%d line %d\n", w, i))
				} else {
					fmt.Fprintf(&b, "writer-%d line %d\n", w, i)
				}
			}
		})
	}
	wg.Wait()
	if got, want := strings.Count(b.String(), "\n"), 800; got != want {
		t.Errorf("SyncBuffer holds %d lines after 8 writers wrote 100 each, want %d", got, want)
	}
	lines := b.LinesWith("writer-3 ")
	if got := strings.Count(lines, "\n"); got != 100 {
		t.Errorf("LinesWith(writer-3) returned %d lines, want 100:\n%s", got, lines)
	}
	if strings.Contains(lines, "writer-4") {
		t.Errorf("LinesWith(writer-3) returned lines of another writer:\n%s", lines)
	}
}

// TestMetricValue sums a counter and a histogram over the series whose
// labels match.
func TestMetricValue(t *testing.T) {
	counter := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "testenv_test_events_total", Help: "Test counter."}, []string{"kind", "reason"})
	histogram := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "testenv_test_seconds", Help: "Test histogram."}, []string{"kind"})
	metrics.Registry.MustRegister(counter, histogram)
	t.Cleanup(func() {
		metrics.Registry.Unregister(counter)
		metrics.Registry.Unregister(histogram)
	})
	counter.WithLabelValues("a", "x").Add(2)
	counter.WithLabelValues("a", "y").Add(3)
	counter.WithLabelValues("b", "x").Add(5)
	histogram.WithLabelValues("a").Observe(0.1)
	histogram.WithLabelValues("a").Observe(7)

	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"testenv_test_events_total", nil, 10},
		{"testenv_test_events_total", map[string]string{"kind": "a"}, 5},
		{"testenv_test_events_total", map[string]string{"kind": "a", "reason": "y"}, 3},
		{"testenv_test_events_total", map[string]string{"kind": "c"}, 0},
		{"testenv_test_seconds", map[string]string{"kind": "a"}, 2},
		{"testenv_test_absent_total", nil, 0},
	} {
		if got := testenv.MetricValue(t, tc.name, tc.labels); got != tc.want {
			t.Errorf("MetricValue(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}

// TestReconcileCount runs a real controller, fed from a channel rather
// than an API server, and counts its reconciles.
func TestReconcileCount(t *testing.T) {
	const name = "testenv-reconcile-count"
	reconciled := make(chan struct{}, 10)
	events := startChannelController(t, name, func() { reconciled <- struct{}{} })

	before := testenv.ReconcileCount(t, name)
	for i := range 3 {
		events <- event.TypedGenericEvent[*corev1.ConfigMap]{Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprint("cm-", i)}}}
		select {
		case <-reconciled:
		case <-time.After(30 * time.Second):
			t.Fatalf("reconcile %d did not happen within 30s", i+1)
		}
	}
	// The counter is incremented after the reconciler returns.
	deadline := time.Now().Add(30 * time.Second)
	for testenv.ReconcileCount(t, name)-before != 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling a counter, not ordering
	}
	if got := testenv.ReconcileCount(t, name) - before; got != 3 {
		t.Errorf("ReconcileCount(%s) grew by %v after 3 reconciles, want 3", name, got)
	}
	if got := testenv.ReconcileCount(t, "testenv-no-such-controller"); got != 0 {
		t.Errorf("ReconcileCount of a controller that never ran = %v, want 0", got)
	}
}

// TestStartSkipsUnderShort shows that under -short Start skips the test
// before starting anything.
func TestStartSkipsUnderShort(t *testing.T) {
	short := flag.Lookup("test.short")
	old := short.Value.String()
	if err := short.Value.Set("true"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = short.Value.Set(old) })

	for name, start := range map[string]func(t *testing.T){
		"Start":     func(t *testing.T) { testenv.Start(t, testenv.WithCRDs()) },
		"StartMany": func(t *testing.T) { testenv.StartMany(t, []string{"a"}, testenv.WithCRDs()) },
	} {
		var skipped, returned bool
		t.Run(name, func(t *testing.T) {
			t.Cleanup(func() { skipped = t.Skipped() })
			start(t)
			returned = true
		})
		if !skipped || returned {
			t.Errorf("%s under -short: skipped=%v, returned clusters=%v; want the test skipped before anything starts", name, skipped, returned)
		}
	}
}

// TestSettledReconcileCount: while a reconcile runs, SettledReconcileCount
// waits for it to return and counts it.
func TestSettledReconcileCount(t *testing.T) {
	const name = "testenv-settled-reconcile-count"
	started, release := make(chan struct{}, 1), make(chan struct{})
	events := startChannelController(t, name, func() {
		started <- struct{}{}
		<-release
	})

	before := testenv.SettledReconcileCount(t, name, 30*time.Second)
	events <- event.TypedGenericEvent[*corev1.ConfigMap]{Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cm"}}}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the reconcile did not start within 30s")
	}
	// The reconcile returns a little later: a count that did not wait for
	// it would miss it; the settled count has it whatever the delay.
	time.AfterFunc(200*time.Millisecond, func() { close(release) })
	if got := testenv.SettledReconcileCount(t, name, 30*time.Second) - before; got != 1 {
		t.Errorf("SettledReconcileCount grew by %v while a reconcile ran, want 1 (it waits for it)", got)
	}
}

// startChannelController runs a real controller named name, fed from the
// returned channel rather than an API server, whose reconciler calls
// reconciled; it stops when the test ends.
func startChannelController(t *testing.T, name string, reconciled func()) chan<- event.TypedGenericEvent[*corev1.ConfigMap] {
	t.Helper()
	c, err := controller.NewUnmanaged(name, controller.Options{
		Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			reconciled()
			return reconcile.Result{}, nil
		}),
		SkipNameValidation: ptr.To(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan event.TypedGenericEvent[*corev1.ConfigMap])
	if err := c.Watch(source.Channel(events, &handler.TypedEnqueueRequestForObject[*corev1.ConfigMap]{})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	return events
}
