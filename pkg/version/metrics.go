package version

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// MetricName is the name of the build information gauge.
const MetricName = "marketplane_build_info"

// Collector returns a new gauge marketplane_build_info{version, revision,
// goversion} with the value 1, for a process's own registry (the broker
// has one). The labels come from Get.
func Collector() prometheus.Collector {
	info := Get()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricName,
		Help: "A metric with a constant '1' value labelled by the version, revision and Go version this binary was built from.",
	}, []string{"version", "revision", "goversion"})
	g.WithLabelValues(info.Version, info.Revision, info.GoVersion).Set(1)
	return g
}

var registerOnce sync.Once

// RegisterMetrics registers the build information gauge in
// controller-runtime's registry, which every manager's /metrics serves. It
// is safe to call more than once and from several places (the operator and
// the provider runtime both call it): the gauge is registered the first
// time only.
func RegisterMetrics() {
	registerOnce.Do(func() {
		if err := crmetrics.Registry.Register(Collector()); err != nil {
			// Registered already by someone else with the same
			// description: the gauge is there, which is all that matters.
			if are := (prometheus.AlreadyRegisteredError{}); !errors.As(err, &are) {
				panic(err)
			}
		}
	})
}
