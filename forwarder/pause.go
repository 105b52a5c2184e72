package forwarder

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"go.uber.org/zap"

	"github.com/whguard/whguard/internal/governor"
	"github.com/whguard/whguard/journal"
)

// Pauses are kept in the journal, so that they survive restarts and every
// replica sees them: each reads them every PauseInterval (1 s, so a pause
// made on one replica stops all of them within 2 s), and at once after a
// pause or resume made through it. A paused delivery is held for
// PauseHold (reason paused, no attempt spent); Resume makes such holds due
// at once, so the hold can be long without delaying the resume.

// Defaults of the pause settings.
const (
	DefaultPauseInterval = time.Second
	DefaultPauseHold     = 30 * time.Second
)

// pauseSet is the pauses in force, as last read.
type pauseSet struct {
	backends  map[string]journal.Pause
	providers map[string]journal.Pause
}

// pausedFor reports the pause that holds a delivery of provider, if any:
// the provider's own, else its backend's.
func (f *Forwarder) pausedFor(provider string) (journal.Pause, bool) {
	ps := f.pauses.Load()
	if ps == nil {
		return journal.Pause{}, false
	}
	if p, ok := ps.providers[provider]; ok {
		return p, true
	}
	p, ok := ps.backends[f.origins[provider]]
	return p, ok
}

// pausesKnown reports whether the pauses have been read since the start,
// reading them when they have not (the fetcher's first lease waits for
// them: a pause holds from the first moment).
func (f *Forwarder) pausesKnown() bool {
	if f.pauses.Load() != nil {
		return true
	}
	ctx, cancel := context.WithTimeout(f.aborted, f.cfg.PauseInterval+time.Second)
	defer cancel()
	if err := f.refreshPauses(ctx); err != nil {
		f.log.Warn("pauses not read; nothing is delivered until they are", zap.Error(err))
		return false
	}
	return true
}

// refreshPauses reads the pauses from the journal.
func (f *Forwarder) refreshPauses(ctx context.Context) error {
	list, err := f.cfg.Store.Pauses(ctx)
	if err != nil {
		return fmt.Errorf("read pauses: %w", err)
	}
	ps := &pauseSet{backends: map[string]journal.Pause{}, providers: map[string]journal.Pause{}}
	for _, p := range list {
		if p.Kind == journal.PauseBackend {
			ps.backends[p.Name] = p
		} else {
			ps.providers[p.Name] = p
		}
	}
	old := f.pauses.Swap(ps)
	f.cfg.Metrics.setPaused(f.backendOrigins(), ps.backends)
	if old == nil {
		return nil
	}
	// A pause lifted elsewhere: this replica may have held deliveries
	// for it after the resume made them due, while it did not know yet
	// (up to PauseInterval). Resuming again ends nothing more but makes
	// those holds due now.
	var lifted []journal.Pause
	for n, p := range old.backends {
		if _, ok := ps.backends[n]; !ok {
			lifted = append(lifted, p)
		}
	}
	for n, p := range old.providers {
		if _, ok := ps.providers[n]; !ok {
			lifted = append(lifted, p)
		}
	}
	for _, p := range lifted {
		if _, err := f.cfg.Store.Resume(ctx, p.Kind, p.Name); err != nil {
			return fmt.Errorf("wake deliveries of a lifted pause: %w", err)
		}
	}
	if len(lifted) > 0 {
		f.Wake()
	}
	return nil
}

// Pause pauses a backend (an origin, scheme://host:port) or a provider,
// here at once and on every replica within PauseInterval.
func (f *Forwarder) Pause(ctx context.Context, p journal.Pause) (journal.Pause, error) {
	stored, err := f.cfg.Store.Pause(ctx, p)
	if err != nil {
		return stored, err
	}
	if err := f.refreshPauses(ctx); err != nil {
		f.log.Warn("pause stored; this replica sees it at its next read", zap.Error(err))
	}
	return stored, nil
}

// Resume ends a pause and wakes the fetcher for the deliveries it held.
// reason is for the caller's audit log.
func (f *Forwarder) Resume(ctx context.Context, kind, name, _ string) (bool, error) {
	found, err := f.cfg.Store.Resume(ctx, kind, name)
	if err != nil {
		return false, err
	}
	if err := f.refreshPauses(ctx); err != nil {
		f.log.Warn("resume stored; this replica sees it at its next read", zap.Error(err))
	}
	f.Wake()
	return found, nil
}

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
				b.RateBurst = cmpOr(settings.Backend.Burst, settings.Backend.Rate.DefaultBurst())
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

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// localInFlight counts this process's requests in flight to origin.
func (f *Forwarder) localInFlight(origin string) int {
	if n := f.sending[origin]; n != nil {
		return int(n.Load())
	}
	return 0
}
