package verify

import (
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

// mailgunVector is the computed vector of timestamp 1700000000 and token
// tok-1 (no example is published; Mailgun's docs,
// https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks,
// give the construction).
const mailgunVector = "da759b87a248fc20916b47052ba67083b98916e54f906e3ee3c5db2215a17cc8"

// signMailgun returns the hex signature of timestamp+token, computed here
// independently of the package.
func signMailgun(key, ts, token string) string {
	return hex.EncodeToString(hmacSHA256([]byte(key), ts, token))
}

// mailgunBody builds a JSON webhook body around a signature block.
func mailgunBody(block, eventData string) string {
	return `{"signature":` + block + `,"event-data":` + eventData + `}`
}

func mailgunBlock(ts, token, sig string) string {
	return `{"timestamp":"` + ts + `","token":"` + token + `","signature":"` + sig + `"}`
}

const mailgunEvent = `{"id":"CPgfbmQMTCKtHW6uIWtuVe","event":"delivered","timestamp":1700000000.12,"recipient":"a@example.com"}`

func TestMailgunCheck(t *testing.T) {
	now := time.Unix(ringUnix, 0)
	base := ProviderConfig{Name: "mailgun", Scheme: SchemeMailgun, Secrets: []string{ringSecret}}
	json := headers("Content-Type", "application/json")
	good := mailgunBody(mailgunBlock("1700000000", "tok-1", mailgunVector), mailgunEvent)
	id := "CPgfbmQMTCKtHW6uIWtuVe"
	subaccount := signMailgun("subaccount-key", "1700000000", "tok-1")
	runCheckCases(t, base, []checkCase{
		{name: "vector", header: json, body: good, now: now, wantID: id},
		{name: "no Content-Type", header: headers(), body: good, now: now, wantID: id},
		{name: "numeric timestamp", header: json, body: mailgunBody(`{"timestamp":1700000000,"token":"tok-1","signature":"`+mailgunVector+`"}`, mailgunEvent),
			now: now, wantID: id},
		{name: "parent-signature with the primary key", header: json, now: now, wantID: id,
			body: mailgunBody(`{"timestamp":"1700000000","token":"tok-1","signature":"`+subaccount+`","parent-signature":"`+mailgunVector+`"}`, mailgunEvent)},
		{name: "the event data is not signed", header: json, body: mailgunBody(mailgunBlock("1700000000", "tok-1", mailgunVector), `{"id":"forged","event":"failed"}`),
			now: now, wantID: "forged"},
		{name: "tampered token", header: json, body: mailgunBody(mailgunBlock("1700000000", "tok-2", mailgunVector), mailgunEvent), now: now,
			wantErr: ErrUnauthorized, wantMsg: "no signature matches"},
		{name: "tampered timestamp", header: json, body: mailgunBody(mailgunBlock("1700000001", "tok-1", mailgunVector), mailgunEvent), now: now,
			wantErr: ErrUnauthorized},
		{name: "subaccount signature alone", header: json, body: mailgunBody(mailgunBlock("1700000000", "tok-1", subaccount), mailgunEvent), now: now,
			wantErr: ErrUnauthorized},
		{name: "wrong secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{"other"} }, header: json, body: good, now: now, wantErr: ErrUnauthorized},
		{name: "rotation: the previous key signs", cfg: func(c *ProviderConfig) { c.Secrets = []string{"other", ringSecret} }, header: json, body: good, now: now, wantID: id},
		{name: "stale", header: json, body: good, now: now.Add(9*time.Hour + time.Second), wantErr: ErrUnauthorized, wantMsg: "older"},
		{name: "future", header: json, body: good, now: now.Add(-9*time.Hour - time.Second), wantErr: ErrUnauthorized, wantMsg: "future"},
		{name: "a retry 8 hours later", header: json, body: good, now: now.Add(8 * time.Hour), wantID: id},
		{name: "configured tolerance", cfg: func(c *ProviderConfig) { c.Tolerance = 5 * time.Minute }, header: json, body: good, now: now.Add(6 * time.Minute),
			wantErr: ErrUnauthorized, wantMsg: "older"},
		{name: "no signature object", header: json, body: `{"event-data":` + mailgunEvent + `}`, now: now, wantErr: ErrBadRequest, wantMsg: "no signature object"},
		{name: "signature not an object", header: json, body: `{"signature":"` + mailgunVector + `"}`, now: now, wantErr: ErrBadRequest},
		{name: "not JSON", header: json, body: "signature", now: now, wantErr: ErrBadRequest, wantMsg: "form post"},
		{name: "JSON array", header: json, body: "[]", now: now, wantErr: ErrBadRequest},
		{name: "bad hex", header: json, body: mailgunBody(mailgunBlock("1700000000", "tok-1", strings.Repeat("z", 64)), mailgunEvent), now: now,
			wantErr: ErrBadRequest, wantMsg: "64 hex"},
		{name: "no timestamp", header: json, body: mailgunBody(`{"token":"tok-1","signature":"`+mailgunVector+`"}`, mailgunEvent), now: now,
			wantErr: ErrBadRequest, wantMsg: "timestamp"},
		{name: "fractional timestamp", header: json, body: mailgunBody(`{"timestamp":1700000000.5,"token":"tok-1","signature":"`+mailgunVector+`"}`, mailgunEvent),
			now: now, wantErr: ErrBadRequest, wantMsg: "timestamp"},
		{name: "no token", header: json, body: mailgunBody(mailgunBlock("1700000000", "", mailgunVector), mailgunEvent), now: now, wantErr: ErrBadRequest, wantMsg: "token"},
		{name: "token too long", header: json, body: mailgunBody(mailgunBlock("1700000000", strings.Repeat("t", 257), mailgunVector), mailgunEvent), now: now,
			wantErr: ErrBadRequest, wantMsg: "token"},
	})

	p := mustProvider(t, base)
	ev, err := p.Check(Input{Header: json, Body: []byte(good)}, now)
	if err != nil || ev.ID != id || ev.Type != "delivered" {
		t.Errorf("event = %+v, %v; want id %s, type delivered", ev, err, id)
	}
	// A retry signed afresh is a duplicate, not a conflict.
	resent := mailgunBody(mailgunBlock("1700000300", "tok-9", signMailgun(ringSecret, "1700000300", "tok-9")), mailgunEvent)
	again, err := p.Check(Input{Header: json, Body: []byte(resent)}, now.Add(5*time.Minute))
	if err != nil || again.ID != ev.ID || again.ContentHash != ev.ContentHash {
		t.Errorf("re-signed retry: %+v, %v; want the first event's id and content hash %+v", again, err, ev)
	}
	if p.IDSigned() {
		t.Error("IDSigned = true: event-data.id is not signed")
	}
	if p.CanResign() || ResignSupport(SchemeMailgun) != ResignBodyTimestamp {
		t.Errorf("CanResign %v, ResignSupport %q", p.CanResign(), ResignSupport(SchemeMailgun))
	}
	// Nothing is in the headers: Precheck never refuses before the body is read.
	if err := p.Precheck(json, "", "", now); err != nil {
		t.Errorf("Precheck: %v", err)
	}
	if err := p.Precheck(headers("Content-Type", "application/x-www-form-urlencoded"), "", "", now); err != nil {
		t.Errorf("Precheck (form): %v", err)
	}
}

// Legacy webhooks post the signature fields beside the event's fields.
func TestMailgunLegacyForm(t *testing.T) {
	now := time.Unix(ringUnix, 0)
	p := mustProvider(t, ProviderConfig{Name: "mailgun", Scheme: SchemeMailgun, Secrets: []string{ringSecret}})
	form := headers("Content-Type", "application/x-www-form-urlencoded")
	fields := url.Values{"timestamp": {"1700000000"}, "token": {"tok-1"}, "signature": {mailgunVector}, "event": {"delivered"},
		"Message-Id": {"<20231114.1@example.com>"}, "recipient": {"a@example.com"}}
	ev, err := p.Check(Input{Header: form, Body: []byte(fields.Encode())}, now)
	if err != nil || ev.Type != "delivered" || !strings.HasPrefix(ev.ID, "sha256:") {
		t.Fatalf("legacy form: %+v, %v; want type delivered keyed by its digest", ev, err)
	}
	fields.Set("token", "tok-2")
	if _, err := p.Check(Input{Header: form, Body: []byte(fields.Encode())}, now); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("tampered token: %v", err)
	}
	for _, body := range []string{"a=%zz", "event=delivered"} {
		_, err := p.Check(Input{Header: form, Body: []byte(body)}, now)
		if !errors.Is(err, ErrBadRequest) || Reason(err) != ReasonMalformedBody || strings.Contains(err.Error(), "zz") {
			t.Errorf("form %q: %v", body, err)
		}
	}
}
