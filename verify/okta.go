package verify

import (
	"crypto/sha256"
	"errors"
	"net/http"
	"time"
)

// SchemeOkta verifies Okta event hooks. Okta signs nothing: it sends the
// secret string set on the hook (channel.config.authScheme, header
// Authorization) "in every request", the one-time verification GET
// included (https://developer.okta.com/docs/concepts/event-hooks/, "HTTP
// Headers" and "One-Time Verification Request").
const SchemeOkta = "okta"

// Okta event-hook headers (same page).
const (
	oktaAuthHeader      = "Authorization"
	oktaChallengeHeader = "X-Okta-Verification-Challenge"
)

// oktaChallenge is Okta's one-time verification: a GET carrying
// X-Okta-Verification-Challenge: V (and the hook's Authorization header,
// checked by oktaScheme.checkCredential), answered 200 with
// {"verification":"V"}. Okta's values are short tokens; 512 bytes is far
// above them and keeps the reflected answer small.
var oktaChallenge = challenge{
	method: http.MethodGet, header: oktaChallengeHeader, maxLen: 512,
	proof: proofCredential, answer: answerVerification,
	doc: "GET `X-Okta-Verification-Challenge: V` with the hook's `Authorization` → `{\"verification\":\"V\"}`",
}

// oktaScheme compares the Authorization header with every configured
// secret (the hook's authScheme value) in constant time. Nothing is
// signed: the body is authenticated only by TLS.
type oktaScheme struct {
	// digests holds SHA-256 of each configured authorization value.
	digests [][sha256.Size]byte
}

var (
	_ Scheme            = (*oktaScheme)(nil)
	_ credentialChecker = (*oktaScheme)(nil)
)

// newOktaScheme checks that each secret could arrive in a header: no
// control characters, no leading or trailing blanks (an HTTP server strips
// them, so such a secret would never match).
func newOktaScheme(cfg ProviderConfig) (Scheme, error) {
	if _, err := secretKeys(cfg.Secrets, checkHeaderSecret); err != nil {
		return nil, err
	}
	return &oktaScheme{digests: credentialDigests(cfg.Secrets)}, nil
}

// errHeaderSecret says why a secret cannot be a header value.
var errHeaderSecret = errors.New("a secret sent as a header value holds no control characters and no leading or trailing spaces or tabs")

// checkHeaderSecret refuses a secret no HTTP header could carry as it is.
func checkHeaderSecret(s string) ([]byte, error) {
	if s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' {
		return nil, errHeaderSecret
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < 0x20 && s[i] != '\t') || s[i] == 0x7f {
			return nil, errHeaderSecret
		}
	}
	return []byte(s), nil
}

// checkCredential compares the Authorization header with every configured
// value in constant time: events and the verification GET alike.
func (s *oktaScheme) checkCredential(h http.Header) error {
	return checkCredentialHeader(h, oktaAuthHeader, s.digests)
}

// Verify checks the credential. The id is the body's eventId, which
// identifies one delivery (Okta retries it at most once); it is not
// signed (IDSigned is false). The type is the first event's eventType:
// a delivery batches events under data.events, "each element of the
// array providing information on one event" (same page, "Ongoing Event
// Delivery").
func (s *oktaScheme) Verify(in Input, _ time.Time) (Verified, error) {
	if err := s.checkCredential(in.Header); err != nil {
		return Verified{}, err
	}
	v, err := parseJSON(in.Body)
	if err != nil {
		return Verified{}, nil // Check keys it by the digest, or refuses it
	}
	var out Verified
	out.ID, _ = v.stringField("eventId")
	if data, ok := v.field("data"); ok {
		if events, ok := data.field("events"); ok && events.kind == kindArray && len(events.elems) > 0 {
			out.Type, _ = events.elems[0].stringField("eventType")
		}
	}
	return out, nil
}
