package forwarder

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/whguard/whguard/internal/governor"
	"github.com/whguard/whguard/journal"
)

// job is one delivery on its way through the pool: the leased row, when
// its outcome must be recorded by (a second before its lease ends), and
// whether it came from Claim (else the fetcher leased it).
type job struct {
	d        journal.Delivery
	recordBy time.Time
	claimed  bool
	// pre is the governor's answer given when the row was leased with
	// others (govern.go, preAdmit); nil: ask when the attempt starts.
	pre *governor.Decision
	// answer, when set, receives the stored reply of a sync delivery, or
	// nil; it is buffered and answered once (see respond).
	answer chan *journal.Reply
}

// respond gives the waiting sender its answer (a stored reply or nil). The
// first call wins; later ones (the deferred nil) are dropped.
func (j *job) respond(r *journal.Reply) {
	if j.answer == nil {
		return
	}
	select {
	case j.answer <- r:
	default:
	}
	j.answer = nil
}

// Reasons a delivery is held without being attempted (Summary.Held, and
// the reason label of whguard_deliveries_held_total); the governor adds
// its own (internal/governor: rate, in_flight, breaker, redis_unavailable).
const (
	// HoldNoBackend: no backend is configured for the event's provider.
	HoldNoBackend = "no_backend"
)

// hold hands d's lease back without spending its attempt, due again after
// wait, and counts why unless the hold was already counted.
func (f *Forwarder) hold(d journal.Delivery, wait time.Duration, reason string, count bool) {
	ctx, cancel := f.handBackContext()
	defer cancel()
	if count {
		f.cfg.Metrics.held(d.Provider, reason)
	}
	if wait < f.cfg.PollInterval {
		// Due before the next poll: look for it when it is due.
		defer time.AfterFunc(wait, f.Wake)
	}
	f.log.Debug("delivery held", zap.Int64("id", d.ID), zap.String("provider", d.Provider), zap.String("reason", reason))
	if _, err := f.cfg.Store.Hold(ctx, []journal.Hold{{ID: d.ID, LeaseToken: d.LeaseToken, For: wait, Reason: reason}}); err != nil {
		f.log.Warn("hold delivery failed; the reaper will return it", zap.Int64("id", d.ID), zap.Error(err))
	}
}

// release hands a leased row back to the journal without spending its
// attempt: it is leased again, here or by another replica. The reaper
// returns it if this fails.
func (f *Forwarder) release(d journal.Delivery) {
	ctx, cancel := f.handBackContext()
	defer cancel()
	if _, err := f.cfg.Store.Release(ctx, []int64{d.ID}, []uuid.UUID{d.LeaseToken}); err != nil {
		f.log.Warn("release lease failed; the reaper will return it", zap.Int64("id", d.ID), zap.Error(err))
	}
}

// handBackContext bounds handing a lease back: releaseTimeout, or only
// handBackTimeout once the shutdown deadline has passed (the stop must
// end; a lease not handed back expires and the reaper returns the row).
func (f *Forwarder) handBackContext() (context.Context, context.CancelFunc) {
	if f.aborted.Err() != nil {
		return context.WithTimeout(context.Background(), handBackTimeout)
	}
	return context.WithTimeout(context.Background(), releaseTimeout)
}

