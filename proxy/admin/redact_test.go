package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy/admin"
)

// graphBody is a Microsoft Graph notification collection carrying its
// clientState (the scheme's credential) in two items, laid out as a
// sender might.
func graphBody(clientState, changeType string) string {
	return fmt.Sprintf(`{"value": [
  {"subscriptionId": "s-1", "clientState": %q, "changeType": %q},
  {"subscriptionId": "s-2", "clientState" : %q, "lifecycleEvent": "missed"}
]}`, clientState, changeType, clientState)
}

// TestAPIRedactsBodyCredentials: the clientState of an event whose
// provider uses (or that was verified with) scheme msgraph is shown as
// [redacted] by the event and conflicts routes, the rest of the body byte
// for byte; other providers' bodies and the stored body are unchanged;
// Telegram's secret-token header is redacted by default.
func TestAPIRedactsBodyCredentials(t *testing.T) {
	forEachStore(t, func(t *testing.T, store string) {
		j := testdb.OpenStore(t, store, true)
		ctx := context.Background()
		const secret = "graph-client-state-secret"
		ev := func(provider, scheme, id, body string) journal.Event {
			return journal.Event{Provider: provider, Scheme: scheme, EventID: id, ContentHash: "h-" + body, Body: []byte(body), Path: "/",
				Headers: http.Header{"X-Telegram-Bot-Api-Secret-Token": {"tg-secret-token"}, "Content-Type": {"application/json"}}}
		}
		res, err := j.Append(ctx, []journal.Event{
			ev("graph", "msgraph", "g-1", graphBody(secret, "created")),
			ev("other", "standard", "o-1", graphBody("not-a-credential-here", "created")),
			ev("removed", "msgraph", "r-1", graphBody(secret, "updated")),
			ev("graph", "msgraph", "g-2", "not JSON: clientState="+secret),
		})
		if err != nil {
			t.Fatal(err)
		}
		// A copy under the same id with other content: a conflict.
		if _, err := j.Append(ctx, []journal.Event{ev("graph", "msgraph", "g-1", graphBody(secret, "deleted"))}); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(admin.NewAdmin(admin.AdminConfig{
			Ready: j.Ready, Gatherer: prometheus.NewRegistry(), Token: "tok",
			API: admin.NewAPI(admin.APIConfig{Store: j, Providers: []string{"graph", "other"},
				Schemes: map[string]string{"graph": "msgraph", "other": "standard"}}),
		}))
		defer srv.Close()
		a := &apiFixture{srv: srv, j: j}
		show := func(id int64) map[string]any {
			t.Helper()
			s, m := a.do(t, "GET", fmt.Sprintf("/api/events/%d", id), "tok", "")
			if s != 200 {
				t.Fatalf("event %d: %d %v", id, s, m)
			}
			raw, _ := json.Marshal(m)
			if strings.Contains(string(raw), secret) || strings.Contains(string(raw), "tg-secret-token") {
				t.Fatalf("the API shows a credential: %s", raw)
			}
			if h := m["headers"].(map[string]any); h["X-Telegram-Bot-Api-Secret-Token"].([]any)[0] != admin.Redacted {
				t.Fatalf("headers %v", h)
			}
			return m
		}
		if got, want := show(res[0].ID)["body"], graphBody(admin.Redacted, "created"); got != want {
			t.Fatalf("msgraph body\n%s\nwant\n%s", got, want)
		}
		if got, want := show(res[2].ID)["body"], graphBody(admin.Redacted, "updated"); got != want {
			t.Fatalf("body of an event verified as msgraph, provider removed since: %s", got)
		}
		if got := show(res[3].ID)["body"]; got != admin.Redacted {
			t.Fatalf("unparseable msgraph body shown as %q", got)
		}
		if s, m := a.do(t, "GET", fmt.Sprintf("/api/events/%d", res[1].ID), "tok", ""); s != 200 || m["body"] != graphBody("not-a-credential-here", "created") {
			t.Fatalf("another scheme's body changed: %d %v", s, m["body"])
		}
		s, m := a.do(t, "GET", fmt.Sprintf("/api/events/%d/conflicts", res[0].ID), "tok", "")
		cs, _ := m["conflicts"].([]any)
		if s != 200 || len(cs) != 1 || cs[0].(map[string]any)["body"] != graphBody(admin.Redacted, "deleted") {
			t.Fatalf("conflicts: %d %v", s, m)
		}
		// A search cannot confirm a guessed clientState either.
		for _, ptr := range []string{"/value/0/clientState", "/value/1/clientstate"} {
			s, m := a.do(t, "GET", "/api/events?match="+url.QueryEscape(ptr+"="+secret), "tok", "")
			if s != 400 || !strings.Contains(fmt.Sprint(m["error"]), "credential") {
				t.Fatalf("match on %s: %d %v, want 400", ptr, s, m)
			}
		}
		if s, _ := a.do(t, "GET", "/api/events?match="+url.QueryEscape("/value/0/changeType=created"), "tok", ""); s != 200 {
			t.Fatalf("match on another member: %d", s)
		}
		// Stored (and so forwarded) as received.
		d, err := j.Get(ctx, res[0].ID)
		if err != nil || string(d.Body) != graphBody(secret, "created") || d.Headers.Get("X-Telegram-Bot-Api-Secret-Token") != "tg-secret-token" {
			t.Fatalf("stored %q %v %v", d.Body, d.Headers, err)
		}
	})
}
