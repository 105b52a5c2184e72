package journaltest

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/whguard/whguard/journal"
)

func Event(provider, id, hash string) journal.Event {
	return journal.Event{
		Provider: provider, EventID: id, EventType: "t", ContentHash: hash,
		Headers: http.Header{"Webhook-Id": {id}}, Body: []byte(`{"id":"` + id + `","h":"` + hash + `"}`),
		Path: "/webhooks/" + provider, RawQuery: "q=1",
	}
}

func AppendOne(t *testing.T, s journal.Store, e journal.Event) journal.Result {
	t.Helper()
	r, err := s.Append(context.Background(), []journal.Event{e})
	if err != nil {
		t.Fatal(err)
	}
	return r[0]
}

// Count lists every event matching f (paging through).
func Count(t *testing.T, s journal.Store, f journal.Filter) int {
	t.Helper()
	n := 0
	f.Limit = 500
	for {
		evs, next, err := s.List(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		n += len(evs)
		if next == 0 {
			return n
		}
		f.Before = next
	}
}

func Get(t *testing.T, s journal.Store, id int64) *journal.Detail {
	t.Helper()
	d, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func LeaseAll(t *testing.T, s journal.Store, leaseFor time.Duration) []journal.Delivery {
	t.Helper()
	ds, err := s.Lease(context.Background(), 100, leaseFor)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func Finish(d journal.Delivery, status journal.Status, code int) journal.Finish {
	return journal.Finish{ID: d.ID, LeaseToken: d.LeaseToken, Status: status, LastError: fmt.Sprintf("answered %d", code),
		Attempt: journal.Attempt{Number: d.Attempt, StartedAt: time.Now(), DurationMS: 7, StatusCode: code, ResponseExcerpt: "excerpt"}}
}

// ReapOne runs the reaper (with a budget of maxAttempts) and says whether
// it returned the one expired lease the test holds.
func ReapOne(t *testing.T, s journal.Store, maxAttempts int) bool {
	t.Helper()
	r, err := s.ReapExpired(context.Background(), maxAttempts)
	if err != nil || len(r) > 1 {
		t.Fatalf("reap: %+v %v", r, err)
	}
	if len(r) == 1 {
		// What the reaper says it did is what the row shows.
		d := Get(t, s, r[0].ID)
		if r[0].Dead != (d.Status == journal.StatusDead) || r[0].EventID != d.EventID || r[0].Provider != d.Provider {
			t.Fatalf("reaped %+v, row %+v", r[0], d.Summary)
		}
	}
	return len(r) == 1
}

// CompleteN records outcomes and says how many took effect.
func CompleteN(s journal.Store, fs []journal.Finish) (int, error) {
	ids, err := s.Complete(context.Background(), fs)
	return len(ids), err
}

// waitFor polls cond until it holds, failing the test after within: for
// what takes real time to happen (a lease to expire, a retry to come
// due), instead of sleeping for a guess of that time.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
