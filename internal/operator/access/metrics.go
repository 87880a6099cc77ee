package access

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	clustersv1alpha1 "github.com/marketplane/marketplane/api/clusters/v1alpha1"
)

// MetricDeniedTotal counts AccessRequests that turned Denied, by reason.
// It is registered with controller-runtime's metrics.Registry, which the
// operator's /metrics serves.
const MetricDeniedTotal = "marketplane_operator_accessrequests_denied_total"

// deniedReasons are the reasons a request is Denied with. Their series
// exist from the start at 0, so that an alert on their rate sees the
// first denial.
var deniedReasons = []Reason{
	ReasonOIDCNotSupported, ReasonInvalidSpec, ReasonClusterRequestDenied,
	ReasonRoleConflict, ReasonSecretConflict, ReasonPolicyViolation,
}

var deniedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: MetricDeniedTotal,
	Help: "AccessRequests that turned Denied, by the reason of their Ready condition.",
}, []string{"reason"})

func init() {
	for _, r := range deniedReasons {
		deniedTotal.WithLabelValues(string(r))
	}
	metrics.Registry.MustRegister(deniedTotal)
}

// countDenied counts a request that turns Denied: from another phase, or
// Denied again for another reason. A request that stays Denied for the
// same reason is not counted again on its next reconcile.
func countDenied(ar *clustersv1alpha1.AccessRequest, o *outcome, oldReason string) {
	if o.phase != clustersv1alpha1.RequestDenied {
		return
	}
	if ar.Status.Phase == clustersv1alpha1.RequestDenied && oldReason == string(o.reason) {
		return
	}
	deniedTotal.WithLabelValues(string(o.reason)).Inc()
}
