package admin_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/whguard/whguard/journal"
)

// failAllLater fails the first attempt of every ready event of a's
// journal with a backoff of an hour, except those named in done, which
// are delivered.
func failAllLater(t *testing.T, a *apiFixture, done ...string) {
	t.Helper()
	ctx := context.Background()
	ds, err := a.j.Lease(ctx, 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var fs []journal.Finish
	for _, d := range ds {
		f := journal.Finish{ID: d.ID, LeaseToken: d.LeaseToken, Status: journal.StatusRetry, RetryIn: time.Hour, LastError: "backend answered 503",
			Attempt: journal.Attempt{Number: d.Attempt, StartedAt: time.Now(), DurationMS: 3, StatusCode: 503}}
		for _, id := range done {
			if d.EventID == id {
				f.Status, f.RetryIn, f.LastError = journal.StatusDone, 0, ""
				f.Attempt.StatusCode = 200
			}
		}
		fs = append(fs, f)
	}
	if _, err := a.j.Complete(ctx, fs); err != nil {
		t.Fatal(err)
	}
}

// dueNow reports whether event id is due now, as the API shows it.
func (a *apiFixture) dueNow(t *testing.T, id int64) bool {
	t.Helper()
	_, m := a.do(t, "GET", fmt.Sprintf("/api/events/%d", id), "tok", "")
	at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(m["next_attempt_at"]))
	if err != nil {
		t.Fatalf("next_attempt_at %v: %v", m["next_attempt_at"], err)
	}
	return !at.After(time.Now().Add(time.Second))
}

// TestAPIRetryNow: POST /api/events/{id}/retry makes an event waiting in
// retry due now, keeping its attempts (it is no replay), audited with its
// optional reason; a done or dead event is 409 saying its status and to
// replay it; a missing one 404.
func TestAPIRetryNow(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store string) {
		a := newAPIFixture(t, store, 4, 1) // e000 dead
		failAllLater(t, a, "e003")         // e001, e002 in retry for an hour; e003 done
		waiting, other, done, dead := a.events["e001"], a.events["e002"], a.events["e003"], a.events["e000"]
		if a.dueNow(t, waiting) {
			t.Fatal("the failed event is due before any retry now")
		}

		s, m := a.do(t, "POST", fmt.Sprintf("/api/events/%d/retry", waiting), "tok", "")
		if s != 200 || m["status"] != "due" || a.woken != 1 {
			t.Fatalf("retry now: %d %v, woken %d", s, m, a.woken)
		}
		_, m = a.do(t, "GET", fmt.Sprintf("/api/events/%d", waiting), "tok", "")
		if !a.dueNow(t, waiting) || m["status"] != "retry" || m["attempts"].(float64) != 1 {
			t.Fatalf("after retry now: %v", m)
		}
		if rs := m["replays"].([]any); len(rs) != 1 || rs[0].(map[string]any)["action"] != "retry" || rs[0].(map[string]any)["from_status"] != "retry" {
			t.Fatalf("audit of the retry now: %v", rs)
		}
		if a.dueNow(t, other) {
			t.Fatal("another event was made due")
		}
		// By the provider's event id, with a reason.
		if s, m := a.do(t, "POST", "/api/events/e002/retry?provider=alpha", "tok", `{"reason":"backend is back"}`); s != 200 || m["id"].(float64) != float64(other) {
			t.Fatalf("retry now by event id: %d %v", s, m)
		}
		if _, m := a.do(t, "GET", fmt.Sprintf("/api/events/%d", other), "tok", ""); m["replays"].([]any)[0].(map[string]any)["reason"] != "backend is back" {
			t.Fatalf("reason not audited: %v", m["replays"])
		}

		for _, c := range []struct {
			id     int64
			status string
		}{{done, "done"}, {dead, "dead"}} {
			s, m := a.do(t, "POST", fmt.Sprintf("/api/events/%d/retry", c.id), "tok", `{}`)
			if s != 409 || m["status"] != c.status || !strings.Contains(fmt.Sprint(m["error"]), "is "+c.status) || !strings.Contains(fmt.Sprint(m["error"]), "replay") {
				t.Fatalf("retry now of a %s event: %d %v; want 409 saying %s, and to replay it", c.status, s, m, c.status)
			}
		}
		if s, _ := a.do(t, "POST", "/api/events/999999/retry", "tok", ""); s != 404 {
			t.Fatalf("retry now of a missing event: %d", s)
		}
		if s, _ := a.do(t, "POST", fmt.Sprintf("/api/events/%d/retry", waiting), "tok", `{"reason":`); s != 400 {
			t.Fatalf("retry now with a broken body: %d", s)
		}
		if s, _ := a.do(t, "POST", fmt.Sprintf("/api/events/%d/retry", waiting), "", ""); s != 401 {
			t.Fatalf("retry now without the token: %d", s)
		}
	})
}

// TestAPIBulkRetryNow: POST /api/retry takes the filters of POST
// /api/replay, applied to the events in retry; a dry run counts and moves
// nothing; another status is 400.
func TestAPIBulkRetryNow(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store string) {
		a := newAPIFixture(t, store, 6, 0) // e000…e005, alpha the even ones, body {"n":i}
		failAllLater(t, a)
		s, m := a.do(t, "POST", "/api/retry", "tok", `{"dry_run":true,"provider":"alpha"}`)
		if s != 200 || m["would_retry"].(float64) != 3 {
			t.Fatalf("dry run: %d %v", s, m)
		}
		for _, id := range a.events {
			if a.dueNow(t, id) {
				t.Fatalf("event %d due after a dry run", id)
			}
		}
		for _, bad := range []string{`{"status":"dead"}`, `{"match":["n=2"]}`, `{"limit":-1}`, `{"since":"yesterday"}`} {
			if s, m := a.do(t, "POST", "/api/retry", "tok", bad); s != 400 || m["error"] == nil {
				t.Fatalf("%s: %d %v, want 400", bad, s, m)
			}
		}
		s, m = a.do(t, "POST", "/api/retry", "tok", `{"match":["/n=2"],"type":"order.*"}`)
		if s != 200 || m["retried"].(float64) != 1 || a.woken != 1 {
			t.Fatalf("retry by body match: %d %v, woken %d", s, m, a.woken)
		}
		if !a.dueNow(t, a.events["e002"]) || a.dueNow(t, a.events["e004"]) {
			t.Fatal("the match made the wrong events due")
		}
		s, m = a.do(t, "POST", "/api/retry", "tok", `{"provider":"beta","since":"2000-01-01T00:00:00Z","status":"retry","reason":"outage over"}`)
		if s != 200 || m["retried"].(float64) != 3 {
			t.Fatalf("retry of beta: %d %v", s, m)
		}
		for _, e := range []string{"e001", "e003", "e005"} {
			if !a.dueNow(t, a.events[e]) {
				t.Fatalf("%s not due after the retry of beta", e)
			}
		}
		if a.dueNow(t, a.events["e000"]) {
			t.Fatal("alpha's e000 made due by the retry of beta")
		}
	})
}
