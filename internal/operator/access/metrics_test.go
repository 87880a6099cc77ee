package access

import (
	"context"
	"testing"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
)

// TestDeniedMetric: report counts a request once when it turns Denied, again
// when it is Denied for another reason, and not while it stays Denied for
// the same reason or is not Denied; the series of every deny reason are
// served from the start.
func TestDeniedMetric(t *testing.T) {
	if n := servedSeries(t, MetricDeniedTotal); n != len(deniedReasons) {
		t.Fatalf("controller-runtime's registry serves %d series of %s, want one per deny reason (%d)", n, MetricDeniedTotal, len(deniedReasons))
	}
	count := func(reason Reason) float64 {
		m := &dto.Metric{}
		if err := deniedTotal.WithLabelValues(string(reason)).Write(m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	start := map[Reason]float64{ReasonPolicyViolation: count(ReasonPolicyViolation), ReasonInvalidSpec: count(ReasonInvalidSpec)}
	r := &Reconciler{}
	ar := &clustersv1alpha1.AccessRequest{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", Generation: 1}}
	for _, step := range []struct {
		name   string
		reason string
		o      outcome
		// want is how much each reason's counter has grown since the start.
		want map[Reason]float64
	}{
		{name: "pending", reason: "not Denied: not counted",
			o: outcome{reason: ReasonClusterNotFound}, want: map[Reason]float64{ReasonPolicyViolation: 0, ReasonInvalidSpec: 0}},
		{name: "denied", reason: "turns Denied: counted",
			o: outcome{phase: clustersv1alpha1.RequestDenied, reason: ReasonPolicyViolation}, want: map[Reason]float64{ReasonPolicyViolation: 1, ReasonInvalidSpec: 0}},
		{name: "denied again", reason: "stays Denied for the same reason: not counted again",
			o: outcome{phase: clustersv1alpha1.RequestDenied, reason: ReasonPolicyViolation}, want: map[Reason]float64{ReasonPolicyViolation: 1, ReasonInvalidSpec: 0}},
		{name: "denied for another reason", reason: "Denied for a new reason: counted under it",
			o: outcome{phase: clustersv1alpha1.RequestDenied, reason: ReasonInvalidSpec}, want: map[Reason]float64{ReasonPolicyViolation: 1, ReasonInvalidSpec: 1}},
	} {
		o := step.o
		r.report(context.Background(), ar, &o)
		for reason, want := range step.want {
			if got := count(reason) - start[reason]; got != want {
				t.Errorf("after %s (%s): %s grew by %v, want %v", step.name, step.reason, reason, got, want)
			}
		}
	}
}

// servedSeries returns how many series of the family name
// controller-runtime's registry serves.
func servedSeries(t *testing.T, name string) int {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return len(f.GetMetric())
		}
	}
	return 0
}
