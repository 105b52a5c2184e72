package main

import (
	"crypto/sha1"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/whguard/whguard/examples/backends/twiml"
	"github.com/whguard/whguard/internal/testdb"
)

// TestE2ESyncTwilio: the real binary, configured from the environment with
// a Twilio provider in sync mode, answers a signed SMS with the TwiML of
// the example app, answers its duplicate with the same TwiML without
// calling the app (on PostgreSQL, at another replica too), and shows the
// stored reply in the API's event detail.
func TestE2ESyncTwilio(t *testing.T) {
	testdb.ForEachStore(t, func(t *testing.T, store string) {
		t.Parallel()
		app := twiml.New()
		backend := httptest.NewServer(app)
		t.Cleanup(backend.Close) // after the replicas are killed (cleanups run last first)
		const token = "twilio-auth-token-sync-e2e"
		// Behind a load balancer every replica is configured with the URL
		// Twilio posts to, which is what it signs.
		const publicURL = "https://hooks.example.com/webhooks/sms"
		dbURL := journalURL(t, store)
		replica := func() (listen, admin string) {
			listen, admin = freePort(t), freePort(t)
			start(t, binary, []string{
				"WHGUARD_DATABASE_URL=" + dbURL,
				"WHGUARD_LISTEN=" + listen, "WHGUARD_ADMIN_LISTEN=" + admin, "WHGUARD_ADMIN_TOKEN=e2e-token",
				"WHGUARD_PROVIDERS=sms",
				"WHGUARD_SMS_SCHEME=twilio", "WHGUARD_SMS_SECRET=" + token, "WHGUARD_SMS_PUBLIC_URL=" + publicURL,
				"WHGUARD_SMS_MODE=sync", "WHGUARD_SMS_SYNC_TIMEOUT=5s",
				"WHGUARD_BACKEND_URL=" + backend.URL, "WHGUARD_SHUTDOWN_TIMEOUT=5s",
			})
			waitHTTP(t, "http://"+admin+"/readyz", 20*time.Second)
			return listen, admin
		}
		listen, admin := replica()

		params := url.Values{"MessageSid": {"SM0001"}, "From": {"+14155550100"}, "To": {"+14155550199"}, "Body": {"hello"}}
		names := make([]string, 0, len(params))
		for k := range params {
			names = append(names, k)
		}
		sort.Strings(names)
		signed := publicURL
		for _, k := range names {
			signed += k + params.Get(k)
		}
		sig := b64MAC(sha1.New, token, signed)
		send := func(listen string) (int, string, string) {
			req, _ := http.NewRequest(http.MethodPost, "http://"+listen+"/webhooks/sms", strings.NewReader(params.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-Twilio-Signature", sig)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
		}
		code, ct, body := send(listen)
		if code != 200 || ct != "text/xml" || !strings.Contains(body, "<Message>You said: hello</Message>") {
			t.Fatalf("first: %d %q %s", code, ct, body)
		}
		app.SetPrefix("Changed: ")
		if c2, ct2, b2 := send(listen); c2 != code || ct2 != ct || b2 != body || app.Calls() != 1 {
			t.Fatalf("duplicate: %d %q %s; app called %d times", c2, ct2, b2, app.Calls())
		}
		if store == "postgres" {
			// The reply is in the journal: a duplicate reaching another
			// replica gets it too.
			other, _ := replica()
			if c3, ct3, b3 := send(other); c3 != code || ct3 != ct || b3 != body || app.Calls() != 1 {
				t.Fatalf("duplicate at another replica: %d %q %s; app called %d times", c3, ct3, b3, app.Calls())
			}
		}

		evs := adminEvents(t, http.DefaultClient, admin, "e2e-token", "provider=sms")
		if len(evs) != 1 {
			t.Fatalf("%d events", len(evs))
		}
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/api/events/%d", admin, evs[0].ID), nil)
		req.Header.Set("Authorization", "Bearer e2e-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var detail struct {
			Reply *struct {
				Status      int    `json:"status"`
				ContentType string `json:"content_type"`
				BodyExcerpt string `json:"body_excerpt"`
			} `json:"reply"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&detail); err != nil {
			t.Fatal(err)
		}
		if detail.Reply == nil || detail.Reply.Status != 200 || detail.Reply.ContentType != "text/xml" || detail.Reply.BodyExcerpt != body {
			t.Fatalf("API reply %+v", detail.Reply)
		}
	})
}
