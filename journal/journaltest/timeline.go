package journaltest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/whguard/whguard/journal"
)

// An event's whole story (Detail.Timeline): its receipts, holds, attempts
// with the headers they sent, replays, skips and retries, in time order,
// the same on every store.

// StoryResends is how many times Story's sender resent its event.
const StoryResends = 3

// StorySignature is the signature Story's first attempt sent in place of
// the received one (a delivery re-signed for the backend).
const StorySignature = "v1,re-signed-for-the-backend"

// Clock is a clock a test moves by hand: Story's, and the store's (an
// embedded journal opened with its Now).
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock is a Clock reading at.
func NewClock(at time.Time) *Clock { return &Clock{now: at} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Story journals an event of provider "shop" the way whguard records one
// that was held by the backend's breaker, resent by its sender
// StoryResends times meanwhile (answered 200), failed twice (503; the
// second time dead) and was then replayed, and returns its row id. Its
// headers hold an Authorization credential and the X-Forwarded-For whguard
// adds (not received).
//
// With a nil clock the story happens at once, on real time: the store's
// clock times the holds and the replay, the test's the rest (one clock:
// the database runs beside the test), so its order is its time order on
// every store. With a Clock, which must then be the store's too, it takes
// the time a real one does: the holds last minutes, the replay comes two
// hours after the last failure.
func Story(t *testing.T, s journal.Store, clock *Clock) int64 {
	t.Helper()
	ctx := context.Background()
	now, pace := time.Now, func(time.Duration) {}
	if clock != nil {
		now, pace = clock.Now, clock.Advance
	}
	e := Event("shop", "evt_story", "h-story")
	e.EventType, e.Body = "order.paid", []byte(`{"type":"order.paid","data":{"order_id":"ord_1042","amount":4200}}`)
	e.Headers = http.Header{"Webhook-Id": {"evt_story"}, "Webhook-Signature": {"v1,from-the-sender"},
		"Authorization": {"Bearer sender-credential"}, "X-Forwarded-For": {"203.0.113.7"}, "Content-Type": {"application/json"}}
	e.AsReceived = http.Header{"X-Forwarded-For": {}}
	e.Answer = http.StatusAccepted
	e.ReceivedAt = now()
	id := AppendOne(t, s, e).ID
	lease := func() journal.Delivery {
		t.Helper()
		ds := LeaseAll(t, s, time.Minute)
		if len(ds) != 1 || ds[0].ID != id {
			t.Fatalf("leased %+v, want event %d", ds, id)
		}
		return ds[0]
	}
	hold := func(d journal.Delivery) {
		t.Helper()
		if n, err := s.Hold(ctx, []journal.Hold{{ID: d.ID, LeaseToken: d.LeaseToken, Reason: "breaker"}}); err != nil || n != 1 {
			t.Fatalf("hold: %d %v", n, err)
		}
	}
	fail := func(st journal.Status, sent journal.HeaderDelta) {
		t.Helper()
		f := Finish(lease(), st, http.StatusServiceUnavailable)
		f.Attempt.StartedAt, f.Attempt.Sent = now(), sent
		if n, err := CompleteN(s, []journal.Finish{f}); err != nil || n != 1 {
			t.Fatalf("failure (%s): %d %v", st, n, err)
		}
	}
	// Held twice for the breaker: one hold, going on.
	pace(200 * time.Millisecond)
	hold(lease())
	pace(10 * time.Second)
	hold(lease())
	for i := range StoryResends {
		pace(time.Duration(30<<i) * time.Second)
		if err := s.RecordReceipts(ctx, []journal.Receipt{{ID: id, At: now(), Answer: http.StatusOK}}); err != nil {
			t.Fatal(err)
		}
	}
	pace(47 * time.Second)
	fail(journal.StatusRetry, journal.HeaderDelta{Set: http.Header{"Webhook-Signature": {StorySignature}}})
	pace(36 * time.Second)
	fail(journal.StatusDead, journal.HeaderDelta{})
	pace(2 * time.Hour)
	if err := s.Replay(ctx, id, "backend fixed"); err != nil {
		t.Fatal(err)
	}
	return id
}

// StoryKinds are the kinds of Story's timeline entries, in order.
var StoryKinds = []string{journal.TimelineReceived, journal.TimelineHold,
	journal.TimelineDuplicate, journal.TimelineDuplicate, journal.TimelineDuplicate,
	journal.TimelineAttempt, journal.TimelineAttempt, journal.ActionReplay}

// CheckStory fails the test unless tl is Story's timeline, as the journal
// records it.
func CheckStory(t *testing.T, tl []journal.TimelineEntry) {
	t.Helper()
	kinds := make([]string, len(tl))
	for i, e := range tl {
		kinds[i] = e.Kind
	}
	if !slices.Equal(kinds, StoryKinds) {
		t.Fatalf("timeline %v, want %v:\n%s", kinds, StoryKinds, describe(tl))
	}
	recv, hold, first, second, replay := tl[0], tl[1], tl[5], tl[6], tl[7]
	if recv.Answer != http.StatusAccepted || recv.Duplicates != StoryResends || recv.Source != journal.SourceWebhook {
		t.Errorf("received: %+v, want answered 202, %d duplicates, from the webhook", recv, StoryResends)
	}
	if hold.Reason != "breaker" || hold.From == nil || hold.Until == nil || !hold.Until.Equal(first.At) {
		t.Errorf("hold: %+v, want the breaker's, until the first attempt at %s", hold, first.At)
	}
	for i, dup := range tl[2:5] {
		if dup.Number != i+1 || dup.Answer != http.StatusOK {
			t.Errorf("duplicate %d: %+v, want number %d answered 200", i, dup, i+1)
		}
	}
	if first.Number != 1 || first.StatusCode != http.StatusServiceUnavailable || first.DurationMS == nil ||
		first.Sent.Set.Get("Webhook-Signature") != StorySignature {
		t.Errorf("first attempt: %+v, want 503 with its re-signed signature", first)
	}
	if second.Number != 2 || second.StatusCode != http.StatusServiceUnavailable || !second.Sent.IsZero() {
		t.Errorf("second attempt: %+v, want 503 sending what the journaled headers give", second)
	}
	if replay.Reason != "backend fixed" || replay.FromStatus != journal.StatusDead {
		t.Errorf("replay: %+v, want from dead, with its reason", replay)
	}
}

// describe lists a timeline for a failure message.
func describe(tl []journal.TimelineEntry) string {
	s := ""
	for _, e := range tl {
		s += fmt.Sprintf("  %s %s %+v\n", e.At.Format(time.RFC3339Nano), e.Kind, e)
	}
	return s
}

func testTimelineStory(t *testing.T, s journal.Store) {
	id := Story(t, s, nil)
	d := Get(t, s, id)
	CheckStory(t, d.Timeline)
	// Received as it came: without the X-Forwarded-For whguard set; the
	// journaled headers, which are forwarded, keep it.
	if d.ReceivedHeaders.Get("X-Forwarded-For") != "" || d.ReceivedHeaders.Get("Webhook-Signature") != "v1,from-the-sender" ||
		d.Headers.Get("X-Forwarded-For") != "203.0.113.7" {
		t.Errorf("received headers %v, journaled %v", d.ReceivedHeaders, d.Headers)
	}
	ls := LeaseAll(t, s, time.Minute) // the replay made it due
	if len(ls) != 1 || ls[0].Headers.Get("X-Forwarded-For") != "203.0.113.7" || len(ls[0].Headers) != len(d.Headers) {
		t.Errorf("leased %+v, want the journaled headers %v", ls, d.Headers)
	}
}

// testTimelineReceiptsKeepTheLatest: every duplicate counts; the latest
// MaxReceipts are listed, numbered from the first; a sync-mode first
// answer recorded after the append replaces the one recorded with it; an
// event gone records nothing and fails nothing.
func testTimelineReceiptsKeepTheLatest(t *testing.T, s journal.Store) {
	ctx := context.Background()
	id := AppendOne(t, s, Event("p", "dups", "h")).ID
	start := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	other := AppendOne(t, s, Event("p", "dups-other", "h")).ID
	const n = journal.MaxReceipts + 4
	// The first four one by one, the rest in one batch (as ReceiptWriter
	// writes them), newest first and mixed with another event's.
	for i := range 4 {
		r := journal.Receipt{ID: id, At: start.Add(time.Duration(i) * time.Second), Answer: 200 + i}
		if err := s.RecordReceipts(ctx, []journal.Receipt{r}); err != nil {
			t.Fatal(err)
		}
	}
	var batch []journal.Receipt
	for i := n - 1; i >= 4; i-- {
		batch = append(batch, journal.Receipt{ID: id, At: start.Add(time.Duration(i) * time.Second), Answer: 200 + i},
			journal.Receipt{ID: other, At: start.Add(time.Duration(i) * time.Second), Answer: 200})
	}
	if err := s.RecordReceipts(ctx, batch); err != nil {
		t.Fatalf("a batch of receipts: %v", err)
	}
	if tl := Get(t, s, other).Timeline; tl[len(tl)-1].Duplicates != n-4 {
		t.Errorf("the other event's received entry %+v, want %d duplicates", tl[len(tl)-1], n-4)
	}
	if err := s.RecordReceipts(ctx, []journal.Receipt{{ID: id, Answer: 201, First: true}, {ID: id + 1000, At: time.Now(), Answer: 200}}); err != nil {
		t.Fatalf("a first answer, and a duplicate of an event gone: %v", err)
	}
	tl := Get(t, s, id).Timeline
	var dups []journal.TimelineEntry
	for _, e := range tl {
		if e.Kind == journal.TimelineDuplicate {
			dups = append(dups, e)
		}
	}
	if tl[len(tl)-1].Kind != journal.TimelineReceived || tl[len(tl)-1].Duplicates != n || tl[len(tl)-1].Answer != 201 {
		t.Fatalf("received entry %+v (last: the duplicates were an hour earlier), want %d duplicates, answered 201", tl[len(tl)-1], n)
	}
	if len(dups) != journal.MaxReceipts {
		t.Fatalf("%d duplicates listed, want the latest %d:\n%s", len(dups), journal.MaxReceipts, describe(tl))
	}
	for i, e := range dups {
		k := n - journal.MaxReceipts + i
		if e.Number != k+1 || e.Answer != 200+k || !e.At.Equal(start.Add(time.Duration(k)*time.Second)) {
			t.Errorf("duplicate %d: %+v, want number %d answered %d at %s", i, e, k+1, 200+k, start.Add(time.Duration(k)*time.Second))
		}
	}
}

// testTimelineHolds: a delivery held for a reason is one hold however
// often it is held again for it; another reason, or an attempt between,
// starts another; the last one goes on (no end) while the event waits.
// An event appended behind its order key's holder waits for its turn
// from when it was received, until its first attempt.
func testTimelineHolds(t *testing.T, s journal.Store) {
	ctx := context.Background()
	id := AppendOne(t, s, Event("p", "held", "h")).ID
	hold := func(reason string) {
		t.Helper()
		ds := LeaseAll(t, s, time.Minute)
		if len(ds) != 1 {
			t.Fatalf("leased %d", len(ds))
		}
		if _, err := s.Hold(ctx, []journal.Hold{{ID: ds[0].ID, LeaseToken: ds[0].LeaseToken, Reason: reason}}); err != nil {
			t.Fatal(err)
		}
	}
	hold("paused")
	hold("paused")
	hold("rate")
	f := Finish(LeaseAll(t, s, time.Minute)[0], journal.StatusRetry, 503)
	if _, err := CompleteN(s, []journal.Finish{f}); err != nil {
		t.Fatal(err)
	}
	hold("rate") // after an attempt: another hold
	// A release (no reason) is no hold.
	ds := LeaseAll(t, s, time.Minute)
	if _, err := s.Release(ctx, []int64{ds[0].ID}, []uuid.UUID{ds[0].LeaseToken}); err != nil {
		t.Fatal(err)
	}
	var holds []journal.TimelineEntry
	var attempt time.Time
	for _, e := range Get(t, s, id).Timeline {
		switch e.Kind {
		case journal.TimelineHold:
			holds = append(holds, e)
		case journal.TimelineAttempt:
			attempt = e.At
		}
	}
	if len(holds) != 3 || holds[0].Reason != "paused" || holds[1].Reason != "rate" || holds[2].Reason != "rate" {
		t.Fatalf("holds %+v, want paused, rate, rate", holds)
	}
	if holds[0].Until == nil || !holds[0].Until.Equal(*holds[1].From) || holds[1].Until == nil || !holds[1].Until.Equal(attempt) ||
		holds[2].Until != nil {
		t.Errorf("holds end %v %v %v; want at the next hold, at the attempt (%s), and not yet", holds[0].Until, holds[1].Until, holds[2].Until, attempt)
	}

	first := AppendOne(t, s, Ordered("first", "cus_1", false))
	second := AppendOne(t, s, Ordered("second", "cus_1", false))
	if !second.Behind {
		t.Fatalf("second of its key not behind: %+v", second)
	}
	var leased []journal.Delivery
	for _, d := range LeaseAll(t, s, time.Minute) {
		if d.ID == first.ID {
			leased = append(leased, d)
		}
	}
	Complete(t, s, leased[0], journal.StatusDone)
	var d2 journal.Delivery
	for _, d := range LeaseAll(t, s, time.Minute) {
		if d.ID == second.ID {
			d2 = d
		}
	}
	f2 := Finish(d2, journal.StatusDone, 200)
	if _, err := CompleteN(s, []journal.Finish{f2}); err != nil {
		t.Fatal(err)
	}
	d := Get(t, s, second.ID)
	if len(d.Timeline) != 3 || d.Timeline[1].Kind != journal.TimelineHold || d.Timeline[1].Reason != journal.HeldOrder ||
		!d.Timeline[1].From.Equal(d.ReceivedAt) || d.Timeline[1].Until == nil || !d.Timeline[1].Until.Equal(d.Timeline[2].At) {
		t.Fatalf("the second event of a key: %s; want received, held for its turn until its attempt, the attempt", describe(d.Timeline))
	}
	if tl := Get(t, s, first.ID).Timeline; len(tl) != 2 || tl[1].Kind != journal.TimelineAttempt {
		t.Fatalf("the first event of a key: %s; want received, its attempt (no hold)", describe(tl))
	}
}

// testTimelineCopiesAndDelivered: a conflicting copy is a receipt answered
// 409, a body-guarded copy under a fresh id one answered 200; an event
// delivered at its first try shows what it sent differently from the
// journaled headers, from its row.
func testTimelineCopiesAndDelivered(t *testing.T, s journal.Store) {
	ctx := context.Background()
	id := AppendOne(t, s, Event("p", "c", "h1")).ID
	AppendOne(t, s, Event("p", "c", "h2"))
	g := Event("g", "g1", "same")
	g.BodyGuard = true
	gid := AppendOne(t, s, g).ID
	g.EventID = "g2"
	AppendOne(t, s, g)
	if tl := Get(t, s, id).Timeline; len(tl) != 2 || tl[1].Kind != journal.TimelineConflict || tl[1].Answer != journal.ConflictAnswer {
		t.Errorf("a conflicting copy: %s", describe(tl))
	}
	if tl := Get(t, s, gid).Timeline; len(tl) != 2 || tl[1].Kind != journal.TimelineCopy || tl[1].Answer != journal.CopyAnswer {
		t.Errorf("a body-guarded copy: %s", describe(tl))
	}
	for _, d := range LeaseAll(t, s, time.Minute) {
		f := Finish(d, journal.StatusDone, 200)
		if d.ID == id {
			f.Attempt.Sent = journal.HeaderDelta{Set: http.Header{"X-Sig": {"new"}}, Del: []string{"X-Old"}}
		}
		if _, err := s.Complete(ctx, []journal.Finish{f}); err != nil {
			t.Fatal(err)
		}
	}
	tl := Get(t, s, id).Timeline
	a := tl[len(tl)-1]
	if a.Kind != journal.TimelineAttempt || a.Sent.Set.Get("X-Sig") != "new" || !slices.Equal(a.Sent.Del, []string{"X-Old"}) {
		t.Errorf("the first attempt's sent headers: %+v", a)
	}
}
