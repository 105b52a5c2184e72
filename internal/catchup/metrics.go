package catchup

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/journal"
)

// Metrics counts the passes and what they did.
type Metrics struct {
	passes      *prometheus.CounterVec
	events      *prometheus.CounterVec
	lastSuccess *prometheus.GaugeVec
}

// NewMetrics registers the catch-up metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "whguard_catchup_passes_total", Help: "Catch-up passes, by provider and result (ok or error).",
		}, []string{"provider", "result"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "whguard_catchup_events_total", Help: "Events catch-up journaled, redeliveries it requested, and GitHub deliveries it gave up on.",
		}, []string{"provider", "action"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "whguard_catchup_last_success_timestamp_seconds", Help: "When the provider's last successful catch-up pass finished (Unix time).",
		}, []string{"provider"}),
	}
	reg.MustRegister(m.passes, m.events, m.lastSuccess)
	return m
}

// Actions of whguard_catchup_events_total.
const (
	ActionJournaled           = "journaled"
	ActionRedeliveryRequested = "redelivery_requested"
	ActionGaveUp              = "gave_up"
)

// zero makes the counters' series of each provider exist at 0 from
// start-up (the timestamp stays absent until a pass succeeds): the first
// pass then counts in rate and increase.
func (m *Metrics) zero(providers []string) {
	if m == nil {
		return
	}
	for _, p := range providers {
		for _, r := range []string{"ok", "error"} {
			m.passes.WithLabelValues(p, r)
		}
		for _, a := range []string{ActionJournaled, ActionRedeliveryRequested, ActionGaveUp} {
			m.events.WithLabelValues(p, a)
		}
	}
}

// pass counts one recorded pass (not a dry run).
func (m *Metrics) pass(provider string, p *journal.CatchupPass) {
	if m == nil {
		return
	}
	result := "ok"
	if p.Error != "" {
		result = "error"
	} else {
		m.lastSuccess.WithLabelValues(provider).Set(float64(p.Finished.UnixNano()) / 1e9)
	}
	m.passes.WithLabelValues(provider, result).Inc()
	m.events.WithLabelValues(provider, ActionJournaled).Add(float64(p.Journaled))
	m.events.WithLabelValues(provider, ActionRedeliveryRequested).Add(float64(p.RedeliveryRequested))
}

// gaveUp counts GitHub deliveries given up on.
func (m *Metrics) gaveUp(provider string, n int) {
	if m != nil {
		m.events.WithLabelValues(provider, ActionGaveUp).Add(float64(n))
	}
}
