package forwarder

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/internal/governor"
	"github.com/whguard/whguard/journal"
)

// Metrics holds the delivery metrics (docs/operations.md, "Metrics"). A nil *Metrics records
// nothing.
type Metrics struct {
	deliveries *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	latency    *prometheus.HistogramVec
	events     *prometheus.GaugeVec
	oldest     *prometheus.GaugeVec
	expired    prometheus.Counter
	retention  *prometheus.CounterVec
	direct     *prometheus.CounterVec
	refused    prometheus.Counter
	holds      *prometheus.CounterVec
	blocked    *prometheus.GaugeVec
	paused     *prometheus.GaugeVec
	recoveries *prometheus.CounterVec
	// occupancy reads the forwarder's slots, outcome places and waiting
	// claims at scrape time (set by New; nil before).
	occupancy atomic.Pointer[func() occupancy]
}

// NewMetrics registers the delivery metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "whguard_deliveries_total",
			Help: "Delivery attempts by provider and outcome (done, retry, dead); dead also counts an event whose last attempt's lease expired (taken back by the reaper).",
		}, []string{"provider", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "whguard_delivery_duration_seconds",
			Help:    "Duration of one delivery attempt to the backend.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}, []string{"provider"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "whguard_delivery_latency_seconds",
			Help:    "Time from acknowledging a webhook to the end of its successful delivery, by provider (retries included; replays are not counted).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600},
		}, []string{"provider"}),
		events: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "whguard_events",
			Help: "Journaled events by status (refreshed every few seconds).",
		}, []string{"status"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "whguard_oldest_pending_age_seconds",
			Help: "Age of the oldest event not yet delivered (pending, retry or processing), by provider.",
		}, []string{"provider"}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "whguard_lease_expired_total",
			Help: "Leases that expired before their outcome was recorded (worker crash or overrun).",
		}),
	}
	m.retention = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "whguard_retention_deleted_total",
		Help: "Rows removed by retention: kind=event (done events whose keys expired), kind=payload (done payloads dropped early).",
	}, []string{"kind"})
	m.direct = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "whguard_deliveries_dispatched_total",
		Help: "Events claimed at ingest and delivered from memory without a lease statement (the rest are leased from the journal).",
	}, []string{"provider"})
	m.refused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "whguard_outcomes_refused_total",
		Help: "Delivery outcomes the journal refused to store as they were; each was recorded without its reply excerpt.",
	})
	m.holds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "whguard_deliveries_held_total",
		Help: "Deliveries handed back without being attempted (no attempt spent), by provider and reason (no_backend; rate, in_flight, breaker, paused, redis_unavailable: the backend protection).",
	}, []string{"provider", "reason"})
	m.blocked = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "whguard_order_blocked_keys",
		Help: "Order keys held by a dead event (WHGUARD_<NAME>_ORDER_ON_DEAD=block): the events behind each wait until it is replayed or skipped.",
	}, []string{"provider"})
	m.paused = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "whguard_backend_paused",
		Help: "1 while deliveries to the backend are paused (whguard backends pause), else 0.",
	}, []string{"backend"})
	m.recoveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "whguard_backend_recoveries_total",
		Help: "Recoveries of a backend told to this replica, by cause (breaker_closed, resumed, answered: a 2xx after transient failures); each made the backend's events waiting in retry due at once.",
	}, []string{"backend", "cause"})
	read := func(field func(occupancy) int) func() float64 {
		return func() float64 {
			f := m.occupancy.Load()
			if f == nil {
				return 0
			}
			return float64(field((*f)()))
		}
	}
	inFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "whguard_deliveries_in_flight",
		Help: "Deliveries holding a slot: requests to the backends in flight, at most WHGUARD_FORWARD_CONCURRENCY.",
	}, read(func(o occupancy) int { return o.inFlight }))
	recording := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "whguard_outcomes_pending",
		Help: "Finished deliveries whose outcome is still being written; at WHGUARD_FORWARD_CONCURRENCY the database is the bottleneck.",
	}, read(func(o occupancy) int { return o.recording }))
	claimsWaiting := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "whguard_claims_waiting",
		Help: "New events claimed for delivery from memory that hold no delivery slot yet (being committed, or waiting for a slot); at most WHGUARD_FORWARD_CONCURRENCY.",
	}, read(func(o occupancy) int { return o.claimsWaiting }))
	limit := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "whguard_deliveries_limit",
		Help: "The adaptive limit of deliveries in flight (grows while the backend keeps up, halves on its failures), at most WHGUARD_FORWARD_CONCURRENCY.",
	}, read(func(o occupancy) int { return o.limit }))
	reg.MustRegister(m.deliveries, m.duration, m.latency, m.events, m.oldest, m.expired, m.retention, m.direct, m.refused, m.holds, m.blocked, m.paused, m.recoveries, inFlight, recording, claimsWaiting, limit)
	return m
}

