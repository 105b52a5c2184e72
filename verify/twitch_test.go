package verify

import (
	"encoding/hex"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The second ring's computed vectors: one secret, body and time for every
// scheme (each HMAC recomputed with openssl dgst as well).
const (
	ringSecret = "whguard-2nd-ring-secret"
	ringBody   = `{"id":"evt_1","type":"test.event"}`
	ringUnix   = int64(1700000000)
)

const (
	twitchOtherSecret = "whguard-previous-twitch-secret"
	twitchTS          = "2023-11-14T22:13:20.000000000Z"
	// twitchVector is the computed vector of id msg-1 at twitchTS (no
	// example is published; Twitch's docs,
	// https://dev.twitch.tv/docs/eventsub/handling-webhook-events, give the
	// construction).
	twitchVector = "sha256=9f1bcdf3977e189fc553d04d0623069dfa1d01ba46d19948584150ac7ef52287"
	// twitchChallengeBody has the shape of Twitch's verification request.
	twitchChallengeBody = `{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","status":"webhook_callback_verification_pending","type":"channel.follow","version":"2","condition":{"broadcaster_user_id":"12826"},"transport":{"method":"webhook","callback":"https://example.com/webhooks/callback"},"created_at":"2019-11-16T10:11:12.634234626Z"}}`
)

// signTwitch returns a Twitch-Eventsub-Message-Signature value, computed
// here independently of the package.
func signTwitch(secret, id, ts, body string) string {
	return "sha256=" + hex.EncodeToString(hmacSHA256([]byte(secret), id, ts, body))
}

func twitchHeaders(sig, id, ts, msgType string) http.Header {
	return headers("Twitch-Eventsub-Message-Signature", sig, "Twitch-Eventsub-Message-Id", id,
		"Twitch-Eventsub-Message-Timestamp", ts, "Twitch-Eventsub-Message-Type", msgType,
		"Twitch-Eventsub-Subscription-Type", "channel.follow", "Twitch-Eventsub-Message-Retry", "0")
}

func TestTwitchVector(t *testing.T) {
	if got := signTwitch(ringSecret, "msg-1", twitchTS, ringBody); got != twitchVector {
		t.Fatalf("computed vector = %s, want %s", got, twitchVector)
	}
}

func TestTwitchCheck(t *testing.T) {
	now := time.Unix(ringUnix, 0)
	base := ProviderConfig{Name: "twitch", Scheme: SchemeTwitch, Secrets: []string{ringSecret}}
	h := func(sig, id, ts string) http.Header { return twitchHeaders(sig, id, ts, "notification") }
	offset := "2023-11-14T23:13:20.5+01:00"
	runCheckCases(t, base, []checkCase{
		{name: "vector", header: h(twitchVector, "msg-1", twitchTS), body: ringBody, now: now, wantID: "msg-1"},
		{name: "revocation is an event", header: twitchHeaders(twitchVector, "msg-1", twitchTS, "revocation"), body: ringBody, now: now, wantID: "msg-1"},
		{name: "offset and short fraction, signed as received", header: h(signTwitch(ringSecret, "msg-1", offset, ringBody), "msg-1", offset), body: ringBody,
			now: now, wantID: "msg-1"},
		{name: "tampered body", header: h(twitchVector, "msg-1", twitchTS), body: strings.Replace(ringBody, "evt_1", "evt_2", 1), now: now,
			wantErr: ErrUnauthorized, wantMsg: "no signature matches"},
		{name: "tampered id", header: h(twitchVector, "msg-2", twitchTS), body: ringBody, now: now, wantErr: ErrUnauthorized},
		{name: "same instant written otherwise", header: h(twitchVector, "msg-1", "2023-11-14T22:13:20Z"), body: ringBody, now: now, wantErr: ErrUnauthorized},
		{name: "wrong secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{twitchOtherSecret} },
			header: h(twitchVector, "msg-1", twitchTS), body: ringBody, now: now, wantErr: ErrUnauthorized},
		{name: "rotation: the previous secret signs", cfg: func(c *ProviderConfig) { c.Secrets = []string{twitchOtherSecret, ringSecret} },
			header: h(twitchVector, "msg-1", twitchTS), body: ringBody, now: now, wantID: "msg-1"},
		{name: "stale", header: h(twitchVector, "msg-1", twitchTS), body: ringBody, now: now.Add(10*time.Minute + time.Second),
			wantErr: ErrUnauthorized, wantMsg: "older"},
		{name: "future", header: h(twitchVector, "msg-1", twitchTS), body: ringBody, now: now.Add(-10*time.Minute - time.Second),
			wantErr: ErrUnauthorized, wantMsg: "future"},
		{name: "within 10 minutes", header: h(twitchVector, "msg-1", twitchTS), body: ringBody, now: now.Add(10 * time.Minute), wantID: "msg-1"},
		{name: "missing signature", header: h("", "msg-1", twitchTS), body: ringBody, now: now, wantErr: ErrBadRequest, wantMsg: "Signature"},
		{name: "missing id", header: h(twitchVector, "", twitchTS), body: ringBody, now: now, wantErr: ErrBadRequest, wantMsg: "Message-Id"},
		{name: "missing timestamp", header: h(twitchVector, "msg-1", ""), body: ringBody, now: now, wantErr: ErrBadRequest, wantMsg: "Timestamp"},
		{name: "unix timestamp", header: h(twitchVector, "msg-1", "1700000000"), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "RFC 3339"},
		{name: "timestamp without zone", header: h(twitchVector, "msg-1", "2023-11-14T22:13:20.000000000"), body: ringBody, now: now, wantErr: ErrUnauthorized},
		{name: "timestamp too long", header: h(twitchVector, "msg-1", "2023-11-14T22:13:20.0000000000000000000Z"), body: ringBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "malformed"},
		{name: "no prefix", header: h(twitchVector[len("sha256="):], "msg-1", twitchTS), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "64 hex"},
		{name: "bad hex", header: h("sha256="+strings.Repeat("z", 64), "msg-1", twitchTS), body: ringBody, now: now, wantErr: ErrUnauthorized},
		{name: "header too long", header: h(strings.Repeat("a", 5000), "msg-1", twitchTS), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "longer"},
		{name: "id too long", header: h(twitchVector, strings.Repeat("i", 5000), twitchTS), body: ringBody, now: now, wantErr: ErrUnauthorized, wantMsg: "longer"},
	})

	p := mustProvider(t, base)
	ev, err := p.Check(Input{Header: h(twitchVector, "msg-1", twitchTS), Body: []byte(ringBody)}, now)
	if err != nil || ev.ID != "msg-1" || ev.Type != "channel.follow" || ev.Handshake != nil {
		t.Errorf("event = %+v, %v; want id msg-1, type channel.follow", ev, err)
	}
	if !p.IDSigned() {
		t.Error("IDSigned = false: the message id is signed")
	}
}

// The verification challenge is verified like an event, then answered with
// the challenge verbatim as text/plain, and never becomes an event.
func TestTwitchChallenge(t *testing.T) {
	now := time.Unix(ringUnix, 0)
	p := mustProvider(t, ProviderConfig{Name: "twitch", Scheme: SchemeTwitch, Secrets: []string{ringSecret, twitchOtherSecret}})
	for _, signer := range []string{ringSecret, twitchOtherSecret} {
		sig := signTwitch(signer, "msg-c", twitchTS, twitchChallengeBody)
		ev, err := p.Check(Input{Header: twitchHeaders(sig, "msg-c", twitchTS, "webhook_callback_verification"), Body: []byte(twitchChallengeBody)}, now)
		if err != nil {
			t.Fatalf("signed challenge refused: %v", err)
		}
		want := Event{Handshake: []byte("pogchamp-kappa-360noscope-vohiyo"), AnswerType: "text/plain"}
		if !reflect.DeepEqual(ev, want) {
			t.Errorf("event = %+v (%s), want %+v", ev, ev.Handshake, want)
		}
	}

	noChallenge := `{"subscription":{}}`
	numeric := `{"challenge":42}`
	for _, tc := range []struct {
		name    string
		sig     string
		body    string
		at      time.Time
		wantErr error
	}{
		{"forged", signTwitch("attacker-secret-xyz", "msg-c", twitchTS, twitchChallengeBody), twitchChallengeBody, now, ErrUnauthorized},
		{"stale", signTwitch(ringSecret, "msg-c", twitchTS, twitchChallengeBody), twitchChallengeBody, now.Add(time.Hour), ErrUnauthorized},
		{"no challenge", signTwitch(ringSecret, "msg-c", twitchTS, noChallenge), noChallenge, now, ErrBadRequest},
		{"numeric challenge", signTwitch(ringSecret, "msg-c", twitchTS, numeric), numeric, now, ErrBadRequest},
		{"not JSON", signTwitch(ringSecret, "msg-c", twitchTS, "challenge"), "challenge", now, ErrBadRequest},
	} {
		ev, err := p.Check(Input{Header: twitchHeaders(tc.sig, "msg-c", twitchTS, "webhook_callback_verification"), Body: []byte(tc.body)}, tc.at)
		if !errors.Is(err, tc.wantErr) || ev.Handshake != nil {
			t.Errorf("%s: %+v, %v; want %v and no answer", tc.name, ev, err, tc.wantErr)
		}
	}
}

func TestTwitchSecretShape(t *testing.T) {
	for _, secret := range []string{"short", strings.Repeat("s", 101), "secret-with-é-accent"} {
		_, err := NewProvider(ProviderConfig{Name: "twitch", Scheme: SchemeTwitch, Secrets: []string{secret}})
		fes := FieldErrors(err)
		if len(fes) != 1 || fes[0].Field != FieldSecrets || strings.Contains(err.Error(), secret) {
			t.Errorf("secret %q: %v", secret, err)
		}
	}
	mustProvider(t, ProviderConfig{Name: "twitch", Scheme: SchemeTwitch, Secrets: []string{strings.Repeat("s", 10), strings.Repeat("s", 100)}})
}

// Re-signing (TestRingBResignRoundTrip) keeps the message id, which is signed.
func init() {
	ringBResignCases = append(ringBResignCases, ringBResignCase{
		name: "twitch", cfg: ProviderConfig{Scheme: SchemeTwitch}, body: ringBody, sigHeader: "Twitch-Eventsub-Message-Signature",
		sign: func(secret string, at time.Time) http.Header {
			ts := at.UTC().Format(time.RFC3339Nano)
			return twitchHeaders(signTwitch(secret, "msg-r", ts, ringBody), "msg-r", ts, "notification")
		},
	})
}
