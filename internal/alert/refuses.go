package alert

import "fmt"

// refusesKey is the condition key of a backend refusing whguard.
const refusesKey = "refuses "

// Refuses says whether backend refuses whguard's requests: it answered
// status (401 or 403) to a delivery of provider, which means its webhook
// secret is not the one whguard signs with (or an auth layer in front of
// it turns whguard away), not that the event is wrong. It is a condition
// of the backend and provider (two providers sharing a backend may be
// signed with different secrets): reported once when it starts, every
// Repeat while it lasts (Set is called at each refusal), and once when the
// backend accepts that provider's deliveries again (refuses false, at the
// first 2xx after).
func (n *Notifier) Refuses(backend, provider string, status int, refuses bool) {
	n.Set(refusesKey+backend+" "+provider, refuses,
		Message{Type: TypeBackendRefuses, Severity: SeverityCritical, Backend: backend, Provider: provider,
			Summary: fmt.Sprintf("Backend %s refuses whguard's requests: check its webhook secret. It answered %d to a delivery of %s; "+
				"its events are retried (and held while its breaker is open), not sent dead.", backend, status, provider)},
		Message{Type: TypeBackendAccepts, Backend: backend, Provider: provider,
			Summary: fmt.Sprintf("Backend %s accepts whguard's requests again (deliveries of %s).", backend, provider)})
}
