package journaltest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/whguard/whguard/journal"
)

// transitionTests drives every entry of journal.Transitions: for each of
// its From statuses (or a new row), a row is brought to that status, the
// operation applied, and the row must end in one of To with its attempts
// changed by Attempts. Each status of To that the store decides between
// (the reaper's, a release's) is reached by a case of its own, so both
// branches of each decision are checked.
func transitionTests() []test {
	var out []test
	for _, tr := range journal.Transitions {
		for _, c := range transitionCases(tr) {
			out = append(out, test{name: fmt.Sprintf("%s/%s", tr.Op, c.name), fn: func(t *testing.T, s journal.Store) {
				checkTransition(t, s, tr, c)
			}})
		}
	}
	return out
}

// transitionCase is one way to exercise a transition: from, the status
// the row starts in (empty for a new row), and want, the status it must
// end in (one of the transition's To).
type transitionCase struct {
	name       string
	from, want journal.Status
	// failedBefore: the row's earlier attempt failed (a release then
	// goes to retry rather than pending).
	failedBefore bool
	// lastOfBudget: the reaped attempt is the budget's last.
	lastOfBudget bool
}

func transitionCases(tr journal.Transition) []transitionCase {
	from := tr.From
	if len(from) == 0 {
		from = []journal.Status{""}
	}
	var out []transitionCase
	for _, f := range from {
		name := string(f)
		if name == "" {
			name = "new"
		}
		switch tr.Op {
		case journal.OpReap:
			out = append(out,
				transitionCase{name: name + "/budget-left", from: f, want: journal.StatusRetry},
				transitionCase{name: name + "/budget-spent", from: f, want: journal.StatusDead, lastOfBudget: true})
		case journal.OpRelease:
			out = append(out,
				transitionCase{name: name + "/first-attempt", from: f, want: journal.StatusPending},
				transitionCase{name: name + "/after-a-failure", from: f, want: journal.StatusRetry, failedBefore: true})
		case journal.OpRetryNow:
			out = append(out, transitionCase{name: name, from: f, want: f}) // the status stays
		default:
			out = append(out, transitionCase{name: name, from: f, want: tr.To[0]})
		}
	}
	return out
}

func checkTransition(t *testing.T, s journal.Store, tr journal.Transition, c transitionCase) {
	ctx := context.Background()
	if !slices.Contains(tr.To, c.want) {
		t.Fatalf("case wants %s, not among %v", c.want, tr.To)
	}
	e := Event("p", "evt", "h")
	if tr.Op == journal.OpSkip {
		e.OrderKey, e.OrderBlock = journal.OrderKeyDigest("sub_1"), true
	}
	var id int64
	var d journal.Delivery // the row's lease, when from is processing
	before := 0
	if c.from != "" {
		id, d = reach(t, s, e, c.from, c.failedBefore)
		before = Get(t, s, id).Attempts
	}
	maxAttempts := 5
	switch tr.Op {
	case journal.OpAppend:
		id = AppendOne(t, s, e).ID
	case journal.OpClaim:
		e.LeaseFor, e.LeaseToken = time.Minute, uuid.New()
		id = AppendOne(t, s, e).ID
	case journal.OpIgnore:
		e.Ignored = true
		id = AppendOne(t, s, e).ID
	case journal.OpLease:
		if ds := LeaseAll(t, s, time.Minute); len(ds) != 1 || ds[0].ID != id {
			t.Fatalf("leased %+v, want row %d", ds, id)
		}
	case journal.OpDone, journal.OpRetry, journal.OpDead:
		st := map[string]journal.Status{journal.OpDone: journal.StatusDone, journal.OpRetry: journal.StatusRetry, journal.OpDead: journal.StatusDead}[tr.Op]
		if n, err := CompleteN(s, []journal.Finish{Finish(d, st, 503)}); err != nil || n != 1 {
			t.Fatalf("complete: %d %v", n, err)
		}
	case journal.OpReap:
		if c.lastOfBudget {
			maxAttempts = before
		}
		waitFor(t, 5*time.Second, "the lease to expire and be reaped", func() bool {
			rs, err := s.ReapExpired(ctx, maxAttempts)
			if err != nil {
				t.Fatal(err)
			}
			return len(rs) == 1 && rs[0].ID == id && rs[0].Dead == c.lastOfBudget
		})
	case journal.OpRelease:
		if n, err := s.Release(ctx, []int64{id}, []uuid.UUID{d.LeaseToken}); err != nil || n != 1 {
			t.Fatalf("release: %d %v", n, err)
		}
	case journal.OpReplay:
		if err := s.Replay(ctx, id, "transition test"); err != nil {
			t.Fatal(err)
		}
	case journal.OpSkip:
		if err := s.Skip(ctx, id, "transition test"); err != nil {
			t.Fatal(err)
		}
	case journal.OpRetryNow:
		putOff(t, s, id, c.from)
		before = Get(t, s, id).Attempts
		if err := s.RetryNow(ctx, id, "transition test"); err != nil {
			t.Fatal(err)
		}
		if d := Get(t, s, id); d.NextAttemptAt.After(time.Now().Add(time.Second)) || d.Held != "" {
			t.Fatalf("after retry now, due at %s (held %q); want now", d.NextAttemptAt, d.Held)
		}
	default:
		t.Fatalf("no way to exercise %q: add it here", tr.Op)
	}
	got := Get(t, s, id)
	if got.Status != c.want {
		t.Fatalf("%s from %q: status %s, want %s", tr.Op, c.from, got.Status, c.want)
	}
	if got.Attempts-before != tr.Attempts {
		t.Fatalf("%s from %q: attempts %d → %d, want a change of %d", tr.Op, c.from, before, got.Attempts, tr.Attempts)
	}
	if tr.Op == journal.OpRetryNow {
		if ds := LeaseAll(t, s, time.Minute); len(ds) != 1 || ds[0].ID != id {
			t.Fatalf("after retry now, leased %+v; want row %d", ds, id)
		}
	}
	if tr.Op == journal.OpSkip {
		// The key is released: the next event of the key can be leased.
		next := Event("p", "evt-next", "h2")
		next.OrderKey, next.OrderBlock = e.OrderKey, true
		AppendOne(t, s, next)
		if ds := LeaseAll(t, s, time.Minute); len(ds) != 1 || ds[0].EventID != "evt-next" {
			t.Fatalf("after skip, leased %+v; want the next event of the key", ds)
		}
	}
}

