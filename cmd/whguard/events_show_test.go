package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/journal/journaltest"
	"github.com/whguard/whguard/proxy/admin"
)

// TestHumanDuration: lengths of time read the way people read them. The
// table is the inspector's too (proxy/admin's TestInspectorDurations), so
// the CLI and the page write every duration alike.
func TestHumanDuration(t *testing.T) {
	b, err := os.ReadFile("../../proxy/admin/testdata/durations.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		MS   float64 `json:"ms"`
		Text string  `json:"text"`
	}
	if err := json.Unmarshal(b, &cases); err != nil || len(cases) == 0 {
		t.Fatalf("durations.json: %d cases, %v", len(cases), err)
	}
	for _, c := range cases {
		if got := humanDuration(time.Duration(c.MS * float64(time.Millisecond))); got != c.Text {
			t.Errorf("%v ms: %q, want %q", c.MS, got, c.Text)
		}
	}
}

// TestEventsShowTellsTheStory: `whguard events show` against the admin
// API over a real journal prints an event that was held, resent three
// times, failed twice and was replayed as exactly that, one line each in
// time order, each attempt with the headers it sent (credentials
// redacted, the first one's re-signed signature), the headers as received
// (without whguard's X-Forwarded-For); a next attempt while it waits for
// one (a replay makes it due now), none once it is delivered.
func TestEventsShowTellsTheStory(t *testing.T) {
	t.Parallel()
	testdb.ForEachStoreParallel(t, func(t *testing.T, store string) {
		j := testdb.OpenStore(t, store, true)
		id := journaltest.Story(t, j, nil)
		cli := adminCLI(t, admin.APIConfig{Store: j})
		code, out, errOut := cli("events", "show", fmt.Sprint(id))
		if code != 0 {
			t.Fatalf("events show: %d %s", code, errOut)
		}
		timeline := section(t, out, "timeline:")
		var lines []string
		for _, l := range strings.Split(timeline, "\n") {
			if len(l) > 2 && l[2] != ' ' { // an entry, not the headers under it
				lines = append(lines, l)
			}
		}
		want := []string{"received, answered 202; resent 3 times since", "held: breaker for ", "duplicate #1, answered 200",
			"duplicate #2, answered 200", "duplicate #3, answered 200", "attempt 1: 503 in 7 ms", "attempt 2: 503 in 7 ms",
			"replayed from dead: backend fixed"}
		if len(lines) != len(want) {
			t.Fatalf("timeline of %d lines, want %d:\n%s", len(lines), len(want), out)
		}
		for i, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("timeline line %d %q, want %q:\n%s", i, lines[i], w, out)
			}
		}
		for _, w := range []string{"Webhook-Signature: " + journaltest.StorySignature, "Webhook-Signature: v1,from-the-sender",
			"Authorization: [redacted]", "X-Whguard-Attempt: 1", "X-Whguard-Attempt: 2", "X-Forwarded-For: 203.0.113.7"} {
			if !strings.Contains(timeline, w) {
				t.Errorf("the attempts' headers lack %q:\n%s", w, timeline)
			}
		}
		received := section(t, out, "headers as received:")
		if strings.Contains(received, "X-Forwarded-For") || !strings.Contains(received, "Authorization: [redacted]") ||
			strings.Contains(out, "sender-credential") {
			t.Errorf("headers as received:\n%s", received)
		}
		if !strings.Contains(out, "next attempt") {
			t.Errorf("a replayed event (due now) shows no next attempt:\n%s", out)
		}
		// Once delivered, it has none.
		for _, d := range journaltest.LeaseAll(t, j, time.Minute) {
			if _, err := journaltest.CompleteN(j, []journal.Finish{journaltest.Finish(d, journal.StatusDone, 200)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, out, _ := cli("events", "show", fmt.Sprint(id)); strings.Contains(out, "next attempt") || !strings.Contains(out, "attempt 3: 200") {
			t.Errorf("a delivered event:\n%s", out)
		}
		// -json is the API's answer.
		if _, out, _ := cli("events", "show", fmt.Sprint(id), "-json"); !strings.Contains(out, `"timeline": [`) || !strings.Contains(out, `"received_headers": {`) {
			t.Errorf("events show -json:\n%s", out)
		}
	})
}

// section is the part of out after the line head, up to the next blank
// line.
func section(t *testing.T, out, head string) string {
	t.Helper()
	_, rest, ok := strings.Cut(out, "\n"+head+"\n")
	if !ok {
		t.Fatalf("no %q in:\n%s", head, out)
	}
	s, _, _ := strings.Cut(rest, "\n\n")
	return s
}
