package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/whguard/whguard/internal/testwait"
)

// TestE2EResignLateDelivery is the case re-signing exists for: a Stripe
// event signed 10 minutes before whguard delivers it (a backlog, an
// outage), and a backend that verifies with stripe-go at its default
// 5-minute tolerance. Re-signed (the default) it is delivered; forwarded
// as received (WHGUARD_<NAME>_RESIGN=false) the backend refuses it for
// good and it ends dead. PRESERVE_HOST forwards the sender's Host.
func TestE2EResignLateDelivery(t *testing.T) {
	const secret = "whsec_resignE2ESecret0123456789"
	var (
		mu    sync.Mutex
		hosts = map[string]string{} // provider → Host the backend saw
	)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		hosts[r.Header.Get("X-Whguard-Provider")] = r.Host
		mu.Unlock()
		// What a Stripe backend does: stripe-go's check, default tolerance.
		if err := webhook.ValidatePayload(body, r.Header.Get("Stripe-Signature"), secret); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(backend.Close)

	listen, admin := freePort(t), freePort(t)
	const token = "resign-admin-token"
	wh := start(t, binary, []string{
		"WHGUARD_DATABASE_URL=sqlite:" + filepath.Join(t.TempDir(), "journal.db"),
		"WHGUARD_LISTEN=" + listen,
		"WHGUARD_ADMIN_LISTEN=" + admin,
		"WHGUARD_ADMIN_TOKEN=" + token,
		"WHGUARD_BACKEND_URL=" + backend.URL,
		"WHGUARD_PROVIDERS=fresh,stale",
		// Both accept a 10-minute-old signature (as when it arrived).
		"WHGUARD_FRESH_SCHEME=stripe", "WHGUARD_FRESH_SECRET=" + secret, "WHGUARD_FRESH_TOLERANCE=1h",
		"WHGUARD_FRESH_PRESERVE_HOST=true",
		"WHGUARD_STALE_SCHEME=stripe", "WHGUARD_STALE_SECRET=" + secret, "WHGUARD_STALE_TOLERANCE=1h",
		"WHGUARD_STALE_RESIGN=false",
		"WHGUARD_RETRY_BASE_DELAY=100ms",
		"WHGUARD_RETRY_MAX_DELAY=1s",
		"WHGUARD_SHUTDOWN_TIMEOUT=5s",
	})
	waitHTTP(t, "http://"+admin+"/readyz", 20*time.Second)

	client := &http.Client{Timeout: 10 * time.Second}
	for _, provider := range []string{"fresh", "stale"} {
		body := []byte(fmt.Sprintf(`{"id":"evt_%s","object":"event","type":"invoice.paid"}`, provider))
		signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: time.Now().Add(-10 * time.Minute)})
		if err := webhook.ValidatePayload(body, signed.Header, secret); err == nil {
			t.Fatal("stripe-go accepts the 10-minute-old signature: this test proves nothing")
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+listen+"/webhooks/"+provider, bytes.NewReader(body))
		req.Host = "hooks.example.com"
		req.Header.Set("Stripe-Signature", signed.Header)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s: status %d, want 202", provider, resp.StatusCode)
		}
	}

	want := map[string]string{"fresh": "done", "stale": "dead"}
	var got map[string]string
	if !testwait.Until(15*time.Second, 50*time.Millisecond, func() bool {
		got = map[string]string{}
		for _, ev := range adminEvents(t, client, admin, token, "") {
			got[ev.Provider] = ev.Status
		}
		return got["fresh"] == want["fresh"] && got["stale"] == want["stale"]
	}) {
		t.Fatalf("statuses %v after 15s, want %v\n%s", got, want, tail(wh.out.String(), 3000))
	}
	mu.Lock()
	defer mu.Unlock()
	if hosts["fresh"] != "hooks.example.com" {
		t.Errorf("PRESERVE_HOST: backend saw Host %q, want the sender's hooks.example.com", hosts["fresh"])
	}
	if hosts["stale"] == "hooks.example.com" || hosts["stale"] == "" {
		t.Errorf("without PRESERVE_HOST: backend saw Host %q, want its own", hosts["stale"])
	}
}

