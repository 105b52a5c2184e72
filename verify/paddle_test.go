package verify

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	paddleSecret      = "pdl_ntfset_01gkpjp8bkm3tm53kdgkx6sms7_6h3qd3uFSi9YCD3OLYAShQI90XTI5vEI"
	paddleOtherSecret = "pdl_ntfset_01hv8x2acma7w2zjqrrwn8qxzd_oldsecretoldsecretoldsecret00"
	paddleTS          = int64(1671552777)
	paddleBody        = `{"event_id":"evt_01h8bzakzx3hm2fmen703n5q45","event_type":"transaction.completed","occurred_at":"2023-08-21T11:57:48.802645Z","notification_id":"ntf_01h8bzam1z32agrxjwhjgqk8w6","data":{"id":"txn_01h8bz9t4x4ff4s6jq4g3zt3td","status":"completed"}}`
)

// signPaddle returns the hex h1 of body at ts (Paddle docs: HMAC-SHA256 of
// "{ts}:{body}" with the endpoint secret key).
func signPaddle(secret string, ts int64, body string) string {
	return hex.EncodeToString(hmacSHA256([]byte(secret), strconv.FormatInt(ts, 10), ":", body))
}

func TestPaddleCheck(t *testing.T) {
	now := time.Unix(paddleTS, 0)
	good := signPaddle(paddleSecret, paddleTS, paddleBody)
	other := signPaddle(paddleOtherSecret, paddleTS, paddleBody)
	ph := func(v string) http.Header { return headers("Paddle-Signature", v) }
	hdr := func(v string) http.Header { return ph(fmt.Sprintf("ts=%d;%s", paddleTS, v)) }
	manyH1 := func(n int, last string) string {
		parts := make([]string, 0, n)
		for range n - 1 {
			parts = append(parts, "h1="+other)
		}
		return strings.Join(append(parts, "h1="+last), ";")
	}
	base := ProviderConfig{Name: "paddle", Scheme: SchemePaddle, Secrets: []string{paddleSecret}}
	const wantID = "evt_01h8bzakzx3hm2fmen703n5q45"
	notJSON := "event_id=evt_1"
	noID := `{"event_type":"transaction.completed"}`
	runCheckCases(t, base, []checkCase{
		{name: "valid", header: hdr("h1=" + good), body: paddleBody, now: now, wantID: wantID},
		{name: "h1 before ts", header: ph(fmt.Sprintf("h1=%s;ts=%d", good, paddleTS)), body: paddleBody, now: now, wantID: wantID},
		{name: "uppercase hex", header: hdr("h1=" + strings.ToUpper(good)), body: paddleBody, now: now, wantID: wantID},
		{name: "wrong secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{paddleOtherSecret} },
			header: hdr("h1=" + good), body: paddleBody, now: now, wantErr: ErrUnauthorized, wantMsg: "no signature matches"},
		{name: "tampered body", header: hdr("h1=" + good), body: strings.Replace(paddleBody, "completed", "refunded", 1), now: now, wantErr: ErrUnauthorized},
		{name: "tampered timestamp", header: ph(fmt.Sprintf("ts=%d;h1=%s", paddleTS+1, good)), body: paddleBody, now: now, wantErr: ErrUnauthorized},
		{name: "rotated: second configured secret signs", cfg: func(c *ProviderConfig) { c.Secrets = []string{paddleOtherSecret, paddleSecret} },
			header: hdr("h1=" + good), body: paddleBody, now: now, wantID: wantID},
		{name: "rotating: second h1 matches", header: hdr("h1=" + other + ";h1=" + good), body: paddleBody, now: now, wantID: wantID},
		{name: "rotating: first h1 matches", header: hdr("h1=" + good + ";h1=" + other), body: paddleBody, now: now, wantID: wantID},
		{name: "16th h1 is tried", header: hdr(manyH1(16, good)), body: paddleBody, now: now, wantID: wantID},
		{name: "17th h1 is not", header: hdr(manyH1(17, good)), body: paddleBody, now: now, wantErr: ErrUnauthorized},
		{name: "unknown keys and bad h1 ignored", header: hdr("h2=abc;h1=zz;x=;h1=" + good), body: paddleBody, now: now, wantID: wantID},
		{name: "no ts", header: ph("h1=" + good), body: paddleBody, now: now, wantErr: ErrUnauthorized, wantMsg: "no ts="},
		{name: "two ts", header: ph(fmt.Sprintf("ts=%d;ts=%d;h1=%s", paddleTS, paddleTS, good)), body: paddleBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "more than one ts="},
		{name: "non-numeric ts", header: ph("ts=now;h1=" + good), body: paddleBody, now: now, wantErr: ErrUnauthorized, wantMsg: "malformed ts="},
		{name: "negative ts", header: ph("ts=-1;h1=" + good), body: paddleBody, now: now, wantErr: ErrUnauthorized},
		{name: "no h1", header: ph(fmt.Sprintf("ts=%d", paddleTS)), body: paddleBody, now: now, wantErr: ErrUnauthorized, wantMsg: "no well-formed h1"},
		{name: "bad hex only", header: hdr("h1=" + strings.Repeat("x", 64)), body: paddleBody, now: now, wantErr: ErrUnauthorized},
		{name: "short h1", header: hdr("h1=" + good[:63]), body: paddleBody, now: now, wantErr: ErrUnauthorized},
		{name: "part without =", header: hdr("h1=" + good + ";junk"), body: paddleBody, now: now, wantErr: ErrUnauthorized, wantMsg: "key=value"},
		{name: "comma separated", header: ph(fmt.Sprintf("ts=%d,h1=%s", paddleTS, good)), body: paddleBody, now: now, wantErr: ErrUnauthorized},
		{name: "spaces", header: ph(fmt.Sprintf("ts=%d; h1=%s", paddleTS, good)), body: paddleBody, now: now, wantErr: ErrUnauthorized},
		{name: "too long", header: hdr("h1=" + good + strings.Repeat(";x=y", 1100)), body: paddleBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "longer than"},
		{name: "missing header", header: headers("Paddle-Signaturex", "ts=1"), body: paddleBody, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing Paddle-Signature header"},
		{name: "stale", header: hdr("h1=" + good), body: paddleBody, now: now.Add(5*time.Minute + time.Second), wantErr: ErrUnauthorized, wantMsg: "older"},
		{name: "future", header: hdr("h1=" + good), body: paddleBody, now: now.Add(-5*time.Minute - time.Second), wantErr: ErrUnauthorized, wantMsg: "future"},
		{name: "Paddle's own 5 s", cfg: func(c *ProviderConfig) { c.Tolerance = 5 * time.Second },
			header: hdr("h1=" + good), body: paddleBody, now: now.Add(6 * time.Second), wantErr: ErrUnauthorized},
		{name: "within tolerance", header: hdr("h1=" + good), body: paddleBody, now: now.Add(299 * time.Second), wantID: wantID},
		{name: "body not JSON: raw digest", header: hdr("h1=" + signPaddle(paddleSecret, paddleTS, notJSON)), body: notJSON, now: now,
			wantID: sha256Hex(notJSON)},
		{name: "no event_id: body digest", header: hdr("h1=" + signPaddle(paddleSecret, paddleTS, noID)), body: noID, now: now,
			wantID: sha256Hex(noID)},
	})

	p := mustProvider(t, base)
	ev, err := p.Check(Input{Header: hdr("h1=" + good), Body: []byte(paddleBody)}, now)
	if err != nil || ev.ID != wantID || ev.Type != "transaction.completed" {
		t.Errorf("event = %+v, %v; want id %s, type transaction.completed", ev, err, wantID)
	}
}

func TestParsePaddleHeader(t *testing.T) {
	sig := strings.Repeat("ab", 32)
	ts, sigs, err := parsePaddleHeader("ts=12;h1=" + sig + ";h2=00;h1=" + strings.ToUpper(sig))
	if err != nil || ts != 12 || len(sigs) != 2 || sigs[0] != sigs[1] || sigs[0][0] != 0xab {
		t.Fatalf("got %d %x %v", ts, sigs, err)
	}
	for _, h := range []string{"", ";", "ts=1", "h1=" + sig, "ts=1;h1=", "ts==1;h1=" + sig, "ts=1x;h1=" + sig,
		"ts=1;ts=1;h1=" + sig, "ts=1;h1=" + sig + ";", "ts=1234567890123;h1=" + sig} {
		if _, _, err := parsePaddleHeader(h); err == nil {
			t.Errorf("%q: no error", h)
		}
	}
}
