package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/whguard/whguard/journal"
)

// TestE2EEventStory: a real whguard in front of a backend that is paused,
// then fails, then recovers. An event held by the pause while its sender
// resends it three times, failing twice (dead), then replayed and
// delivered shows exactly that in GET /api/events/{id} and in the real
// `whguard events show`: each receipt with what it was answered, the hold,
// each attempt with the headers it sent (the signature made afresh for
// the backend), the replay; and the headers as received, without the
// X-Forwarded-* whguard adds.
func TestE2EEventStory(t *testing.T) {
	t.Parallel()
	b := newProbeBackend(t, 0)
	// The backend verifies deliveries with a secret of its own: every
	// attempt is signed afresh, differently from what the sender signed.
	s := newProtectedSet(t, 1, b, "WHGUARD_RETRY_MAX_ATTEMPTS=2", "WHGUARD_SHOP_BACKEND_SECRET=whsec_"+base64.StdEncoding.EncodeToString([]byte("the backend's own secret, 32 by.")))
	pause := `{"backend":"` + b.origin() + `","reason":"deploying"}`
	if code := s.api(0, http.MethodPost, "/api/backends/pause", pause, nil); code != http.StatusOK {
		t.Fatalf("pause: %d", code)
	}
	const id = "story-1"
	s.send(0, id)
	var ev struct {
		journal.Detail
	}
	show := func() {
		t.Helper()
		// Afresh: decoding over the last read would keep an entry's
		// fields where a later entry (a duplicate recorded since, sorted
		// in by time) now stands.
		ev = struct{ journal.Detail }{}
		if code := s.api(0, http.MethodGet, "/api/events/"+id+"?provider=shop", "", &ev); code != http.StatusOK {
			t.Fatalf("show: %d", code)
		}
	}
	waitFor(t, 10*time.Second, "the event held by the pause", func() bool { show(); return ev.Held == journal.HoldPaused })
	for range 3 {
		if !s.sendBody(0, id, fmt.Sprintf(`{"type":"order.paid","data":{"order_id":%q}}`, id)) {
			t.Fatal("a resend was not acknowledged")
		}
	}
	b.down.Store(true)
	if code := s.api(0, http.MethodPost, "/api/backends/resume", pause, nil); code != http.StatusOK {
		t.Fatalf("resume: %d", code)
	}
	waitFor(t, 20*time.Second, "the event dead after two failures", func() bool { show(); return ev.Status == journal.StatusDead })
	b.down.Store(false)
	if code := s.api(0, http.MethodPost, "/api/events/"+id+"/replay?provider=shop", `{"reason":"backend fixed"}`, nil); code != http.StatusOK {
		t.Fatalf("replay: %d", code)
	}
	waitFor(t, 20*time.Second, "the replay delivered", func() bool { show(); return ev.Status == journal.StatusDone })

	type step struct {
		kind   string
		answer int
		code   int
	}
	want := []step{{kind: journal.TimelineReceived, answer: 202}, {kind: journal.TimelineHold},
		{kind: journal.TimelineDuplicate, answer: 200}, {kind: journal.TimelineDuplicate, answer: 200}, {kind: journal.TimelineDuplicate, answer: 200},
		{kind: journal.TimelineAttempt, code: 503}, {kind: journal.TimelineAttempt, code: 503},
		{kind: journal.ActionReplay}, {kind: journal.TimelineAttempt, code: 200}}
	tl := ev.Timeline
	if len(tl) != len(want) {
		t.Fatalf("timeline of %d entries, want %d: %+v", len(tl), len(want), tl)
	}
	for i, w := range want {
		if tl[i].Kind != w.kind || tl[i].Answer != w.answer || tl[i].StatusCode != w.code {
			t.Errorf("entry %d: %+v, want %+v", i, tl[i], w)
		}
	}
	if tl[0].Duplicates != 3 || tl[1].Reason != journal.HoldPaused || tl[1].Until == nil || !tl[1].Until.Equal(tl[5].At) {
		t.Errorf("received %+v, hold %+v; want 3 duplicates, held paused until the first attempt", tl[0], tl[1])
	}
	received := ev.ReceivedHeaders.Get("Webhook-Signature")
	for _, i := range []int{5, 6, 8} {
		h := tl[i].Headers
		if sig := h.Get("Webhook-Signature"); sig == "" || sig == received || h.Get("X-Whguard-Attempt") != fmt.Sprint(tl[i].Number) ||
			h.Get("X-Forwarded-For") == "" {
			t.Errorf("attempt %d sent %v; want the signature made afresh (received %q)", tl[i].Number, h, received)
		}
	}
	for _, name := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "Forwarded"} {
		if _, ok := ev.ReceivedHeaders[name]; ok {
			t.Errorf("received headers hold %s, which whguard added: %v", name, ev.ReceivedHeaders)
		}
	}

	// The real CLI says the same, a line each.
	cmd := exec.Command(binary, "events", "show", id, "-provider", "shop")
	cmd.Env = []string{"WHGUARD_ADMIN_URL=http://" + s.replicas[0].admin, "WHGUARD_ADMIN_TOKEN=e2e-token"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("events show: %v\n%s", err, out.String())
	}
	lines := []string{"received, answered 202; resent 3 times since", "held: paused for ", "duplicate #1, answered 200",
		"duplicate #2, answered 200", "duplicate #3, answered 200", "attempt 1: 503 in ", "attempt 2: 503 in ",
		"replayed from dead: backend fixed", "attempt 3: 200 in "}
	rest := out.String()
	for _, l := range lines {
		i := strings.Index(rest, l)
		if i < 0 {
			t.Fatalf("events show lacks %q (in this order):\n%s", l, out.String())
		}
		rest = rest[i+len(l):]
	}
	if strings.Contains(out.String(), "next attempt") {
		t.Errorf("a delivered event shows a next attempt:\n%s", out.String())
	}
	cmd = exec.Command(binary, "events", "show", id, "-provider", "shop", "-json")
	cmd.Env = []string{"WHGUARD_ADMIN_URL=http://" + s.replicas[0].admin, "WHGUARD_ADMIN_TOKEN=e2e-token"}
	js, err := cmd.Output()
	var parsed struct {
		Timeline []json.RawMessage `json:"timeline"`
	}
	if err != nil || json.Unmarshal(js, &parsed) != nil || len(parsed.Timeline) != len(want) {
		t.Fatalf("events show -json: %v\n%s", err, js)
	}
}
