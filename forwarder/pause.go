package forwarder

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

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
	f.pausesMu.Lock()
	defer f.pausesMu.Unlock()
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
	// (up to PauseInterval): make those holds due now (without ending a
	// pause: one set again meanwhile stays).
	lifted := false
	for n := range old.backends {
		_, ok := ps.backends[n]
		lifted = lifted || !ok
	}
	for n := range old.providers {
		_, ok := ps.providers[n]
		lifted = lifted || !ok
	}
	if !lifted {
		return nil
	}
	if err := f.cfg.Store.WakePaused(ctx); err != nil {
		return fmt.Errorf("wake deliveries of a lifted pause: %w", err)
	}
	f.Wake()
	return nil
}

// unholdIfLifted makes due again what a hold for pause p just held, when
// this replica has learnt meanwhile that p was lifted: the hold was
// decided before, and may have been written after the resume's wake-up
// (refreshPauses wakes a lifted pause's holds once, when it learns of
// it). Called after the hold is written, it covers every order of the
// two.
func (f *Forwarder) unholdIfLifted(provider string, p journal.Pause) {
	if now, paused := f.pausedFor(provider); paused && now.Kind == p.Kind && now.Name == p.Name {
		return
	}
	ctx, cancel := f.handBackContext()
	defer cancel()
	if err := f.cfg.Store.WakePaused(ctx); err != nil {
		f.log.Warn("wake deliveries of a lifted pause failed; they are due after their hold", zap.Error(err))
		return
	}
	f.Wake()
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
// A pause that was there is a recovery (recover.go): the events of the
// resumed backend or provider waiting in retry are due now too, unless
// another pause still holds them. reason is for the caller's audit log.
func (f *Forwarder) Resume(ctx context.Context, kind, name, _ string) (bool, error) {
	found, err := f.cfg.Store.Resume(ctx, kind, name)
	if err != nil {
		return false, err
	}
	if err := f.refreshPauses(ctx); err != nil {
		f.log.Warn("resume stored; this replica sees it at its next read", zap.Error(err))
	}
	if found {
		origin, providers := name, []string(nil)
		if kind == journal.PauseBackend {
			providers = f.providersOf(name)
		} else if o, ok := f.origins[name]; ok {
			if _, paused := f.pausedFor(name); !paused {
				origin, providers = o, []string{name}
			}
		}
		f.recoverProviders(ctx, origin, RecoveryResumed, providers)
	}
	f.Wake()
	return found, nil
}