// observe makes the occupancy gauges read f.
func (m *Metrics) observe(f func() occupancy) {
	if m == nil {
		return
	}
	m.occupancy.Store(&f)
}

func (m *Metrics) delivery(provider, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(provider, outcome).Inc()
	m.duration.WithLabelValues(provider).Observe(d.Seconds())
}

// holdReasons are the reason label's values of whguard_deliveries_held_total.
var holdReasons = []string{HoldNoBackend, journal.HoldPaused, governor.HoldRate, governor.HoldInFlight, governor.HoldBreaker, governor.HoldUnavailable}

// zero makes the labelled series of each provider and backend exist at 0
// from start-up: a dashboard shows 0 rather than no data, and the first
// increase of a counter counts (rate and increase need a sample before it).
func (m *Metrics) zero(targets map[string]Target, backends []string) {
	if m == nil {
		return
	}
	for p := range targets {
		for _, o := range []string{OutcomeDone, OutcomeRetry, OutcomeDead} {
			m.deliveries.WithLabelValues(p, o)
		}
		for _, r := range holdReasons {
			m.holds.WithLabelValues(p, r)
		}
		m.duration.WithLabelValues(p)
		m.latency.WithLabelValues(p)
		m.direct.WithLabelValues(p)
	}
	for _, b := range backends {
		for _, c := range []string{RecoveryBreakerClosed, RecoveryResumed, RecoveryAnswered} {
			m.recoveries.WithLabelValues(b, c)
		}
	}
}

// delivered observes the acknowledgement-to-delivery latency of one event
// delivered within its first budget of attempts.
func (m *Metrics) delivered(provider string, latency time.Duration) {
	if m == nil {
		return
	}
	m.latency.WithLabelValues(provider).Observe(latency.Seconds())
}

// reapedDead counts an event that went dead because its last attempt's
// lease expired: an attempt whose outcome is dead.
func (m *Metrics) reapedDead(provider string) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(provider, OutcomeDead).Inc()
}

func (m *Metrics) claimed(provider string) {
	if m == nil {
		return
	}
	m.direct.WithLabelValues(provider).Inc()
}

func (m *Metrics) leaseExpired(n int) {
	if m == nil {
		return
	}
	m.expired.Add(float64(n))
}

// setStats sets the journal-wide gauges. Every provider with a target has
// an oldest-pending age, 0 when nothing of it waits, so dashboards show 0
// rather than no data.
func (m *Metrics) setStats(s journal.Stats, targets map[string]Target) {
	if m == nil {
		return
	}
	for _, st := range []journal.Status{journal.StatusPending, journal.StatusProcessing, journal.StatusDone, journal.StatusRetry, journal.StatusDead, journal.StatusIgnored} {
		m.events.WithLabelValues(string(st)).Set(float64(s.ByStatus[st]))
	}
	m.oldest.Reset()
	for p := range targets {
		m.oldest.WithLabelValues(p).Set(0)
	}
	for p, age := range s.OldestUndelivered {
		m.oldest.WithLabelValues(p).Set(age.Seconds())
	}
	m.blocked.Reset()
	for p := range targets {
		m.blocked.WithLabelValues(p).Set(0)
	}
	for p, n := range s.BlockedKeys {
		m.blocked.WithLabelValues(p).Set(float64(n))
	}
}

func (m *Metrics) cleaned(c journal.Cleaned) {
	if m == nil {
		return
	}
	m.retention.WithLabelValues("event").Add(float64(c.Events))
	m.retention.WithLabelValues("payload").Add(float64(c.Payloads))
}

func (m *Metrics) outcomeRefused() {
	if m == nil {
		return
	}
	m.refused.Inc()
}

func (m *Metrics) held(provider, reason string) {
	if m == nil {
		return
	}
	m.holds.WithLabelValues(provider, reason).Inc()
}

// setPaused sets whguard_backend_paused: 0 for each configured backend
// not paused, 1 for each paused one.
func (m *Metrics) setPaused(backends []string, paused map[string]journal.Pause) {
	if m == nil {
		return
	}
	m.paused.Reset()
	for _, b := range backends {
		m.paused.WithLabelValues(b).Set(0)
	}
	for b := range paused {
		m.paused.WithLabelValues(b).Set(1)
	}
}

// recovered counts a recovery of backend.
func (m *Metrics) recovered(backend, cause string) {
	if m == nil {
		return
	}
	m.recoveries.WithLabelValues(backend, cause).Inc()
}
