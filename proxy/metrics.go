package proxy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds the ingress metrics of SPEC 7. A nil *Metrics records
// nothing.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the ingress metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "whguard_ingress_requests_total",
			Help: "Webhook requests received, by provider and result (accepted, duplicate, conflict, unauthorized, too_large, bad_request, unavailable, not_found, method_not_allowed, handshake).",
		}, []string{"provider", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "whguard_ingress_duration_seconds",
			Help:    "Time from receiving a webhook to answering it, commit included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"provider"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

func (m *Metrics) observeIngress(provider, result string, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(provider, result).Inc()
	m.duration.WithLabelValues(provider).Observe(d.Seconds())
}
