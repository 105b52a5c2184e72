package proxy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/verify"
)

// Metrics holds the ingress metrics (docs/operations.md, "Metrics"). A nil
// *Metrics records nothing.
type Metrics struct {
	requests    *prometheus.CounterVec
	refusals    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	batchSize   prometheus.Histogram
	commitTime  prometheus.Histogram
	commitFails prometheus.Counter
	ignored     *prometheus.CounterVec
	sync        *prometheus.CounterVec
}

// NewMetrics registers the ingress metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "whguard_ingress_requests_total",
			Help: "Webhook requests received, by provider and result (accepted, duplicate, conflict, unauthorized, too_large, bad_request, unavailable, not_found, method_not_allowed, handshake).",
		}, []string{"provider", "result"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "whguard_ingress_refusals_total",
			Help: "Webhook requests refused by verification (401, 400, 403 and 503), by provider, reason (missing_header, malformed_header, timestamp_outside_tolerance, signature_mismatch, malformed_body, invalid_event_id, unsupported_event, challenge_refused, untrusted_key_url, key_unavailable, sender_not_allowed) and diagnosis (wrong_path, wrong_scheme, encoding_hex, encoding_base64, timestamp_ms, clock_skew, body_reserialized, url_mismatch, none).",
		}, []string{"provider", "reason", "diagnosis"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "whguard_ingress_duration_seconds",
			Help:    "Time from receiving a webhook to answering it, commit included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"provider"}),
	}
	m.batchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "whguard_journal_commit_events",
		Help:    "Events per ingest commit (group commit: requests arriving during a commit share the next).",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 100},
	})
	m.commitTime = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "whguard_journal_commit_duration_seconds",
		Help:    "Duration of one ingest commit.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
	})
	m.commitFails = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "whguard_journal_commit_failures_total",
		Help: "Ingest commits that failed (their requests were answered 503).",
	})
	m.ignored = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "whguard_events_ignored_total",
		Help: "New events journaled as ignored (their type matched none of the provider's WHGUARD_<NAME>_EVENT_TYPES), by provider; they are also counted as accepted requests.",
	}, []string{"provider"})
	m.sync = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "whguard_sync_replies_total",
		Help: "Sync-mode answers, by provider and outcome: replied (the backend's stored answer), stored (a duplicate given the stored answer), timeout, no_reply (no storable 2xx: a failure, a hold, a body over 64 KiB), not_claimed (no delivery slot at once); all but the first two got the usual 202 body.",
	}, []string{"provider", "outcome"})
	reg.MustRegister(m.requests, m.refusals, m.duration, m.batchSize, m.commitTime, m.commitFails, m.ignored, m.sync)
	return m
}

// results are the result label's values of whguard_ingress_requests_total
// that a provider's path can give (not_found has no provider).
var results = []string{ResultAccepted, ResultDuplicate, ResultConflict, ResultReplay, ResultUnauthorized, ResultTooLarge,
	ResultBadRequest, ResultUnavailable, ResultMethodNotAllowed, ResultHandshake}

// refusalReasons are the reason label's values of
// whguard_ingress_refusals_total.
var refusalReasons = []string{verify.ReasonMissingHeader, verify.ReasonMalformedHeader, verify.ReasonTimestampOutsideTolerance,
	verify.ReasonSignatureMismatch, verify.ReasonMalformedBody, verify.ReasonInvalidEventID, verify.ReasonUnsupportedEvent,
	verify.ReasonChallengeRefused, verify.ReasonKeyUnavailable, verify.ReasonUntrustedKeyURL, verify.ReasonNotAllowed, verify.ReasonOther}

// Zero makes the labelled series of each provider exist at 0 from
// start-up (and not_found's, which has no provider): a dashboard shows 0
// rather than no data, and the first increase of a counter counts.
func (m *Metrics) Zero(providers []string) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues("", ResultNotFound)
	for _, p := range providers {
		for _, r := range results {
			m.requests.WithLabelValues(p, r)
		}
		for _, r := range refusalReasons {
			// diagnosis="none" only: every reason × diagnosis would be
			// hundreds of series per provider, and the rules sum it away.
			m.refusals.WithLabelValues(p, r, verify.DiagnosisNone)
		}
		m.duration.WithLabelValues(p)
		m.ignored.WithLabelValues(p)
	}
}

// ObserveCommit records one ingest commit; pass it to the group committer.
func (m *Metrics) ObserveCommit(events int, took time.Duration, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.commitFails.Inc()
		return
	}
	m.batchSize.Observe(float64(events))
	m.commitTime.Observe(took.Seconds())
}

// observeIgnored counts one new event journaled as ignored.
func (m *Metrics) observeIgnored(provider string) {
	if m == nil {
		return
	}
	m.ignored.WithLabelValues(provider).Inc()
}

// observeRefusal counts one request refused by verification; reason is one
// of verify's reason codes and diagnosis one of its diagnosis codes (small
// fixed sets).
func (m *Metrics) observeRefusal(provider, reason, diagnosis string) {
	if m == nil {
		return
	}
	m.refusals.WithLabelValues(provider, reason, diagnosis).Inc()
}

func (m *Metrics) observeIngress(provider, result string, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(provider, result).Inc()
	m.duration.WithLabelValues(provider).Observe(d.Seconds())
}

// Outcomes of a sync-mode request, the outcome label of
// whguard_sync_replies_total.
const (
	syncReplied    = "replied"
	syncStored     = "stored"
	syncTimeout    = "timeout"
	syncNoReply    = "no_reply"
	syncNotClaimed = "not_claimed"
)

func (m *Metrics) observeSync(provider, outcome string) {
	if m == nil {
		return
	}
	m.sync.WithLabelValues(provider, outcome).Inc()
}
