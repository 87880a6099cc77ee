package spruntime

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metric names, registered with controller-runtime's metrics.Registry so that
// the manager's metrics endpoint serves them.
const (
	// MetricReconcilesTotal counts reconciles by kind and result.
	MetricReconcilesTotal = "marketplane_provider_reconciles_total"
	// MetricReconcileErrorsTotal counts failed reconciles by kind and reason
	// (the Synced reason: ReconcileError, ClusterAccessFailed,
	// InvalidUserInput, ...).
	MetricReconcileErrorsTotal = "marketplane_provider_reconcile_errors_total"
	// MetricReconcileDuration is a histogram of reconcile durations in
	// seconds by kind.
	MetricReconcileDuration = "marketplane_provider_reconcile_duration_seconds"
	// MetricDriftsTotal counts drifts that Observe reported, by kind.
	MetricDriftsTotal = "marketplane_provider_drifts_total"
)

// The values of the result label of MetricReconcilesTotal.
const (
	// ResultSuccess: CreateOrUpdate (or Observe finding nothing to do)
	// succeeded.
	ResultSuccess = "success"
	// ResultError: the reconcile failed and is retried with backoff.
	ResultError = "error"
	// ResultInvalidInput: the user's input is invalid; no retry until it
	// changes.
	ResultInvalidInput = "invalid_input"
	// ResultWaiting: the reconcile waits for something (a ProviderConfig,
	// cluster access, users to remove their objects, a deletion in
	// progress).
	ResultWaiting = "waiting"
	// ResultSkipped: the object is gone, ignored, paused, or belongs to
	// another environment.
	ResultSkipped = "skipped"
	// ResultDeleted: deletion finished and the finalizer was removed.
	ResultDeleted = "deleted"
)

var (
	reconcilesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricReconcilesTotal,
		Help: "Reconciles of service provider API objects by kind and result.",
	}, []string{"kind", "result"})
	reconcileErrorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricReconcileErrorsTotal,
		Help: "Failed reconciles of service provider API objects by kind and reason.",
	}, []string{"kind", "reason"})
	reconcileDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    MetricReconcileDuration,
		Help:    "Duration of reconciles of service provider API objects in seconds, by kind.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	}, []string{"kind"})
	driftsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricDriftsTotal,
		Help: "Drifts of domain services that Observe reported, by kind.",
	}, []string{"kind"})
)

func init() {
	metrics.Registry.MustRegister(reconcilesTotal, reconcileErrorsTotal, reconcileDuration, driftsTotal)
}

// initMetrics creates the series of kind at zero when its reconciler is set
// up: /metrics then names every family from the start, and rate() and
// increase() see the first error or drift of a kind.
func initMetrics(kind string) {
	for _, result := range []string{ResultSuccess, ResultError, ResultInvalidInput, ResultWaiting, ResultSkipped, ResultDeleted} {
		reconcilesTotal.WithLabelValues(kind, result)
	}
	for _, reason := range []string{ReasonReconcileError, ReasonClusterAccessFailed, ReasonInvalidUserInput} {
		reconcileErrorsTotal.WithLabelValues(kind, reason)
	}
	reconcileDuration.WithLabelValues(kind)
	driftsTotal.WithLabelValues(kind)
}
