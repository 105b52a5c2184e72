package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/journal/journaltest"
	"github.com/whguard/whguard/proxy/admin"
)

// storyServer serves the admin API over j, with its token.
func storyServer(t *testing.T, j journal.Store) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(admin.NewAdmin(admin.AdminConfig{
		Ready: j.Ready, Gatherer: prometheus.NewRegistry(), Token: "story-token",
		API: admin.NewAPI(admin.APIConfig{Store: j}),
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestEventTimelineAPI: GET /api/events/{id} of an event that was held,
// resent three times, failed twice and replayed says exactly that in its
// "timeline", each attempt with the headers it sent (rebuilt, credentials
// redacted, the first one's signature as re-signed), and its
// "received_headers" are what came, without whguard's X-Forwarded-For and
// with the credential redacted.
func TestEventTimelineAPI(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, store string) {
		j := newFixture(t, store).j
		id := journaltest.Story(t, j, nil)
		srv := storyServer(t, j)
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/api/events/%d", srv.URL, id), nil)
		req.Header.Set("Authorization", "Bearer story-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var raw json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %v", resp.StatusCode, err)
		}
		if strings.Contains(string(raw), "sender-credential") {
			t.Fatalf("the answer shows a credential: %s", raw)
		}
		var got struct {
			ReceivedHeaders http.Header `json:"received_headers"`
			Timeline        []struct {
				journal.TimelineEntry
				Headers http.Header `json:"headers"`
			} `json:"timeline"`
		}
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if _, ok := got.ReceivedHeaders["X-Forwarded-For"]; ok || got.ReceivedHeaders.Get("Authorization") != admin.Redacted ||
			got.ReceivedHeaders.Get("Webhook-Signature") != "v1,from-the-sender" {
			t.Errorf("received_headers %v", got.ReceivedHeaders)
		}
		tl := make([]journal.TimelineEntry, len(got.Timeline))
		for i, e := range got.Timeline {
			tl[i] = e.TimelineEntry
		}
		journaltest.CheckStory(t, withSent(tl, got.Timeline[5].Headers))
		for i, sig := range map[int]string{5: journaltest.StorySignature, 6: "v1,from-the-sender"} {
			h := got.Timeline[i].Headers
			if h.Get("Webhook-Signature") != sig || h.Get("Authorization") != admin.Redacted || h.Get("X-Forwarded-For") != "203.0.113.7" ||
				h.Get("X-Whguard-Attempt") != fmt.Sprint(i-4) || h.Get("X-Whguard-Event-Id") != fmt.Sprint(id) {
				t.Errorf("attempt %d sent %v", i-4, h)
			}
		}
		for i, e := range got.Timeline {
			if e.Kind != journal.TimelineAttempt && e.Headers != nil {
				t.Errorf("entry %d (%s) has headers", i, e.Kind)
			}
		}
		for _, field := range []string{`"from":`, `"until":`, `"answer":202`, `"duplicates":3`, `"duration_ms":7`, `"from_status":"dead"`} {
			if !strings.Contains(string(raw), field) {
				t.Errorf("the timeline lacks %s: %s", field, raw)
			}
		}
	})
}

// withSent gives Story's first attempt the delta its rebuilt headers
// show, so CheckStory can read it from the API's answer (which carries
// the headers, not the delta).
func withSent(tl []journal.TimelineEntry, first http.Header) []journal.TimelineEntry {
	tl[5].Sent = journal.HeaderDelta{Set: http.Header{"Webhook-Signature": first["Webhook-Signature"]}}
	return tl
}

