package rotation

import "github.com/prometheus/client_golang/prometheus"

// Results of whguard_secret_reloads_total.
const (
	// ResultOK: the file held other values, now in use.
	ResultOK = "ok"
	// ResultUnchanged: the file changed but holds the same values (a
	// Secret synced again, a line ending changed).
	ResultUnchanged = "unchanged"
	// ResultError: the file could not be read, or its values were refused
	// (none, a placeholder, not in the scheme's format): the previous
	// values stay in use.
	ResultError = "error"
)

// Metrics counts the reloads.
type Metrics struct {
	reloads *prometheus.CounterVec
}

// NewMetrics registers the reload metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "whguard_secret_reloads_total",
		Help: "Reloads of watched secret and key files (_SECRET_FILE, _PUBLIC_KEY_FILE, _BACKEND_SECRET_FILE) by provider and result: ok (new values in use), unchanged (the file changed, its values did not), error (unreadable or refused: the previous values stay).",
	}, []string{"provider", "result"})}
	reg.MustRegister(m.reloads)
	return m
}

// init makes provider's counters exist at 0, so that an alert on errors
// has a series before the first one.
func (m *Metrics) init(provider string) {
	if m == nil {
		return
	}
	for _, r := range []string{ResultOK, ResultUnchanged, ResultError} {
		m.reloads.WithLabelValues(provider, r)
	}
}

func (m *Metrics) count(provider, result string) {
	if m != nil {
		m.reloads.WithLabelValues(provider, result).Inc()
	}
}