// putOff makes waiting row id, in status from, due only in an hour, as
// a limit's hold does to a pending row and a long backoff to a failed
// one, and checks that it is not leased meanwhile.
func putOff(t *testing.T, s journal.Store, id int64, from journal.Status) {
	t.Helper()
	ds := LeaseAll(t, s, time.Minute)
	if len(ds) != 1 || ds[0].ID != id {
		t.Fatalf("leased %+v, want row %d", ds, id)
	}
	if from == journal.StatusRetry {
		f := Finish(ds[0], journal.StatusRetry, 503)
		f.RetryIn = time.Hour
		if n, err := CompleteN(s, []journal.Finish{f}); err != nil || n != 1 {
			t.Fatalf("complete retry: %d %v", n, err)
		}
	} else if n, err := s.Hold(context.Background(), []journal.Hold{{ID: id, LeaseToken: ds[0].LeaseToken, For: time.Hour, Reason: "rate"}}); err != nil || n != 1 {
		t.Fatalf("hold: %d %v", n, err)
	}
	if d := Get(t, s, id); d.Status != from {
		t.Fatalf("put off: status %s, want %s", d.Status, from)
	}
	if ds := LeaseAll(t, s, time.Minute); len(ds) != 0 {
		t.Fatalf("leased %+v while put off for an hour", ds)
	}
}

// reach appends e and brings its row to status from, returning its id and,
// when from is processing, its lease. failedBefore makes an earlier
// attempt fail first; a processing row's lease is short so that the
// reaper may take it.
func reach(t *testing.T, s journal.Store, e journal.Event, from journal.Status, failedBefore bool) (int64, journal.Delivery) {
	t.Helper()
	if from == journal.StatusIgnored {
		e.Ignored = true
		return AppendOne(t, s, e).ID, journal.Delivery{}
	}
	id := AppendOne(t, s, e).ID
	if from == journal.StatusPending {
		return id, journal.Delivery{}
	}
	lease := func(leaseFor time.Duration) journal.Delivery {
		ds := LeaseAll(t, s, leaseFor)
		if len(ds) != 1 {
			t.Fatalf("leased %d rows, want 1", len(ds))
		}
		return ds[0]
	}
	finish := func(d journal.Delivery, st journal.Status) {
		f := Finish(d, st, 503)
		f.RetryIn = 0
		if n, err := CompleteN(s, []journal.Finish{f}); err != nil || n != 1 {
			t.Fatalf("complete %s: %d %v", st, n, err)
		}
	}
	if failedBefore || from == journal.StatusRetry {
		finish(lease(time.Minute), journal.StatusRetry)
		waitFor(t, 5*time.Second, "the retry to come due", func() bool { return Get(t, s, id).Status == journal.StatusRetry })
		if from == journal.StatusRetry {
			return id, journal.Delivery{}
		}
	}
	switch from {
	case journal.StatusProcessing:
		var d journal.Delivery
		waitFor(t, 5*time.Second, "the row to be leasable", func() bool {
			ds := LeaseAll(t, s, 50*time.Millisecond)
			if len(ds) == 1 {
				d = ds[0]
			}
			return len(ds) == 1
		})
		return id, d
	case journal.StatusDone, journal.StatusDead:
		finish(lease(time.Minute), from)
		return id, journal.Delivery{}
	}
	t.Fatalf("no way to reach %q", from)
	return 0, journal.Delivery{}
}