// TestE2ENeverSignsWhatItDidNotVerify: an event journaled while its
// provider used the none scheme (nothing verified) is replayed after the
// provider moved to stripe: whguard does not sign it for the backend (it
// goes without a Stripe-Signature, so a backend that verifies refuses it),
// and the API says which scheme it was journaled under, while an event
// verified under stripe is re-signed as usual. (Found: the replay was
// signed with the new secret, and a backend verifying it accepted
// unverified content.)
func TestE2ENeverSignsWhatItDidNotVerify(t *testing.T) {
	t.Parallel()
	const secret = "whsec_schemeChangeSecret0123456789"
	type seen struct {
		sig      string
		verified bool
	}
	var (
		mu  sync.Mutex
		got = map[string][]seen{} // event id → deliveries
	)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sig := r.Header.Get("Stripe-Signature")
		err := webhook.ValidatePayload(body, sig, secret)
		var ev struct{ ID string }
		_ = json.Unmarshal(body, &ev) // under none the key is the body's digest: tell them by the body's id
		mu.Lock()
		got[ev.ID] = append(got[ev.ID], seen{sig, err == nil})
		mu.Unlock()
		w.WriteHeader(http.StatusOK) // accepted either way: the test looks at what was sent
	}))
	t.Cleanup(backend.Close)
	db := filepath.Join(t.TempDir(), "journal.db")
	listen, admin := freePort(t), freePort(t)
	env := func(scheme ...string) []string {
		return append([]string{
			"WHGUARD_DATABASE_URL=sqlite:" + db, "WHGUARD_LISTEN=" + listen, "WHGUARD_ADMIN_LISTEN=" + admin,
			"WHGUARD_ADMIN_TOKEN=tok", "WHGUARD_BACKEND_URL=" + backend.URL, "WHGUARD_PROVIDERS=pay",
			"WHGUARD_SHUTDOWN_TIMEOUT=5s",
		}, scheme...)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(body []byte, sig string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+listen+"/webhooks/pay", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if sig != "" {
			req.Header.Set("Stripe-Signature", sig) // forged under none: nothing checks it
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("post: %d", resp.StatusCode)
		}
	}
	delivered := func(id string, n int) []seen {
		t.Helper()
		waitFor(t, 20*time.Second, fmt.Sprintf("%d deliveries of %s", n, id), func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got[id]) >= n
		})
		mu.Lock()
		defer mu.Unlock()
		return append([]seen(nil), got[id]...)
	}

	p := start(t, binary, env("WHGUARD_PAY_SCHEME=none"))
	waitHTTP(t, "http://"+admin+"/readyz", 20*time.Second)
	post([]byte(`{"id":"evt_unverified","object":"event","type":"charge.refunded"}`), "t=1,v1=forged")
	delivered("evt_unverified", 1)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.wait(t, 10*time.Second)

	p = start(t, binary, env("WHGUARD_PAY_SCHEME=stripe", "WHGUARD_PAY_SECRET="+secret))
	waitHTTP(t, "http://"+admin+"/readyz", 20*time.Second)
	body := []byte(`{"id":"evt_verified","object":"event","type":"charge.refunded"}`)
	post(body, webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: time.Now()}).Header)
	if d := delivered("evt_verified", 1); !d[0].verified {
		t.Fatalf("an event verified under stripe was not delivered signed: %+v", d)
	}
	// Replay the one journaled under none.
	var list struct {
		Events []struct {
			ID      int64  `json:"id"`
			EventID string `json:"event_id"`
		} `json:"events"`
	}
	adminGet(t, admin, "tok", "/api/events?limit=10", &list)
	var unverified int64
	for _, e := range list.Events {
		if e.EventID != "evt_verified" {
			unverified = e.ID
		}
	}
	var detail struct {
		Scheme   string `json:"scheme"`
		Unsigned string `json:"unsigned"`
	}
	adminGet(t, admin, "tok", fmt.Sprintf("/api/events/%d", unverified), &detail)
	if detail.Scheme != "none" || !strings.Contains(detail.Unsigned, "without a provider signature") {
		t.Errorf("API shows %+v for the event journaled under none", detail)
	}
	adminPost(t, admin, "tok", fmt.Sprintf("/api/events/%d/replay", unverified), `{"reason":"scheme changed"}`)
	d := delivered("evt_unverified", 2)
	for i, s := range d {
		if s.verified || s.sig != "" && i > 0 {
			t.Errorf("delivery %d of the unverified event carried Stripe-Signature %q (verifies: %v)", i+1, s.sig, s.verified)
		}
	}
}