// deliver runs one attempt of j, which holds a slot, and records its
// outcome by j.recordBy.
func (f *Forwarder) deliver(j job) {
	defer j.respond(nil) // every way out that stored no reply
	d := j.d
	target, ok := f.cfg.Targets[d.Provider]
	// Lazily: the fields are encoded only if something is logged (With
	// encoded them for every delivery: 1.3 % of whguard's CPU).
	log := f.log.WithLazy(zap.Int64("id", d.ID), zap.String("provider", d.Provider),
		zap.String("event_id", d.EventID), zap.Int("attempt", d.Attempt), zap.String("backend", f.origins[d.Provider]))
	if !ok {
		// Journaled before its provider was removed or renamed in the
		// configuration: not an attempt. The event waits in the journal,
		// shown as held, and goes out once a replica has a target for it.
		defer f.freeSlot()
		f.hold(d, f.cfg.NoBackendHold, HoldNoBackend, true)
		return
	}
	if p, paused := f.pausedFor(d.Provider); paused {
		// Not an attempt: held until the pause ends (Resume makes it due).
		defer f.freeSlot()
		f.unadmitPre(j)
		log.Debug("delivery paused", zap.String("pause", p.Kind+" "+p.Name))
		f.hold(d, f.cfg.PauseHold, journal.HoldPaused, true)
		f.unholdIfLifted(d.Provider, p)
		return
	}
	ask, ok := f.admit(j)
	if !ok {
		return // held, or interrupted; the slot is free
	}
	sending := f.sending[f.origins[d.Provider]]
	sending.Add(1)
	ctx, span := f.startAttempt(d, target)
	res := send(ctx, f.cfg.Client, target, d, f.cfg.Timeout, f.cfg.Now, target.Sync)
	sending.Add(-1)
	endAttempt(span, res)
	if f.aborted.Err() == nil {
		// The backend's answer (or its failure to answer) tunes the limit
		// of deliveries in flight; before this one's slot is handed over,
		// so a shrinking limit can keep it.
		if limit, changed := f.limit.observe(f.cfg.Now(), res.duration, overloaded(res.status), f.adm.snapshot().inFlight); changed {
			f.pokeIf(f.adm.setLimit(limit))
		}
	}
	if f.aborted.Err() != nil && res.status == 0 {
		// Interrupted by shutdown, not by the backend: hand the lease back
		// without spending the attempt.
		f.unadmit(ask, false, 0)
		defer f.freeSlot()
		f.release(d)
		return
	}
	dec := f.cfg.Policy.Decide(d.BudgetAttempt, res.status, res.retryAfter, f.cfg.Now(), f.cfg.Rand)
	fin := journal.Finish{
		ID: d.ID, LeaseToken: d.LeaseToken, Status: journal.Status(dec.Outcome),
		Attempt: res.attempt(d.Attempt),
	}
	if dec.Outcome == OutcomeRetry {
		fin.RetryIn = dec.Delay
	}
	if dec.Outcome != OutcomeDone {
		fin.LastError = dec.Reason
		if res.errClass != "" {
			fin.LastError += " (" + res.errClass + ")"
		}
		if res.location != "" {
			// Redirects are not followed: say where to, so the cause shows
			// (often an HTTPS redirect or a host check: see docs/backend.md,
			// "What your backend receives").
			fin.LastError += " (redirect to " + res.location + ")"
		}
	}
	f.cfg.Metrics.delivery(d.Provider, dec.Outcome, res.duration)
	now := f.cfg.Now()
	// A replayed event (its attempts count on from an earlier budget) was
	// received long ago: its age is no acknowledgement-to-delivery latency.
	f.figures.observe(d.Provider, dec.Outcome, now, now.Sub(d.ReceivedAt), d.Attempt == d.BudgetAttempt)
	if dec.Outcome == OutcomeDone && d.Attempt == d.BudgetAttempt {
		f.cfg.Metrics.delivered(d.Provider, now.Sub(d.ReceivedAt))
	}
	if dec.Outcome == OutcomeDead && f.cfg.Alerts != nil {
		f.cfg.Alerts.Dead(d.Provider, f.origins[d.Provider], d.EventID)
	}
	f.noteRefusal(log, d.Provider, res.status)
	f.toRecord()
	defer f.recorded()
	// After the slot is handed over: the next delivery starts while the
	// governor's slot goes back (a batched Redis call) and the outcome is
	// written.
	f.unadmit(ask, true, res.status)
	f.answered(f.origins[d.Provider], res.status)
	switch dec.Outcome {
	case OutcomeDone:
		log.Debug("delivered", zap.Int("status", res.status), zap.Duration("took", res.duration))
	case OutcomeRetry:
		log.Info("delivery failed; will retry", zap.Int("status", res.status), zap.String("error", res.errClass), zap.Duration("in", dec.Delay))
	case OutcomeDead:
		log.Warn("delivery quarantined (dead)", zap.Int("status", res.status), zap.String("reason", dec.Reason))
	}
	if dec.Outcome == OutcomeDone && target.Sync {
		f.storeReply(log, &j, res)
	}
	f.finish(log, j, fin)
	if d.OrderKey != "" && dec.Outcome != OutcomeRetry {
		// Done, or dead: the next event of its key may be ready now (any
		// replica may lease it; this one knows first). It is announced;
		// but while the fetcher waits for freed slots, they already wake
		// it a quarter at a time, and it finds the next in line then: a
		// wake per outcome would make it lease one row per statement.
		f.pokeIf(f.adm.announceNext())
	}
	if dec.Outcome == OutcomeRetry && dec.Delay < f.cfg.PollInterval {
		// Due before the next poll: look for it when it is due, counted
		// from now that the due time (now + delay, database clock) is set.
		time.AfterFunc(dec.Delay, f.Wake)
	}
}

