package verify

import (
	"crypto/sha1"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Meta's sample verification request
// (https://developers.facebook.com/docs/graph-api/webhooks/getting-started/,
// "Verification Requests").
const (
	metaVerifyToken = "meatyhamhock"
	metaChallenge   = "1158201444"
)

// metaProvider is a meta provider with the sample verify token.
func metaProvider(t *testing.T) *Provider {
	t.Helper()
	return mustProvider(t, ProviderConfig{Name: "meta", Scheme: SchemeMeta, Secrets: []string{ringASecret}, VerifyToken: metaVerifyToken})
}

// TestMetaVerificationRequest: the GET handshake is answered with the
// challenge as text/plain when the verify token matches, 403 when it does
// not, 400 when the challenge is not Meta's shape or is missing.
func TestMetaVerificationRequest(t *testing.T) {
	p := metaProvider(t)
	get := func(query string) (Event, error) {
		return p.Check(Input{Header: http.Header{}, Method: http.MethodGet, RawQuery: query}, time.Now())
	}
	ev, err := get("hub.mode=subscribe&hub.challenge=" + metaChallenge + "&hub.verify_token=" + metaVerifyToken)
	if err != nil || string(ev.Handshake) != metaChallenge || ev.AnswerType != "text/plain; charset=utf-8" || ev.ID != "" {
		t.Fatalf("verification request: %+v, %v", ev, err)
	}
	if err := p.Precheck(http.Header{}, "hub.mode=subscribe&hub.challenge=1&hub.verify_token=x", http.MethodGet, time.Now()); err != nil {
		t.Errorf("Precheck refused a handshake Check answers: %v", err)
	}
	for _, tc := range []struct {
		name, query string
		want        error
		reason      string
	}{
		{"wrong token", "hub.mode=subscribe&hub.challenge=1&hub.verify_token=meatyhamhocks", ErrForbidden, ReasonChallengeRefused},
		{"token case", "hub.mode=subscribe&hub.challenge=1&hub.verify_token=MEATYHAMHOCK", ErrForbidden, ReasonChallengeRefused},
		{"no token", "hub.mode=subscribe&hub.challenge=1", ErrForbidden, ReasonChallengeRefused},
		{"empty token", "hub.mode=subscribe&hub.challenge=1&hub.verify_token=", ErrForbidden, ReasonChallengeRefused},
		{"mode not subscribe", "hub.mode=unsubscribe&hub.challenge=1&hub.verify_token=" + metaVerifyToken, ErrForbidden, ReasonChallengeRefused},
		{"challenge not an int", "hub.mode=subscribe&hub.challenge=%3Cscript%3E&hub.verify_token=" + metaVerifyToken, ErrBadRequest, ReasonChallengeRefused},
		{"challenge too long", "hub.mode=subscribe&hub.challenge=" + strings.Repeat("9", metaChallengeMaxLen+1) + "&hub.verify_token=" + metaVerifyToken,
			ErrBadRequest, ReasonChallengeRefused},
		{"no challenge", "hub.mode=subscribe&hub.verify_token=" + metaVerifyToken, ErrBadRequest, ReasonUnsupportedEvent},
		{"empty challenge", "hub.mode=subscribe&hub.challenge=&hub.verify_token=" + metaVerifyToken, ErrBadRequest, ReasonUnsupportedEvent},
		{"no query", "", ErrBadRequest, ReasonUnsupportedEvent},
	} {
		ev, err := get(tc.query)
		if !errors.Is(err, tc.want) || Reason(err) != tc.reason || ev.Handshake != nil {
			t.Errorf("%s: %+v, %v (reason %q); want %v, %q", tc.name, ev, err, Reason(err), tc.want, tc.reason)
		}
		if err != nil && strings.Contains(err.Error(), "meatyhamhock") {
			t.Errorf("%s: error %q quotes the token", tc.name, err)
		}
	}
	// The handshake comes by GET only: a POST with the same query is an
	// event and needs its signature.
	_, err = p.Check(Input{Header: http.Header{}, RawQuery: "hub.mode=subscribe&hub.challenge=1&hub.verify_token=" + metaVerifyToken}, time.Now())
	if Reason(err) != ReasonMissingHeader {
		t.Errorf("POST with a challenge query: %v", err)
	}
}

// TestMetaNeedsVerifyToken: the verify token is a required setting.
func TestMetaNeedsVerifyToken(t *testing.T) {
	_, err := NewProvider(ProviderConfig{Name: "meta", Scheme: SchemeMeta, Secrets: []string{ringASecret}})
	fes := FieldErrors(err)
	if len(fes) != 1 || fes[0].Field != FieldVerifyToken || !strings.Contains(err.Error(), "Meta app dashboard") {
		t.Fatalf("NewProvider without a verify token: %v", err)
	}
	if got := RequiredFields(SchemeMeta); len(got) != 2 || got[0] != FieldSecrets || got[1] != FieldVerifyToken {
		t.Errorf("RequiredFields(meta) = %v", got)
	}
}

// TestMetaLegacySHA1Refused: a request signed only with the legacy SHA-1
// X-Hub-Signature is refused, even when that signature is genuine.
func TestMetaLegacySHA1Refused(t *testing.T) {
	p := metaProvider(t)
	legacy := signGenericHMAC(sha1.New, false, "sha1=", ringASecret, ringABody)
	_, err := p.Check(Input{Header: headers("X-Hub-Signature", legacy), Body: []byte(ringABody)}, time.Now())
	if !errors.Is(err, ErrBadRequest) || Reason(err) != ReasonMissingHeader || !strings.Contains(err.Error(), "X-Hub-Signature-256") {
		t.Fatalf("legacy sha1 only: %v", err)
	}
	_, err = p.Check(Input{Header: headers("X-Hub-Signature-256", legacy), Body: []byte(ringABody)}, time.Now())
	if Reason(err) != ReasonMalformedHeader {
		t.Fatalf("sha1 value in X-Hub-Signature-256: %v", err)
	}
}
