package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/whguard/whguard/internal/testdb"
)

// TestE2EEventTypeFilter runs the real binary with
// WHGUARD_STRIPE_EVENT_TYPES=invoice.*,customer.subscription.* on each
// store: every verified event is acknowledged as usual, those of other
// types are journaled as ignored and never reach the backend, a resend of
// an ignored one gets the same 200 body, they are listed and counted as
// ignored by the API, the CLI and the metrics, and a replay (one from the
// CLI, the rest in bulk through the API with status ignored) delivers them.
func TestE2EEventTypeFilter(t *testing.T) {
	t.Parallel()
	testdb.ForEachStore(t, testEventTypeFilter)
}

func testEventTypeFilter(t *testing.T, store string) {
	t.Parallel()
	const secret, token = "whsec_filterTestSecret0123456789", "filter-admin-token"
	rec := &deliveryRecorder{}
	backend := httptest.NewServer(rec)
	t.Cleanup(backend.Close)
	listen, admin := freePort(t), freePort(t)
	env := []string{
		"WHGUARD_DATABASE_URL=" + journalURL(t, store),
		"WHGUARD_LISTEN=" + listen,
		"WHGUARD_ADMIN_LISTEN=" + admin,
		"WHGUARD_ADMIN_TOKEN=" + token,
		"WHGUARD_BACKEND_URL=" + backend.URL,
		"WHGUARD_PROVIDERS=stripe",
		"WHGUARD_STRIPE_SCHEME=stripe",
		"WHGUARD_STRIPE_SECRET=" + secret,
		"WHGUARD_STRIPE_EVENT_TYPES=invoice.*, customer.subscription.*",
		"WHGUARD_RETRY_BASE_DELAY=100ms",
		"WHGUARD_RETRY_MAX_DELAY=1s",
		"WHGUARD_SHUTDOWN_TIMEOUT=5s",
	}
	start(t, binary, env)
	waitHTTP(t, "http://"+admin+"/readyz", 20*time.Second)
	client := &http.Client{Timeout: 10 * time.Second}

	send := func(id, typ string) (int, string) {
		t.Helper()
		body := fmt.Sprintf(`{"id":%q,"object":"event","type":%q,"data":{"object":{"id":"in_1"}}}`, id, typ)
		sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(body), Secret: secret, Timestamp: time.Now()})
		req, err := http.NewRequest(http.MethodPost, "http://"+listen+"/webhooks/stripe", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Stripe-Signature", sp.Header)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	api := func(method, path, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+admin+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	delivered := func() []string {
		var ids []string
		for _, d := range rec.all() {
			var v struct{ ID string }
			_ = json.Unmarshal(d.body, &v)
			ids = append(ids, v.ID)
		}
		slices.Sort(ids)
		return ids
	}
	eventIDs := func(status string) []string {
		var ids []string
		for _, e := range adminEvents(t, client, admin, token, "status="+status) {
			ids = append(ids, e.EventID)
		}
		slices.Sort(ids)
		return ids
	}

	events := []struct{ id, typ string }{
		{"evt_invoice", "invoice.paid"},
		{"evt_sub", "customer.subscription.updated"},
		{"evt_refund", "charge.refunded"},
		{"evt_customer", "customer.created"}, // customer.* is not in the filter
	}
	for _, e := range events {
		code, body := send(e.id, e.typ)
		want := fmt.Sprintf(`{"status":"accepted","provider":"stripe","event_id":%q}`, e.id)
		if code != http.StatusAccepted || body != want {
			t.Fatalf("%s: %d %s, want 202 %s", e.id, code, body, want)
		}
	}
	// A resend of an ignored event is a duplicate like any other.
	if code, body := send("evt_refund", "charge.refunded"); code != http.StatusOK ||
		body != `{"status":"accepted","provider":"stripe","event_id":"evt_refund"}` {
		t.Fatalf("resend of an ignored event: %d %s", code, body)
	}

	waitFor(t, 20*time.Second, "the two matching events done", func() bool { return len(eventIDs("done")) == 2 })
	if got := fmt.Sprint(eventIDs("ignored")); got != "[evt_customer evt_refund]" {
		t.Fatalf("ignored events %s", got)
	}
	if got := fmt.Sprint(delivered()); got != "[evt_invoice evt_sub]" {
		t.Fatalf("backend received %s, want only the matching events", got)
	}

	// The CLI lists them with their status.
	var out, errb bytes.Buffer
	if code := run([]string{"events", "list", "-status", "ignored"},
		[]string{"WHGUARD_ADMIN_LISTEN=" + admin, "WHGUARD_ADMIN_TOKEN=" + token}, &out, &errb); code != 0 ||
		strings.Count(out.String(), " ignored ") != 2 || !strings.Contains(out.String(), "evt_refund") {
		t.Fatalf("events list -status ignored: %d\n%s%s", code, out.String(), errb.String())
	}
	// Counted: the ingest counter and the journal gauge (refreshed every
	// 10 s: wait for more than one refresh, a loaded machine delays them).
	waitFor(t, 30*time.Second, "the ignored metrics", func() bool {
		resp, err := client.Get("http://" + admin + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `whguard_events_ignored_total{provider="stripe"} 2`) &&
			strings.Contains(string(b), `whguard_events{status="ignored"} 2`)
	})

	// A bulk replay without a status leaves ignored events alone; asking
	// for them counts them.
	if code, b := api("POST", "/api/replay", `{"reason":"dead ones","dry_run":true}`); code != 200 || strings.TrimSpace(string(b)) != `{"would_replay":0}` {
		t.Fatalf("dry run without status: %d %s", code, b)
	}
	if code, b := api("POST", "/api/replay", `{"status":"ignored","reason":"x","dry_run":true}`); code != 200 || strings.TrimSpace(string(b)) != `{"would_replay":2}` {
		t.Fatalf("dry run of ignored events: %d %s", code, b)
	}

	// One replayed on purpose (from the CLI, by Stripe's id) is
	// delivered, audited from ignored.
	refund := adminEvents(t, client, admin, token, "status=ignored&event_id=evt_refund")[0]
	out.Reset()
	errb.Reset()
	if code := run([]string{"events", "replay", "evt_refund", "-reason", "we do want refunds"},
		[]string{"WHGUARD_ADMIN_LISTEN=" + admin, "WHGUARD_ADMIN_TOKEN=" + token}, &out, &errb); code != 0 {
		t.Fatalf("events replay of an ignored event: %d\n%s%s", code, out.String(), errb.String())
	}
	waitFor(t, 20*time.Second, "the replayed ignored event delivered", func() bool { return slices.Contains(delivered(), "evt_refund") })
	_, b := api("GET", fmt.Sprintf("/api/events/%d", refund.ID), "")
	var det struct {
		Replays []struct {
			FromStatus string `json:"from_status"`
		} `json:"replays"`
	}
	if err := json.Unmarshal(b, &det); err != nil || len(det.Replays) != 1 || det.Replays[0].FromStatus != "ignored" {
		t.Fatalf("replay audit of the ignored event: %s", b)
	}

	// The rest in bulk, asked for by status.
	if code, b := api("POST", "/api/replay", `{"status":"ignored","reason":"all of them"}`); code != 200 || strings.TrimSpace(string(b)) != `{"replayed":1}` {
		t.Fatalf("bulk replay of ignored events: %d %s", code, b)
	}
	waitFor(t, 20*time.Second, "every event delivered once", func() bool { return len(delivered()) == 4 })
	waitFor(t, 20*time.Second, "every event done", func() bool { return len(eventIDs("done")) == 4 })
	if got := fmt.Sprint(delivered()); got != "[evt_customer evt_invoice evt_refund evt_sub]" {
		t.Fatalf("backend received %s", got)
	}
}