// storeReply stores a sync event's 2xx answer with the event and only then
// hands it to the sender waiting for it: whatever a sender was answered,
// its duplicates get too. An answer too large to store, or one the journal
// could not store, answers nothing (the sender gets the usual 202); the
// delivery itself is done either way.
func (f *Forwarder) storeReply(log *zap.Logger, j *job, res sendResult) {
	if res.replyTooLarge {
		log.Info("sync reply larger than the stored maximum; the sender gets the usual acknowledgement",
			zap.Int("max_bytes", journal.MaxReplyBytes))
		return
	}
	if f.replies == nil {
		return
	}
	r, err := journal.Reply{Status: res.status, ContentType: res.contentType, Body: res.body}.Storable()
	stored := false
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
		stored, err = f.replies.SaveReply(ctx, j.d.ID, j.d.LeaseToken, r)
		cancel()
	}
	switch {
	case errors.Is(err, journal.ErrReplyNotStorable):
		log.Info("sync reply's Content-Type is too long to store; the sender gets the usual acknowledgement",
			zap.Int("max_bytes", journal.MaxReplyContentTypeBytes))
	case err != nil:
		log.Warn("store sync reply failed; the sender gets the usual acknowledgement", zap.Error(err))
	case stored:
		j.respond(&r)
	}
	// Not stored and no error: a reply is stored already (a replay), or
	// the lease was lost; nobody is answered with this one.
}

// finish records the outcome, retrying a failing database until recordBy
// (shortly before the lease expires): a recorded outcome avoids a repeat
// delivery of a done event and keeps a dead one quarantined.
func (f *Forwarder) finish(log *zap.Logger, j job, fin journal.Finish) {
	fin.ID, fin.LeaseToken = j.d.ID, j.d.LeaseToken
	pause := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
		landed, err := f.complete.Do(ctx, []journal.Finish{fin})
		cancel()
		switch {
		case err == nil && !landed[0]:
			log.Warn("lease lost before the outcome was recorded (expired and taken over)")
			return
		case err == nil:
			return
		case f.cfg.Now().Add(pause).After(j.recordBy), f.aborted.Err() != nil:
			// Out of lease time, or past the shutdown deadline: stop trying.
			// The lease will expire and the reaper returns the row: a
			// repeat delivery, never a loss.
			log.Error("record outcome failed; the event will be delivered again", zap.Error(err))
			return
		}
		log.Warn("record outcome failed; retrying", zap.Error(err), zap.Duration("in", pause))
		select {
		case <-time.After(pause):
		case <-f.aborted.Done():
		}
		pause = min(pause*2, 2*time.Second)
	}
}

// writeOutcomes records a batch of outcomes and says which took effect. A
// batch the store fails is written again row by row, so one bad row cannot
// fail the others (a reply excerpt the database refused once failed whole
// batches, and every event in them was delivered again and again). A row
// that fails alone is written once more without its texts (reply excerpt,
// error), logged and counted (whguard_outcomes_refused_total), so its event
// is not delivered again over a value the database will not take. When even
// that fails, the database itself is failing: the error goes back to the
// callers, which retry while their lease lasts.
func (f *Forwarder) writeOutcomes(ctx context.Context, fs []journal.Finish) ([]bool, error) {
	ids, err := f.cfg.Store.Complete(ctx, fs)
	if err == nil {
		return landedIn(fs, ids), nil
	}
	if ctx.Err() != nil {
		return nil, err
	}
	out := make([]bool, len(fs))
	for i, fin := range fs {
		if len(fs) > 1 {
			if ids, err = f.cfg.Store.Complete(ctx, fs[i:i+1]); err == nil {
				out[i] = len(ids) == 1
				continue
			}
		}
		bare := fin
		bare.Attempt.ResponseExcerpt, bare.Attempt.Error = "", "unrecordable"
		bare.LastError = "the journal refused this attempt's record; its reply excerpt was dropped"
		ids, err2 := f.cfg.Store.Complete(ctx, []journal.Finish{bare})
		if err2 != nil {
			return nil, fmt.Errorf("record outcome of event %d: %w", fin.ID, errors.Join(err, err2))
		}
		f.log.Error("journal refused an outcome; recorded it without its reply excerpt",
			zap.Int64("id", fin.ID), zap.String("status", string(fin.Status)), zap.Error(err))
		f.cfg.Metrics.outcomeRefused()
		out[i] = len(ids) == 1
	}
	return out, nil
}

// landedIn marks which outcomes of fs are among the recorded ids.
func landedIn(fs []journal.Finish, ids []int64) []bool {
	landed := make(map[int64]bool, len(ids))
	for _, id := range ids {
		landed[id] = true
	}
	out := make([]bool, len(fs))
	for i, f := range fs {
		out[i] = landed[f.ID]
	}
	return out
}
