package forwarder

import (
	"context"
	"sync"
	"time"

	"github.com/whguard/whguard/journal"
)

// Alerts hears of events that went dead (internal/alert groups them into
// a few messages) and of backends refusing whguard. It must not block.
type Alerts interface {
	Dead(provider, backend, eventID string)
	// Refuses says that backend refuses whguard's requests (refuses: it
	// answered status, 401 or 403, to a delivery of provider), told at
	// each such answer, or that it accepts them again (the first 2xx
	// after a refusal).
	Refuses(backend, provider string, status int, refuses bool)
}

// figureKey names one minute of one provider.
type figureKey struct {
	minute   time.Time
	provider string
}

// figures keeps this replica's delivery figures per minute and provider
// (deliveries, failed attempts, dead events, ack-to-delivery latency) and
// writes them to the journal every FiguresInterval, for the overview. A
// crash loses at most that interval of figures, never an event.
type figures struct {
	mu sync.Mutex
	// rows holds the current and recent minutes; dirty the ones changed
	// since they were last written.
	rows  map[figureKey]*journal.Minute
	dirty map[figureKey]bool
}

func newFigures() *figures {
	return &figures{rows: map[figureKey]*journal.Minute{}, dirty: map[figureKey]bool{}}
}

// observe counts one attempt's outcome at time at; latency is the time
// from acknowledgement to delivery, counted when the outcome is done and
// timed is set (not for a replay).
func (fg *figures) observe(provider, outcome string, at time.Time, latency time.Duration, timed bool) {
	k := figureKey{minute: at.UTC().Truncate(time.Minute), provider: provider}
	fg.mu.Lock()
	defer fg.mu.Unlock()
	m := fg.rows[k]
	if m == nil {
		m = &journal.Minute{Minute: k.minute, Provider: provider}
		fg.rows[k] = m
	}
	switch outcome {
	case OutcomeDone:
		m.Delivered++
		if timed {
			m.ObserveLatency(latency)
		}
	case OutcomeDead:
		m.Failed++
		m.Dead++
	default:
		m.Failed++
	}
	fg.dirty[k] = true
}

// pending copies the rows changed since the last write.
func (fg *figures) pending() []journal.Minute {
	fg.mu.Lock()
	defer fg.mu.Unlock()
	out := make([]journal.Minute, 0, len(fg.dirty))
	for k := range fg.dirty {
		m := *fg.rows[k]
		m.Latency = append([]int64(nil), m.Latency...)
		out = append(out, m)
	}
	return out
}

// written marks ms as written unless they changed again since, and forgets
// minutes older than two minutes before now that are written (no attempt
// finishes in them any more).
func (fg *figures) written(ms []journal.Minute, now time.Time) {
	fg.mu.Lock()
	defer fg.mu.Unlock()
	for _, m := range ms {
		k := figureKey{minute: m.Minute, provider: m.Provider}
		if r := fg.rows[k]; r != nil && r.Delivered == m.Delivered && r.Failed == m.Failed {
			delete(fg.dirty, k)
		}
	}
	for k := range fg.rows {
		if !fg.dirty[k] && k.minute.Before(now.Add(-2*time.Minute)) {
			delete(fg.rows, k)
		}
	}
}

// recordFigures writes the changed minute figures (a maintainer, and once
// more at Stop).
func (f *Forwarder) recordFigures(ctx context.Context) error {
	ms := f.figures.pending()
	if len(ms) == 0 {
		return nil
	}
	if err := f.cfg.Store.RecordMinutes(ctx, f.cfg.Replica, ms); err != nil {
		return err
	}
	f.figures.written(ms, f.cfg.Now())
	return nil
}
