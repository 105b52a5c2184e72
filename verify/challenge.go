package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// challenge is a handshake a sender makes on a request of its own, not an
// event, declared as data in the registry: Provider.Check answers it
// before the scheme sees the request, and it is never journaled or
// forwarded. Handshakes carried in a signed event body (Slack's
// url_verification, Twitch's webhook_callback_verification) are answered by
// the scheme's Verify instead.
type challenge struct {
	// method is the request's method: GET, or POST for Microsoft Graph.
	method string
	// param is the query parameter carrying the challenge, or header the
	// header carrying it; the request is this handshake exactly when it is
	// present.
	param, header string
	// maxLen and alphabet bound the challenge value: at most maxLen bytes,
	// each in alphabet ("" means any printable ASCII, except for
	// proofShape, which then answers nothing). A value outside them is
	// refused, not answered.
	maxLen   int
	alphabet string
	proof    challengeProof
	answer   challengeAnswer
	// doc is the challenge in the providers' reference.
	doc string
}

// challengeProof is what proves that a challenge comes from the sender.
type challengeProof int

const (
	// proofNone: the challenge alone (Microsoft Graph sends no credential
	// with it; the answer reveals and signs nothing).
	proofNone challengeProof = iota
	// proofVerifyToken: hub.mode=subscribe and hub.verify_token equal to
	// ProviderConfig.VerifyToken (Meta), compared in constant time; else
	// 403.
	proofVerifyToken
	// proofCredential: the scheme's own credential check on the headers
	// (Okta sends the hook's authorization header with its challenge).
	proofCredential
	// proofShape: only the value's shape; the answer is keyed by the
	// signing secret (X's CRC), so the shape is what keeps it from
	// signing a body of the caller's choosing. A challenge declared with
	// it and no alphabet is refused outright: any printable ASCII would
	// include every JSON body.
	proofShape
)

// challengeAnswer is how a challenge is answered (200).
type challengeAnswer int

const (
	// answerEcho: the value itself (URL-decoded), as text/plain.
	answerEcho challengeAnswer = iota
	// answerVerification: {"verification": value} (Okta).
	answerVerification
	// answerCRC: {"response_token": "sha256=" + base64 HMAC-SHA256 of the
	// value under the current secret} (X's CRC).
	answerCRC
)

// credentialChecker is implemented by schemes whose challenges are proven
// by the same credential as their events (proofCredential).
type credentialChecker interface {
	checkCredential(h http.Header) error
}

// printableASCII is the default challenge alphabet.
func printableASCII(c byte) bool { return c >= 0x20 && c < 0x7f }

// challengeOf returns the declared challenge in is, or nil: the request's
// method and the challenge's parameter or header both match.
func (p *Provider) challengeOf(in Input) *challenge {
	method := in.Method
	if method == "" {
		method = http.MethodPost
	}
	for i := range p.challenges {
		ch := &p.challenges[i]
		if ch.method != method {
			continue
		}
		if ch.header != "" && in.Header.Get(ch.header) != "" {
			return ch
		}
		if ch.param != "" && strings.Contains(in.RawQuery, ch.param+"=") && queryValue(in.RawQuery, ch.param) != "" {
			return ch
		}
	}
	return nil
}

// Accepts tells whether the provider takes requests of method: POST
// always, another only when one of its challenges comes by it (Meta's,
// X's and Okta's GET).
func (p *Provider) Accepts(method string) bool {
	if method == http.MethodPost {
		return true
	}
	for _, ch := range p.challenges {
		if ch.method == method {
			return true
		}
	}
	return false
}

// queryValue is the first value of name in rawQuery ("" when absent or
// unparseable).
func queryValue(rawQuery, name string) string {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return ""
	}
	return q.Get(name)
}

// answer checks a challenge's shape and proof and returns its handshake.
func (p *Provider) answer(ch *challenge, in Input) (Event, error) {
	value := in.Header.Get(ch.header)
	if ch.param != "" {
		value = queryValue(in.RawQuery, ch.param)
	}
	if ch.proof == proofShape && ch.alphabet == "" {
		// Fail closed: an answer signed with the secret over any printable
		// value would sign any JSON body (see proofShape).
		return Event{}, refusef(ReasonChallengeRefused, "%w: handshake challenge is not shaped like the sender's", ErrBadRequest)
	}
	if len(value) > ch.maxLen {
		return Event{}, refusef(ReasonChallengeRefused, "%w: handshake challenge longer than %d bytes", ErrBadRequest, ch.maxLen)
	}
	for i := 0; i < len(value); i++ {
		if !printableASCII(value[i]) || (ch.alphabet != "" && strings.IndexByte(ch.alphabet, value[i]) < 0) {
			return Event{}, refusef(ReasonChallengeRefused, "%w: handshake challenge is not shaped like the sender's", ErrBadRequest)
		}
	}
	switch ch.proof {
	case proofVerifyToken:
		q, _ := url.ParseQuery(in.RawQuery)
		token := q.Get("hub.verify_token")
		if q.Get("hub.mode") != "subscribe" || p.verifyToken == "" ||
			matchesDigest(token, credentialDigests([]string{p.verifyToken})) != 1 {
			return Event{}, refusef(ReasonChallengeRefused, "%w: hub.mode is not subscribe, or hub.verify_token does not match", ErrForbidden)
		}
	case proofCredential:
		c, ok := p.keys.Load().verifier.(credentialChecker)
		if !ok {
			return Event{}, refusef(ReasonChallengeRefused, "%w: handshake cannot be proven", ErrUnauthorized)
		}
		if err := c.checkCredential(in.Header); err != nil {
			return Event{}, err
		}
	}
	switch ch.answer {
	case answerVerification:
		b, _ := json.Marshal(map[string]string{"verification": value})
		return Event{Handshake: b}, nil
	case answerCRC:
		m := hmac.New(sha256.New, p.keys.Load().crcKey)
		m.Write([]byte(value))
		b, _ := json.Marshal(map[string]string{"response_token": "sha256=" + base64.StdEncoding.EncodeToString(m.Sum(nil))})
		return Event{Handshake: b}, nil
	}
	return Event{Handshake: []byte(value), AnswerType: "text/plain; charset=utf-8"}, nil
}

// checkCredentialHeader compares a header carrying a fixed credential with
// each configured one in constant time (every one compared, no early
// exit): Okta's authorization value, Telegram's secret token, Postmark's
// basic auth.
func checkCredentialHeader(h http.Header, name string, digests [][sha256.Size]byte) error {
	got := h.Get(name)
	if got == "" {
		return missingHeader(name)
	}
	if err := checkHeaderLen(name, got); err != nil {
		return err
	}
	if matchesDigest(got, digests) != 1 {
		return refusef(ReasonSignatureMismatch, "%w: %s does not match", ErrUnauthorized, name)
	}
	return nil
}

// matchesDigest is 1 when value's SHA-256 is one of digests, else 0. Every
// digest is compared, in constant time: comparing digests takes the same
// time whatever the value's length or content.
func matchesDigest(value string, digests [][sha256.Size]byte) int {
	d := sha256.Sum256([]byte(value))
	match := 0
	for i := range digests {
		match |= subtle.ConstantTimeCompare(d[:], digests[i][:])
	}
	return match
}

// credentialDigests digests each credential for checkCredentialHeader.
func credentialDigests(creds []string) [][sha256.Size]byte {
	out := make([][sha256.Size]byte, len(creds))
	for i, c := range creds {
		out[i] = sha256.Sum256([]byte(c))
	}
	return out
}
