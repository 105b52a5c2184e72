package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"
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
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := map[string]string{}
		for _, ev := range adminEvents(t, client, admin, token, "") {
			got[ev.Provider] = ev.Status
		}
		if got["fresh"] == want["fresh"] && got["stale"] == want["stale"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("statuses %v after 15s, want %v\n%s", got, want, tail(wh.out.String(), 3000))
		}
		time.Sleep(50 * time.Millisecond)
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
