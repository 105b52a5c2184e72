package verify

import (
	"encoding/hex"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	zoomSecret      = "zoom-secret-token-AbCdEf012345"
	zoomOtherSecret = "zoom-secret-token-previous-999"
	zoomTS          = int64(1700000000)
	zoomBody        = `{"event":"meeting.started","event_ts":1700000000123,"payload":{"account_id":"AAAAAA","object":{"id":"85012345678","uuid":"4444AAAiAAAAAiAiAiiAii==","host_id":"x1yCzABCDEfg23HiJKl4mN","topic":"Sync"}}}`
	// zoomValidationBody is the shape of Zoom's endpoint.url_validation
	// request (Zoom docs, "Validate your webhook endpoint").
	zoomValidationBody = `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`
)

// signZoom returns an x-zm-signature value, computed here independently of
// the package: Zoom's sample verifier builds "v0:{ts}:{body}".
func signZoom(secret string, ts int64, body string) string {
	return "v0=" + hex.EncodeToString(hmacSHA256([]byte(secret), "v0:", strconv.FormatInt(ts, 10), ":", body))
}

func zoomHeaders(sig string, ts int64) http.Header {
	return headers("x-zm-signature", sig, "x-zm-request-timestamp", strconv.FormatInt(ts, 10))
}

func TestZoomCheck(t *testing.T) {
	now := time.Unix(zoomTS, 0)
	good := signZoom(zoomSecret, zoomTS, zoomBody)
	base := ProviderConfig{Name: "zoom", Scheme: SchemeZoom, Secrets: []string{zoomSecret}}
	// Zoom documents no event id: the key is the canonical body digest.
	canonical, err := Canonicalize([]byte(zoomBody))
	if err != nil {
		t.Fatal(err)
	}
	wantID := sha256Hex(string(canonical))
	runCheckCases(t, base, []checkCase{
		{name: "valid", header: zoomHeaders(good, zoomTS), body: zoomBody, now: now, wantID: wantID},
		{name: "canonical header names", header: headers("X-Zm-Signature", good, "X-Zm-Request-Timestamp", "1700000000"), body: zoomBody, now: now, wantID: wantID},
		{name: "wrong secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{zoomOtherSecret} },
			header: zoomHeaders(good, zoomTS), body: zoomBody, now: now, wantErr: ErrUnauthorized, wantMsg: "no signature matches"},
		{name: "tampered body", header: zoomHeaders(good, zoomTS), body: strings.Replace(zoomBody, "Sync", "Sink", 1), now: now, wantErr: ErrUnauthorized},
		{name: "tampered timestamp", header: zoomHeaders(good, zoomTS-1), body: zoomBody, now: now, wantErr: ErrUnauthorized},
		{name: "rotated: second secret signs", cfg: func(c *ProviderConfig) { c.Secrets = []string{zoomOtherSecret, zoomSecret} },
			header: zoomHeaders(good, zoomTS), body: zoomBody, now: now, wantID: wantID},
		{name: "missing signature", header: headers("x-zm-request-timestamp", "1700000000"), body: zoomBody, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing x-zm-signature header"},
		{name: "missing timestamp", header: headers("x-zm-signature", good), body: zoomBody, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing x-zm-request-timestamp header"},
		{name: "no prefix", header: zoomHeaders(good[3:], zoomTS), body: zoomBody, now: now, wantErr: ErrUnauthorized, wantMsg: "prefix"},
		{name: "bad hex", header: zoomHeaders("v0="+strings.Repeat("g", 64), zoomTS), body: zoomBody, now: now, wantErr: ErrUnauthorized},
		{name: "short", header: zoomHeaders(good[:40], zoomTS), body: zoomBody, now: now, wantErr: ErrUnauthorized},
		{name: "two signatures", header: zoomHeaders(good+" "+good, zoomTS), body: zoomBody, now: now, wantErr: ErrUnauthorized},
		{name: "too long", header: zoomHeaders(strings.Repeat("v0=", 2000), zoomTS), body: zoomBody, now: now, wantErr: ErrUnauthorized, wantMsg: "longer than"},
		{name: "millisecond timestamp", header: headers("x-zm-signature", good, "x-zm-request-timestamp", "1700000000000"), body: zoomBody, now: now,
			wantErr: ErrUnauthorized},
		{name: "non-numeric timestamp", header: headers("x-zm-signature", good, "x-zm-request-timestamp", "1.7e9"), body: zoomBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "malformed"},
		{name: "stale", header: zoomHeaders(good, zoomTS), body: zoomBody, now: now.Add(5*time.Minute + time.Second), wantErr: ErrUnauthorized, wantMsg: "older"},
		{name: "future", header: zoomHeaders(good, zoomTS), body: zoomBody, now: now.Add(-5*time.Minute - time.Second), wantErr: ErrUnauthorized, wantMsg: "future"},
		{name: "within tolerance", header: zoomHeaders(good, zoomTS), body: zoomBody, now: now.Add(5 * time.Minute), wantID: wantID},
	})

	p := mustProvider(t, base)
	ev, err := p.Check(Input{Header: zoomHeaders(good, zoomTS), Body: []byte(zoomBody)}, now)
	if err != nil || ev.Type != "meeting.started" || ev.Handshake != nil {
		t.Errorf("event = %+v, %v; want type meeting.started", ev, err)
	}
}

func TestZoomURLValidation(t *testing.T) {
	now := time.Unix(zoomTS, 0)
	// The reply is keyed with the current (first) secret, whichever
	// configured secret signed the request.
	want := `{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":"` +
		hex.EncodeToString(hmacSHA256([]byte(zoomSecret), "qgg8vlvZRS6UYooatFL8Aw")) + `"}`
	p := mustProvider(t, ProviderConfig{Name: "zoom", Scheme: SchemeZoom, Secrets: []string{zoomSecret, zoomOtherSecret}})
	for _, signer := range []string{zoomSecret, zoomOtherSecret} {
		ev, err := p.Check(Input{Header: zoomHeaders(signZoom(signer, zoomTS, zoomValidationBody), zoomTS), Body: []byte(zoomValidationBody)}, now)
		if err != nil {
			t.Fatalf("signed validation refused: %v", err)
		}
		if !reflect.DeepEqual(ev, Event{Handshake: []byte(want)}) {
			t.Errorf("event = %+v (handshake %s), want only the handshake %s", ev, ev.Handshake, want)
		}
	}

	// A token needing escapes is echoed as valid JSON, and hashed as decoded.
	const odd = `{"event":"endpoint.url_validation","payload":{"plainToken":"a\"b\u00e9"}}`
	ev, err := p.Check(Input{Header: zoomHeaders(signZoom(zoomSecret, zoomTS, odd), zoomTS), Body: []byte(odd)}, now)
	wantOdd := `{"plainToken":"a\"bé","encryptedToken":"` + hex.EncodeToString(hmacSHA256([]byte(zoomSecret), `a"bé`)) + `"}`
	if err != nil || string(ev.Handshake) != wantOdd {
		t.Errorf("escaped token: %s, %v; want %s", ev.Handshake, err, wantOdd)
	}

	noToken := `{"event":"endpoint.url_validation","payload":{}}`
	emptyToken := `{"event":"endpoint.url_validation","payload":{"plainToken":""}}`
	topToken := `{"event":"endpoint.url_validation","plainToken":"x"}`
	for _, tc := range []struct {
		name    string
		header  http.Header
		body    string
		at      time.Time
		wantErr error
	}{
		{"unsigned", headers(), zoomValidationBody, now, ErrBadRequest},
		{"forged (unknown secret)", zoomHeaders(signZoom("attacker", zoomTS, zoomValidationBody), zoomTS), zoomValidationBody, now, ErrUnauthorized},
		{"signature of another body", zoomHeaders(signZoom(zoomSecret, zoomTS, zoomBody), zoomTS), zoomValidationBody, now, ErrUnauthorized},
		{"stale", zoomHeaders(signZoom(zoomSecret, zoomTS, zoomValidationBody), zoomTS), zoomValidationBody, now.Add(time.Hour), ErrUnauthorized},
		{"no plainToken", zoomHeaders(signZoom(zoomSecret, zoomTS, noToken), zoomTS), noToken, now, ErrBadRequest},
		{"empty plainToken", zoomHeaders(signZoom(zoomSecret, zoomTS, emptyToken), zoomTS), emptyToken, now, ErrBadRequest},
		{"plainToken outside payload", zoomHeaders(signZoom(zoomSecret, zoomTS, topToken), zoomTS), topToken, now, ErrBadRequest},
	} {
		ev, err := p.Check(Input{Header: tc.header, Body: []byte(tc.body)}, tc.at)
		if !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.wantErr)
		}
		if ev.Handshake != nil {
			t.Errorf("%s: handshake %s answered", tc.name, ev.Handshake)
		}
	}
}
