package proxy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy"
	"github.com/whguard/whguard/verify"
)

// FuzzIngress sends arbitrary paths, headers, queries and bodies to the
// real ingress over a real journal. Whatever arrives, the answer is one of
// the documented statuses with a JSON body, and a 2xx only ever answers an
// event that is in the journal.
func FuzzIngress(f *testing.F) {
	f.Add("/webhooks/std", "msg_1", "1614265330", "v1,abc", "", `{"type":"a"}`)
	f.Add("/webhooks/open", "", "", "", "a=1&b=%ff", `{"id":1,"id":2}`)
	f.Add("/webhooks/open", "x", "", "", "", "\x00\xff")
	f.Add("/nope", "", "", "", "", "")
	j := testdb.OpenStore(f, "sqlite", true)
	std, err := verify.NewProvider(verify.ProviderConfig{Name: "std", Scheme: "standard", Secrets: []string{stdSecret}})
	if err != nil {
		f.Fatal(err)
	}
	open, err := verify.NewProvider(verify.ProviderConfig{Name: "open", Scheme: "none"})
	if err != nil {
		f.Fatal(err)
	}
	in, err := proxy.NewIngress(proxy.IngressConfig{
		Routes: []proxy.Route{{Path: "/webhooks/std", Provider: std}, {Path: "/webhooks/open", Provider: open, MaxBodyBytes: 256}},
		Intake: newIntake(f, j, nil),
	})
	if err != nil {
		f.Fatal(err)
	}
	allowed := map[int]bool{200: true, 202: true, 400: true, 401: true, 404: true, 405: true, 409: true, 413: true}
	f.Fuzz(func(t *testing.T, path, id, ts, sig, query, body string) {
		u := &url.URL{Path: path, RawQuery: query}
		if !strings.HasPrefix(path, "/") {
			u.Path = "/" + path
		}
		req := httptest.NewRequest(http.MethodPost, "http://whguard.test/", strings.NewReader(body))
		req.URL = u
		for name, v := range map[string]string{"Webhook-Id": id, "Webhook-Timestamp": ts, "Webhook-Signature": sig} {
			if v != "" {
				req.Header[name] = []string{v}
			}
		}
		rec := httptest.NewRecorder()
		in.ServeHTTP(rec, req)
		if !allowed[rec.Code] {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); rec.Body.Len() > 0 && ct != "application/json" {
			t.Fatalf("status %d with Content-Type %q", rec.Code, ct)
		}
		if rec.Code/100 == 2 {
			// The answer names the event: it must be in the journal.
			var ack struct {
				Provider string `json:"provider"`
				EventID  string `json:"event_id"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &ack); err != nil || ack.EventID == "" {
				t.Fatalf("%d with a body that names no event: %s", rec.Code, rec.Body)
			}
			evs, _, err := j.List(context.Background(), journal.Filter{Provider: ack.Provider, EventID: ack.EventID, Limit: 1})
			if err != nil || len(evs) != 1 {
				t.Fatalf("%d for %s/%s, which is not in the journal (%v)", rec.Code, ack.Provider, ack.EventID, err)
			}
		}
	})
}
