package testenv

import (
	"testing"

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
