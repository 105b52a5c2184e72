package forwarder

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"

	"go.uber.org/zap"

	"github.com/whguard/whguard/internal/governor"
	"github.com/whguard/whguard/journal"
)

// noteRefusal follows whether provider's backend refuses whguard (a 401
// or 403: RefusesWhguard): at each refusal the alerts hear of it, and the
// first one after the backend last accepted is logged as a warning; the
// first 2xx after a refusal tells the alerts it accepts again. Other
// answers say nothing either way. The flag is per provider: two providers
// sharing a backend may be signed with different secrets, and one's 2xx
// says nothing of the other's refusals. An atomic flag keeps a delivery
// that succeeds from taking any lock.
func (f *Forwarder) noteRefusal(log *zap.Logger, provider string, status int) {
	origin := f.origins[provider]
	flag := f.refusing[provider]
	if flag == nil {
		return
	}
	switch {
	case RefusesWhguard(status):
		if !flag.Swap(true) {
			log.Warn(RefusalHint+"; its events are retried, not sent dead", zap.Int("status", status))
		}
		if f.cfg.Alerts != nil {
			f.cfg.Alerts.Refuses(origin, provider, status, true)
		}
	case status >= 200 && status < 300 && flag.Load() && flag.CompareAndSwap(true, false):
		log.Info("backend accepts whguard's requests again", zap.Int("status", status))
		if f.cfg.Alerts != nil {
			f.cfg.Alerts.Refuses(origin, provider, status, false)
		}
	}
}

// The backends as GET /api/backends shows them (and the alerts watch
// them): each backend's limits, breaker, pause, requests in flight and
// deliveries waiting.

// backendOrigins lists the configured backends, sorted.
func (f *Forwarder) backendOrigins() []string {
	var out []string
	for _, o := range f.origins {
		if !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	sort.Strings(out)
	return out
}

// BackendStatus is one backend as GET /api/backends shows it.
type BackendStatus struct {
	// Backend is the origin, scheme://host:port.
	Backend   string   `json:"backend"`
	Providers []string `json:"providers"`
	// RateLimit is the backend's limit (e.g. "20/s"), "" when none;
	// ProviderRateLimits the providers' own.
	RateLimit          string            `json:"rate_limit,omitempty"`
	RateBurst          int               `json:"rate_burst,omitempty"`
	ProviderRateLimits map[string]string `json:"provider_rate_limits,omitempty"`
	MaxInFlight        int               `json:"max_in_flight,omitempty"`
	// Breaker is closed, open or half-open ("off" when disabled).
	Breaker string         `json:"breaker"`
	Paused  *journal.Pause `json:"paused,omitempty"`
	// InFlight counts the requests in flight to it, all replicas together
	// when the limits are shared (this process's otherwise).
	InFlight int `json:"in_flight"`
	// Waiting counts its providers' undelivered events; OldestAgeSeconds
	// is the oldest one's age.
	Waiting          int     `json:"waiting"`
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
}

// Backends is GET /api/backends: every backend, and the paused providers.
type Backends struct {
	Backends        []BackendStatus `json:"backends"`
	PausedProviders []journal.Pause `json:"paused_providers"`
	PausedElsewhere []journal.Pause `json:"paused_backends_not_configured,omitempty"`
}

// governorView is what the backends listing reads from a governor that
// has it.
type governorView interface {
	Settings() governor.Config
	BreakerStates() map[string]governor.BreakerState
	InFlight(ctx context.Context, backend string) (int, error)
}

// Backends lists the backends with their limits and state.
func (f *Forwarder) Backends(ctx context.Context) (Backends, error) {
	out := Backends{Backends: []BackendStatus{}, PausedProviders: []journal.Pause{}}
	stats, err := f.cfg.Store.Stats(ctx)
	if err != nil {
		return out, fmt.Errorf("backends: %w", err)
	}
	pauses, err := f.cfg.Store.Pauses(ctx)
	if err != nil {
		return out, fmt.Errorf("backends: %w", err)
	}
	view, _ := f.cfg.Governor.(governorView)
	var settings governor.Config
	var states map[string]governor.BreakerState
	if view != nil {
		settings, states = view.Settings(), view.BreakerStates()
	}
	origins := f.backendOrigins()
	for _, o := range origins {
		b := BackendStatus{Backend: o, Providers: []string{}, Breaker: "off"}
		for p, po := range f.origins {
			if po != o {
				continue
			}
			b.Providers = append(b.Providers, p)
			b.Waiting += stats.Undelivered[p]
			b.OldestAgeSeconds = max(b.OldestAgeSeconds, stats.OldestUndelivered[p].Seconds())
			if l, ok := settings.Providers[p]; ok && !l.Rate.IsZero() {
				if b.ProviderRateLimits == nil {
					b.ProviderRateLimits = map[string]string{}
				}
				b.ProviderRateLimits[p] = l.Rate.String()
			}
		}
		sort.Strings(b.Providers)
		if view != nil {
			if !settings.Backend.Rate.IsZero() {
				b.RateLimit = settings.Backend.Rate.String()
				b.RateBurst = cmp.Or(settings.Backend.Burst, settings.Backend.Rate.DefaultBurst())
			}
			b.MaxInFlight = settings.MaxInFlight
			if settings.Breaker.Enabled {
				b.Breaker = states[o].String()
			}
			if n, err := view.InFlight(ctx, o); err == nil {
				b.InFlight = n
			}
		}
		if b.InFlight == 0 && b.MaxInFlight == 0 {
			b.InFlight = f.localInFlight(o)
		}
		out.Backends = append(out.Backends, b)
	}
	for _, p := range pauses {
		switch {
		case p.Kind == journal.PauseProvider:
			out.PausedProviders = append(out.PausedProviders, p)
		case slices.Contains(origins, p.Name):
			for i := range out.Backends {
				if out.Backends[i].Backend == p.Name {
					out.Backends[i].Paused = &p
				}
			}
		default:
			out.PausedElsewhere = append(out.PausedElsewhere, p)
		}
	}
	return out, nil
}

// localInFlight counts this process's requests in flight to origin.
func (f *Forwarder) localInFlight(origin string) int {
	if n := f.sending[origin]; n != nil {
		return int(n.Load())
	}
	return 0
}
