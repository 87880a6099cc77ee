package testenv

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// ReconcileTotalMetric is controller-runtime's counter of reconciles, by
// controller name and result.
const ReconcileTotalMetric = "controller_runtime_reconcile_total"

// ReconcileCount returns how often the controller named controller (the
// name given to the builder, or controller-runtime's default: the
// lower-case kind) has reconciled in this process so far, whatever the
// result. Tests use it to show that something does not happen, such as a
// retry loop on an input that cannot succeed: count, wait, count again.
// Controller names must be unique among the managers of a test binary for
// the count to mean one controller.
func ReconcileCount(t testing.TB, controller string) float64 {
	t.Helper()
	return MetricValue(t, ReconcileTotalMetric, map[string]string{"controller": controller})
}

// MetricValue sums, over the series of the metric family name in
// controller-runtime's registry whose labels include labels, the counter
// and gauge values, or for histograms the number of observations. It is 0 when there
// is no such series yet.
func MetricValue(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatalf("testenv: gather metrics: %v", err)
	}
	var total float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := make(map[string]string, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			switch {
			case m.GetHistogram() != nil:
				total += float64(m.GetHistogram().GetSampleCount())
			case m.GetGauge() != nil:
				total += m.GetGauge().GetValue()
			default:
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// ActiveWorkersMetric and WorkQueueDepthMetric are controller-runtime's
// gauges of a controller's running reconciles and of its queued requests.
const (
	ActiveWorkersMetric  = "controller_runtime_active_workers"
	WorkQueueDepthMetric = "workqueue_depth"
)

// SettledReconcileCount waits, up to timeout, until the controller named
// controller runs no reconcile and has nothing queued, then returns
// ReconcileCount. A test that read what a reconcile wrote may run before
// that reconcile has returned and been counted; a count taken here
// includes it, so that "at most one more" afterwards allows only the
// reconcile the last write's own event may still bring.
func SettledReconcileCount(t testing.TB, controller string, timeout time.Duration) float64 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		active := MetricValue(t, ActiveWorkersMetric, map[string]string{"controller": controller})
		queued := MetricValue(t, WorkQueueDepthMetric, map[string]string{"name": controller})
		if active == 0 && queued == 0 {
			return ReconcileCount(t, controller)
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: controller %s still busy after %s (%v reconciles running, %v queued)", controller, timeout, active, queued)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
