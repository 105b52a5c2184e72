package verify

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The computed CRC vector: crc_token crc-1 under ringASecret
// (https://docs.x.com/x-api/webhooks/quickstart, "The CRC check").
const twitterCRCVector = `{"response_token":"sha256=JBZ8MJOVAUR6XPHRJKhFOGGP8BHHwNqLlEKa+aOHeKU="}`

// twitterProvider is a twitter provider with secrets, current first.
func twitterProvider(t *testing.T, secrets ...string) *Provider {
	t.Helper()
	return mustProvider(t, ProviderConfig{Name: "x", Scheme: SchemeTwitter, Secrets: secrets})
}

// crc asks p for the CRC answer to token, passed URL-encoded as X does.
func crc(p *Provider, token string) (Event, error) {
	return p.Check(Input{Header: http.Header{}, Method: http.MethodGet, RawQuery: "crc_token=" + url.QueryEscape(token)}, time.Now())
}

// TestTwitterCRC: the vector, the current secret answering during a
// rotation, the accepted shapes and the refused ones.
func TestTwitterCRC(t *testing.T) {
	p := twitterProvider(t, ringASecret)
	ev, err := crc(p, "crc-1")
	if err != nil || string(ev.Handshake) != twitterCRCVector || ev.AnswerType != "" || ev.ID != "" {
		t.Fatalf("CRC: %+v (%s), %v; want %s as JSON", ev, ev.Handshake, err, twitterCRCVector)
	}
	// During a rotation the current (first) secret answers.
	if ev, _ := crc(twitterProvider(t, ringASecret, ringAOtherSecret), "crc-1"); string(ev.Handshake) != twitterCRCVector {
		t.Errorf("rotation: %s", ev.Handshake)
	}
	if ev, _ := crc(twitterProvider(t, ringAOtherSecret, ringASecret), "crc-1"); string(ev.Handshake) == twitterCRCVector {
		t.Errorf("rotation: the previous secret answered")
	}
	// X's sample token (a UUID) and base64 shapes pass; '+' must come
	// encoded, as X's own sample code (which decodes the query) requires.
	for _, token := range []string{"9b4507b3-9040-4669-9ca3-6b94edb50553", "ab+/cd==", "a_b-c", strings.Repeat("A", twitterCRCMaxLen)} {
		if ev, err := crc(p, token); err != nil || ev.Handshake == nil {
			t.Errorf("token %q refused: %v", token, err)
		}
	}
	if err := p.Precheck(http.Header{}, "crc_token=crc-1", http.MethodGet, time.Now()); err != nil {
		t.Errorf("Precheck refused a CRC: %v", err)
	}
	for _, tc := range []struct {
		name, query string
		reason      string
	}{
		{"too long", "crc_token=" + strings.Repeat("A", twitterCRCMaxLen+1), ReasonChallengeRefused},
		{"raw plus decodes to a space", "crc_token=ab+cd", ReasonChallengeRefused},
		{"dot", "crc_token=a.b", ReasonChallengeRefused},
		{"non-ASCII", "crc_token=%C3%A9", ReasonChallengeRefused},
		{"no crc_token", "x=1", ReasonUnsupportedEvent},
		{"empty crc_token", "crc_token=", ReasonUnsupportedEvent},
		{"no query", "", ReasonUnsupportedEvent},
	} {
		ev, err := p.Check(Input{Header: http.Header{}, Method: http.MethodGet, RawQuery: tc.query}, time.Now())
		if !errors.Is(err, ErrBadRequest) || Reason(err) != tc.reason || ev.Handshake != nil {
			t.Errorf("%s: %+v, %v; want 400 %s", tc.name, ev, err, tc.reason)
		}
	}
}

// jsonBodies are event bodies an attacker would like signed.
var jsonBodies = []string{
	ringABody,
	`{"for_user_id":"2244994945","tweet_create_events":[{"id_str":"1"}]}`,
	`{}`, ` {}`, `{"a":1}`, `["x"]`, `"x"`, `{"a" : "b"}`, "a b", "a:b", `a"b`,
}

// TestTwitterCRCCannotSignJSON: a JSON body (anything with '{', '"', ':'
// or a space) asked for as a crc_token is refused with 400 and no
// response_token is produced.
func TestTwitterCRCCannotSignJSON(t *testing.T) {
	p := twitterProvider(t, ringASecret)
	for _, body := range jsonBodies {
		ev, err := crc(p, body)
		if !errors.Is(err, ErrBadRequest) || Reason(err) != ReasonChallengeRefused || ev.Handshake != nil || strings.Contains(string(ev.Handshake), "response_token") {
			t.Errorf("crc_token %q: %+v, %v; want refused with 400", body, ev, err)
		}
	}
}

// TestTwitterCRCIsNoEventSignature: whatever token is answered, its
// response_token verifies no event, and the genuine signature of every JSON
// body tried is no CRC answer.
func TestTwitterCRCIsNoEventSignature(t *testing.T) {
	p := twitterProvider(t, ringASecret)
	answers := map[string]bool{}
	// Tokens in X's alphabet that are JSON values (numbers, literals) or
	// plain text: each a body an attacker could post with the answer.
	for _, token := range []string{"crc-1", "9b4507b3-9040-4669-9ca3-6b94edb50553", "12345", "-1", "1e5", "true", "false", "null", "abc=", "x/y+z"} {
		ev, err := crc(p, token)
		if err != nil {
			t.Fatalf("token %q: %v", token, err)
		}
		var answer struct {
			ResponseToken string `json:"response_token"`
		}
		if err := json.Unmarshal(ev.Handshake, &answer); err != nil || !strings.HasPrefix(answer.ResponseToken, "sha256=") {
			t.Fatalf("token %q: answer %s", token, ev.Handshake)
		}
		answers[answer.ResponseToken] = true
		_, err = p.Check(Input{Header: headers("X-Twitter-Webhooks-Signature", answer.ResponseToken), Body: []byte(token)}, time.Now())
		if err == nil {
			t.Errorf("the CRC answer for %q verified the event body %q", token, token)
		} else if Reason(err) != ReasonMalformedBody {
			t.Errorf("token %q as an event: %v; want refused as no JSON object", token, err)
		}
	}
	for _, body := range jsonBodies {
		if sig := signGenericHMAC(sha256.New, true, "sha256=", ringASecret, body); answers[sig] {
			t.Errorf("the signature of %q is a CRC answer", body)
		}
	}
}

// TestTwitterObjectBodiesOnly: a genuinely signed body that is not a JSON
// object is refused (X posts objects), after the signature check.
func TestTwitterObjectBodiesOnly(t *testing.T) {
	p := twitterProvider(t, ringASecret)
	for _, body := range []string{`[{"a":1}]`, `"s"`, "7", "text", `{"a":1,"a":2}`, ""} {
		sig := signGenericHMAC(sha256.New, true, "sha256=", ringASecret, body)
		_, err := p.Check(Input{Header: headers("X-Twitter-Webhooks-Signature", sig), Body: []byte(body)}, time.Now())
		if !errors.Is(err, ErrBadRequest) || Reason(err) != ReasonMalformedBody {
			t.Errorf("body %q: %v", body, err)
		}
	}
	_, err := p.Check(Input{Header: headers("X-Twitter-Webhooks-Signature", "sha256="+strings.Repeat("A", 43)+"="), Body: []byte("7")}, time.Now())
	if Reason(err) != ReasonSignatureMismatch {
		t.Errorf("unsigned non-object body: %v; want the signature refused first", err)
	}
}