// TestInspectorDurations: the inspector writes every length of time in
// human units, by the table cmd/whguard's humanDuration is held to.
func TestInspectorDurations(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("testdata", "durations.json"))
	if err != nil {
		t.Fatal(err)
	}
	j := newFixture(t, "sqlite").j
	ctx, waitJS := openInspector(t, storyServer(t, j).URL, "story-token")
	waitJS("the page's code", `typeof duration === "function"`)
	bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`JSON.parse(`+"`"+string(b)+"`"+`).filter(c => duration(c.ms) !== c.text).map(c => c.ms + " ms: " + duration(c.ms) + ", want " + c.text)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Fatalf("duration():\n%s", strings.Join(bad, "\n"))
	}
}

// TestInspectorTimelineInBrowser: the inspector shows the story of an
// event that was held, resent three times, failed twice and replayed, as
// it happened over two hours: one line each, in time order, with human
// durations, each attempt's headers sent behind a disclosure, the headers
// as received, and the next attempt only while it has one. With
// WHGUARD_TIMELINE_SCREENSHOT=file.png it saves a screenshot of the page
// (docs/inspector-timeline.png is one).
func TestInspectorTimelineInBrowser(t *testing.T) {
	t.Parallel()
	clock := journaltest.NewClock(time.Now().Add(-3 * time.Hour).Truncate(time.Second))
	j, err := journal.OpenSQLite(context.Background(), journal.SQLiteConfig{Path: filepath.Join(t.TempDir(), "j.db"), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	if _, err := j.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	id := journaltest.Story(t, j, clock)
	done := journaltest.AppendOne(t, j, journaltest.Event("shop", "evt_done", "h-done")).ID
	srv := storyServer(t, j)
	ctx, waitJS := openInspector(t, srv.URL, "story-token")
	waitJS("two rows", `document.querySelectorAll("tr.row").length === 2`)
	open := func(id int64) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr.row[data-id="%d"] td`, id)))); err != nil {
			t.Fatalf("click row %d: %v", id, err)
		}
		waitJS(fmt.Sprintf("the timeline of event %d", id), fmt.Sprintf(`(document.querySelector("#detail h3")||{}).textContent?.startsWith("Event %d ") && !!document.getElementById("timeline")`, id))
	}
	open(id)
	// Each line's text after its time (an attempt's headers are in a
	// closed disclosure).
	lines, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#timeline > li")].map(li =>
		li.dataset.kind + " | " + li.textContent.slice(li.querySelector("time").textContent.length).trim())`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"received | received, answered 202 · resent 3 times since",
		"hold | held: breaker for 4 min 27 s, until",
		"duplicate | duplicate #1, answered 200",
		"duplicate | duplicate #2, answered 200",
		"duplicate | duplicate #3, answered 200",
		"attempt | attempt 1: 503 in 7 ms",
		"attempt | attempt 2: 503 in 7 ms",
		"replay | replayed from dead: backend fixed",
	}
	if len(lines) != len(want) {
		t.Fatalf("timeline:\n%s", strings.Join(lines, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d %q, want %q", i, lines[i], w)
		}
	}
	text := func(expr string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return s
	}
	sent := text(`document.querySelector("#timeline li.attempt details pre").textContent`)
	received := text(`document.getElementById("receivedHeaders").textContent`)
	next := text(`(document.getElementById("nextAttempt")||{}).textContent || ""`)
	if !strings.Contains(sent, "Webhook-Signature: "+journaltest.StorySignature) || !strings.Contains(sent, "Authorization: [redacted]") ||
		!strings.Contains(sent, "X-Whguard-Attempt: 1") {
		t.Errorf("the first attempt's headers sent:\n%s", sent)
	}
	if strings.Contains(received, "X-Forwarded-For") || !strings.Contains(received, "Webhook-Signature: v1,from-the-sender") {
		t.Errorf("headers as received:\n%s", received)
	}
	if !strings.Contains(next, "due now") {
		t.Errorf("the replayed event's next attempt: %q, want due now", next)
	}
	if path := os.Getenv("WHGUARD_TIMELINE_SCREENSHOT"); path != "" {
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#timeline li.attempt details").open = true`)); err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS("#detail")))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A delivered event has no next attempt.
	ds := journaltest.LeaseAll(t, j, time.Minute)
	for _, d := range ds {
		if d.ID == done {
			journaltest.Complete(t, j, d, journal.StatusDone)
		}
	}
	open(done)
	waitJS("a delivered event", `document.querySelector("#detail h3 .badge").textContent === "done"`)
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.getElementById("nextAttempt") && !document.getElementById("detail").textContent.includes("next attempt")`)); err != nil || !ok {
		t.Fatalf("a done event shows a next attempt (%v)", err)
	}
}
