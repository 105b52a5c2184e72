package verify

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"
)

const (
	zendeskTS = "2023-11-14T22:13:20Z"
	// zendeskVector is the computed vector of ringBody at zendeskTS (no
	// example is published; Zendesk's docs,
	// https://developer.zendesk.com/documentation/webhooks/verifying/, give
	// base64(HMACSHA256(TIMESTAMP + BODY))).
	zendeskVector = "KBSXi0Mki8cuVrKPICNMCmrNKGm243myjTeX6rK7XFg="
	// zendeskTestSecret is the secret Zendesk signs test sends with before
	// a webhook exists (same page), used verbatim; a third-party verifier's
	// fixture signs the body below with it.
	zendeskTestSecret  = "dGhpc19zZWNyZXRfaXNfZm9yX3Rlc3Rpbmdfb25seQ=="
	zendeskFixtureTS   = "2021-03-25T05:09:27Z"
	zendeskFixtureBody = `{"event":"ticket.updated","id":123}`
	zendeskFixtureSig  = "S/RDdU2ERmj7LHDDoWJ2onPYH+t7/f2+LTM4dL7UiLM="
	// zendeskEventBody has the shape of an event-subscription delivery.
	zendeskEventBody = `{"type":"zen:event-type:ticket.created","account_id":123,"id":"cbe4028c-7239-495d-b020-f22348516046","time":"2023-11-14T22:13:19Z","zendesk_event_version":"2022-11-06","subject":"zen:ticket:1","detail":{"id":"1"},"event":{}}`
)

// signZendesk returns an X-Zendesk-Webhook-Signature value, computed here
// independently of the package.
func signZendesk(secret, ts, body string) string {
	return base64.StdEncoding.EncodeToString(hmacSHA256([]byte(secret), ts, body))
}

func zendeskHeaders(sig, ts string) http.Header {
	return headers("X-Zendesk-Webhook-Signature", sig, "X-Zendesk-Webhook-Signature-Timestamp", ts)
}

func TestZendeskCheck(t *testing.T) {
	now := time.Unix(ringUnix, 0)
	base := ProviderConfig{Name: "zendesk", Scheme: SchemeZendesk, Secrets: []string{ringSecret}}
	canonical, err := Canonicalize([]byte(ringBody))
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256Hex(string(canonical))
	fixtureNow, _ := time.Parse(time.RFC3339, zendeskFixtureTS)
	runCheckCases(t, base, []checkCase{
		{name: "vector (a trigger body: digest)", header: zendeskHeaders(zendeskVector, zendeskTS), body: ringBody, now: now, wantID: digest},
		{name: "third-party fixture with Zendesk's test secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{zendeskTestSecret} },
			header: zendeskHeaders(zendeskFixtureSig, zendeskFixtureTS), body: zendeskFixtureBody, now: fixtureNow},
		{name: "test secret not base64-decoded", cfg: func(c *ProviderConfig) { c.Secrets = []string{"this_secret_is_for_testing_only"} },
			header: zendeskHeaders(zendeskFixtureSig, zendeskFixtureTS), body: zendeskFixtureBody, now: fixtureNow, wantErr: ErrUnauthorized},
		{name: "empty body", header: zendeskHeaders(signZendesk(ringSecret, zendeskTS, ""), zendeskTS), body: "", now: now, wantID: sha256Hex("")},
		{name: "tampered body", header: zendeskHeaders(zendeskVector, zendeskTS), body: strings.Replace(ringBody, "1", "2", 1), now: now,
			wantErr: ErrUnauthorized, wantMsg: "no signature matches"},
		{name: "timestamp written otherwise", header: zendeskHeaders(zendeskVector, "2023-11-14T22:13:20.000Z"), body: ringBody, now: now, wantErr: ErrUnauthorized},
		{name: "wrong secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{"other"} }, header: zendeskHeaders(zendeskVector, zendeskTS), body: ringBody,
			now: now, wantErr: ErrUnauthorized},
		{name: "rotation: the previous secret signs", cfg: func(c *ProviderConfig) { c.Secrets = []string{"other", ringSecret} },
			header: zendeskHeaders(zendeskVector, zendeskTS), body: ringBody, now: now, wantID: digest},
		{name: "stale", header: zendeskHeaders(zendeskVector, zendeskTS), body: ringBody, now: now.Add(5*time.Minute + time.Second), wantErr: ErrUnauthorized, wantMsg: "older"},
		{name: "future", header: zendeskHeaders(zendeskVector, zendeskTS), body: ringBody, now: now.Add(-5*time.Minute - time.Second), wantErr: ErrUnauthorized, wantMsg: "future"},
		{name: "missing signature", header: zendeskHeaders("", zendeskTS), body: ringBody, now: now, wantErr: ErrBadRequest, wantMsg: "Signature header"},
		{name: "missing timestamp", header: zendeskHeaders(zendeskVector, ""), body: ringBody, now: now, wantErr: ErrBadRequest, wantMsg: "Timestamp"},
		{name: "unix timestamp", header: zendeskHeaders(zendeskVector, "1700000000"), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "RFC 3339"},
		{name: "hex signature", header: zendeskHeaders(strings.Repeat("ab", 32), zendeskTS), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "base64"},
		{name: "unpadded", header: zendeskHeaders(strings.TrimSuffix(zendeskVector, "="), zendeskTS), body: ringBody, now: now, wantErr: ErrUnauthorized},
		{name: "too long", header: zendeskHeaders(strings.Repeat("A", 5000), zendeskTS), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "longer"},
	})

	p := mustProvider(t, base)
	ev, err := p.Check(Input{Header: zendeskHeaders(signZendesk(ringSecret, zendeskTS, zendeskEventBody), zendeskTS), Body: []byte(zendeskEventBody)}, now)
	if err != nil || ev.ID != "cbe4028c-7239-495d-b020-f22348516046" || ev.Type != "zen:event-type:ticket.created" {
		t.Errorf("event subscription: %+v, %v; want its id and type", ev, err)
	}
	// A trigger body's own "id" (a number here) is not an event id.
	ev, err = p.Check(Input{Header: zendeskHeaders(signZendesk(ringSecret, zendeskTS, zendeskFixtureBody), zendeskTS), Body: []byte(zendeskFixtureBody)}, now)
	if err != nil || !strings.HasPrefix(ev.ID, "sha256:") || ev.Type != "" {
		t.Errorf("trigger body: %+v, %v; want the digest and no type", ev, err)
	}
	if !p.IDSigned() {
		t.Error("IDSigned = false: the id comes from the signed body")
	}
}

// init registers the scheme's case of TestRingBResignRoundTrip.
func init() {
	ringBResignCases = append(ringBResignCases, ringBResignCase{
		name: "zendesk", cfg: ProviderConfig{Scheme: SchemeZendesk}, body: zendeskEventBody, sigHeader: "X-Zendesk-Webhook-Signature",
		sign: func(secret string, at time.Time) http.Header {
			ts := at.UTC().Format(time.RFC3339)
			return zendeskHeaders(signZendesk(secret, ts, zendeskEventBody), ts)
		},
	})
}
