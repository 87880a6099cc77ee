package spruntime

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// TestInitMetrics: once a kind's reconciler is set up, controller-runtime's
// registry serves every family of the runtime for it, at zero, before any
// reconcile, error or drift.
func TestInitMetrics(t *testing.T) {
	const kind = "MetricsInitKind"
	initMetrics(kind)
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	got := map[string]int{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					got[f.GetName()]++
				}
			}
		}
	}
	want := map[string]int{MetricReconcilesTotal: 6, MetricReconcileErrorsTotal: 3, MetricReconcileDuration: 1, MetricDriftsTotal: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("series of kind %s (-want +got):\n%s", kind, diff)
	}
}
