package verify

import (
	"crypto/sha512"
	"net/http"
	"testing"
	"time"
)

// TestBodyHMACIDsAndTypes: where each scheme finds the id and type beyond
// its fixture's request: fallbacks, absent headers, partial bodies.
func TestBodyHMACIDsAndTypes(t *testing.T) {
	fixture := func(scheme string) bodyHMACFixture {
		for _, f := range bodyHMACFixtures {
			if f.scheme == scheme {
				return f
			}
		}
		t.Fatalf("no fixture for %s", scheme)
		return bodyHMACFixture{}
	}
	const notJSON = "payload=1"
	for _, tc := range []struct {
		name, scheme, body string
		kv                 []string
		wantID, wantType   string // wantID "" = the body digest
	}{
		{"razorpay: no event id header", SchemeRazorpay, `{"event":"order.paid"}`, nil, "", "order.paid"},
		{"bitbucket: Data Center X-Request-Id", SchemeBitbucket, `{"eventKey":"repo:refs_changed"}`,
			[]string{"X-Request-Id", "c8a4c2e0-1111-2222-3333-444455556666", "X-Event-Key", "repo:refs_changed"}, "c8a4c2e0-1111-2222-3333-444455556666", "repo:refs_changed"},
		{"bitbucket: Cloud UUID preferred", SchemeBitbucket, `{}`, []string{"X-Request-Id", "dc", "X-Request-UUID", "cloud"}, "cloud", ""},
		{"bitbucket: no id header", SchemeBitbucket, `{"push":{}}`, []string{"X-Event-Key", "repo:push"}, "", "repo:push"},
		{"atlassian: no identifier", SchemeAtlassian, `{"webhookEvent":"comment_created"}`, nil, "", "comment_created"},
		{"sentry: resource alone", SchemeSentry, `{"data":{}}`, []string{"Sentry-Hook-Resource", "event_alert"}, "", "event_alert"},
		{"sentry: action alone", SchemeSentry, `{"action":"resolved"}`, nil, "", "resolved"},
		{"sentry: installation is an event", SchemeSentry, `{"action":"deleted","data":{"installation":{}}}`,
			[]string{"Sentry-Hook-Resource", "installation", "Request-ID", "r-1"}, "r-1", "installation.deleted"},
		{"typeform: no event_id", SchemeTypeform, `{"event_type":"form_response"}`, nil, "", "form_response"},
		{"typeform: not JSON", SchemeTypeform, notJSON, nil, sha256Hex(notJSON), ""},
		{"vercel: not JSON", SchemeVercel, notJSON, nil, sha256Hex(notJSON), ""},
		{"paystack: not keyed on data.id", SchemePaystack, `{"event":"invoice.update","data":{"id":7,"status":"pending"}}`, nil, "", "invoice.update"},
		{"meta: fields differ", SchemeMeta, `{"object":"page","entry":[{"changes":[{"field":"feed"}]},{"changes":[{"field":"mention"}]}]}`, nil, "", "page"},
		{"meta: messaging entries", SchemeMeta, `{"object":"page","entry":[{"id":"1","messaging":[{"message":{}}]}]}`, nil, "", "page"},
		{"meta: whatsapp", SchemeMeta, `{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages"}]},{"changes":[{"field":"messages"}]}]}`,
			nil, "", "whatsapp_business_account.messages"},
		{"meta: no object", SchemeMeta, `{"entry":[{"changes":[{"field":"feed"}]}]}`, nil, "", ""},
		{"twitter: first _events key", SchemeTwitter, `{"for_user_id":"1","user_event":{},"favorite_events":[],"tweet_create_events":[]}`, nil, "", "favorite_events"},
		{"twitter: none", SchemeTwitter, `{"data":{"id":"1"}}`, nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fixture(tc.scheme)
			h := headers(append([]string{f.header, f.sign(ringASecret, tc.body)}, tc.kv...)...)
			ev, err := mustProvider(t, f.config(ringASecret)).Check(Input{Header: h, Body: []byte(tc.body)}, time.Now())
			want := tc.wantID
			if want == "" {
				want = canonicalDigest(t, tc.body)
			}
			if err != nil || ev.ID != want || ev.Type != tc.wantType {
				t.Fatalf("event %+v, %v; want id %s, type %q", ev, err, want, tc.wantType)
			}
		})
	}
}

// TestBodyHMACPaystackDistinctUpdates: two updates of one invoice are two
// events, not a duplicate and a conflict of one.
func TestBodyHMACPaystackDistinctUpdates(t *testing.T) {
	p := mustProvider(t, ProviderConfig{Name: "ps", Scheme: SchemePaystack, Secrets: []string{ringASecret}})
	ids := map[string]bool{}
	for _, body := range []string{`{"event":"invoice.update","data":{"id":7,"status":"pending"}}`, `{"event":"invoice.update","data":{"id":7,"status":"success"}}`} {
		h := http.Header{}
		h.Set("X-Paystack-Signature", signGenericHMAC(sha512.New, false, "", ringASecret, body))
		ev, err := p.Check(Input{Header: h, Body: []byte(body)}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ids[ev.ID] = true
	}
	if len(ids) != 2 {
		t.Fatalf("two invoice updates share an id")
	}
}
