package alert

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts the alert messages.
type Metrics struct {
	sentC, failedC *prometheus.CounterVec
	droppedC       prometheus.Counter
}

// NewMetrics registers the alert metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		sentC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "whguard_alerts_sent_total", Help: "Alert messages the receiver accepted, by type.",
		}, []string{"type"}),
		failedC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "whguard_alerts_failed_total", Help: "Alert messages given up on after their tries, by type.",
		}, []string{"type"}),
		droppedC: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "whguard_alerts_dropped_total", Help: "Alert messages dropped because too many were waiting to be sent.",
		}),
	}
	reg.MustRegister(m.sentC, m.failedC, m.droppedC)
	return m
}

func (m *Metrics) sent(typ string) {
	if m != nil {
		m.sentC.WithLabelValues(typ).Inc()
	}
}

func (m *Metrics) failed(typ string) {
	if m != nil {
		m.failedC.WithLabelValues(typ).Inc()
	}
}

func (m *Metrics) dropped() {
	if m != nil {
		m.droppedC.Inc()
	}
}
