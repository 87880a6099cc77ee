package osb

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the broker's Prometheus metrics.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	codes    [600]string
}

// endpointMetrics holds the metrics of one endpoint, resolved once, so that
// a request skips the label lookups.
type endpointMetrics struct {
	m        *Metrics
	name     string
	observer prometheus.Observer
	counters [600]atomic.Pointer[counter]
}

type counter struct{ prometheus.Counter }

// NewMetrics registers the broker's metrics with reg:
// marketplane_broker_requests_total{endpoint,code} and
// marketplane_broker_request_duration_seconds{endpoint}.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "marketplane_broker_requests_total",
			Help: "OSB requests answered, by endpoint and HTTP status code.",
		}, []string{"endpoint", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "marketplane_broker_request_duration_seconds",
			Help:    "Time to answer an OSB request, by endpoint.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"endpoint"}),
	}
	for i := range m.codes {
		m.codes[i] = strconv.Itoa(i)
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// endpoint returns the metrics of one endpoint; nil when m is nil.
func (m *Metrics) endpoint(name string) *endpointMetrics {
	if m == nil {
		return nil
	}
	return &endpointMetrics{m: m, name: name, observer: m.duration.WithLabelValues(name)}
}

func (e *endpointMetrics) observe(code int, d time.Duration) {
	if e == nil {
		return
	}
	e.observer.Observe(d.Seconds())
	if code < 0 || code >= len(e.counters) {
		e.m.requests.WithLabelValues(e.name, "other").Inc()
		return
	}
	c := e.counters[code].Load()
	if c == nil {
		c = &counter{e.m.requests.WithLabelValues(e.name, e.m.codes[code])}
		e.counters[code].Store(c)
	}
	c.Inc()
}
