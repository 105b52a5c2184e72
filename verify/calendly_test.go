package verify

import (
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// calendlyVector is the computed vector (no example is published; Calendly's
// docs, https://developer.calendly.com/api-docs/overview/webhooks/webhook-signatures,
// give the construction).
const calendlyVector = "t=1700000000,v1=4c291b00f6b0a16a0cd20fbb84565eaea4fc683d0d4e6c9d031f5226e3f9ac2a"

// calendlyBody has the shape of an invitee.created delivery.
const calendlyBody = `{"created_at":"2023-11-14T22:13:19.000000Z","created_by":"https://api.calendly.com/users/AAAA","event":"invitee.created","payload":{"uri":"https://api.calendly.com/scheduled_events/BBBB/invitees/CCCC","email":"a@example.com"}}`

// signCalendly returns a Calendly-Webhook-Signature value, computed here
// independently of the package.
func signCalendly(secret string, ts int64, body string) string {
	t := strconv.FormatInt(ts, 10)
	return "t=" + t + ",v1=" + hex.EncodeToString(hmacSHA256([]byte(secret), t, ".", body))
}

func TestCalendlyCheck(t *testing.T) {
	now := time.Unix(ringUnix, 0)
	base := ProviderConfig{Name: "calendly", Scheme: SchemeCalendly, Secrets: []string{ringSecret}}
	h := func(v string) http.Header { return headers("Calendly-Webhook-Signature", v) }
	canonical, err := Canonicalize([]byte(ringBody))
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256Hex(string(canonical))
	other := signCalendly("other-key", ringUnix, ringBody)
	runCheckCases(t, base, []checkCase{
		{name: "vector", header: h(calendlyVector), body: ringBody, now: now, wantID: digest},
		{name: "two v1, one good", header: h(other + "," + calendlyVector[len("t=1700000000,"):]), body: ringBody, now: now, wantID: digest},
		{name: "tampered body", header: h(calendlyVector), body: ringBody + " ", now: now, wantErr: ErrUnauthorized, wantMsg: "no signature matches"},
		{name: "tampered t", header: h("t=1700000001" + calendlyVector[len("t=1700000000"):]), body: ringBody, now: now, wantErr: ErrUnauthorized},
		{name: "wrong secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{"other-key"} }, header: h(calendlyVector), body: ringBody, now: now,
			wantErr: ErrUnauthorized},
		{name: "rotation: the previous key signs", cfg: func(c *ProviderConfig) { c.Secrets = []string{"other-key", ringSecret} },
			header: h(calendlyVector), body: ringBody, now: now, wantID: digest},
		{name: "stale", header: h(calendlyVector), body: ringBody, now: now.Add(3*time.Minute + time.Second), wantErr: ErrUnauthorized, wantMsg: "older"},
		{name: "future", header: h(calendlyVector), body: ringBody, now: now.Add(-3*time.Minute - time.Second), wantErr: ErrUnauthorized, wantMsg: "future"},
		{name: "within 3 minutes", header: h(calendlyVector), body: ringBody, now: now.Add(3 * time.Minute), wantID: digest},
		{name: "configured tolerance", cfg: func(c *ProviderConfig) { c.Tolerance = time.Hour }, header: h(calendlyVector), body: ringBody,
			now: now.Add(30 * time.Minute), wantID: digest},
		{name: "missing", header: headers(), body: ringBody, now: now, wantErr: ErrBadRequest, wantMsg: "missing Calendly-Webhook-Signature"},
		{name: "no t", header: h(calendlyVector[len("t=1700000000,"):]), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "no t="},
		{name: "no v1", header: h("t=1700000000"), body: ringBody, now: now, wantErr: ErrUnauthorized},
		{name: "ms timestamp", header: h("t=1700000000000" + calendlyVector[len("t=1700000000"):]), body: ringBody, now: now, wantErr: ErrUnauthorized},
		{name: "pair without =", header: h(calendlyVector + ",x"), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "malformed"},
		{name: "too long", header: h(calendlyVector + strings.Repeat(",v0=0", 1000)), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "longer"},
	})

	p := mustProvider(t, base)
	ev, err := p.Check(Input{Header: h(signCalendly(ringSecret, ringUnix, calendlyBody)), Body: []byte(calendlyBody)}, now)
	if err != nil || ev.Type != "invitee.created" || !strings.HasPrefix(ev.ID, "sha256:") {
		t.Errorf("event = %+v, %v; want type invitee.created keyed by its digest", ev, err)
	}
	if !p.IDSigned() {
		t.Error("IDSigned = false: the digest of the signed body is signed")
	}
}

// init registers the scheme's case of TestRingBResignRoundTrip.
func init() {
	ringBResignCases = append(ringBResignCases, ringBResignCase{
		name: "calendly", cfg: ProviderConfig{Scheme: SchemeCalendly}, body: calendlyBody, sigHeader: "Calendly-Webhook-Signature",
		sign: func(secret string, at time.Time) http.Header {
			return headers("Calendly-Webhook-Signature", signCalendly(secret, at.Unix(), calendlyBody))
		},
	})
}
