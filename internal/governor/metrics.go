package governor

import "github.com/prometheus/client_golang/prometheus"

// BreakerReader is a governor whose breakers can be read.
type BreakerReader interface {
	BreakerStates() map[string]BreakerState
}

var (
	_ BreakerReader = (*Local)(nil)
	_ BreakerReader = (*Redis)(nil)
)

// breakerCollector exports whguard_backend_breaker_state at scrape time.
type breakerCollector struct {
	g    BreakerReader
	desc *prometheus.Desc
}

// RegisterBreakerMetric registers whguard_backend_breaker_state{backend}
// (0 closed, 1 open, 2 half-open), read from g at each scrape.
func RegisterBreakerMetric(reg prometheus.Registerer, g BreakerReader) {
	reg.MustRegister(&breakerCollector{g: g, desc: prometheus.NewDesc("whguard_backend_breaker_state",
		"Circuit breaker of each backend: 0 closed, 1 open (no delivery starts), 2 half-open (one probe out).",
		[]string{"backend"}, nil)})
}

func (c *breakerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	for b, s := range c.g.BreakerStates() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(s), b)
	}
}
