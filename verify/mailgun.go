package verify

import (
	"net/url"
	"time"
)

// SchemeMailgun is Mailgun's webhooks.
const SchemeMailgun = "mailgun"

// Mailgun's signed fields (Mailgun docs, "Securing webhooks":
// https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks;
// mailgun-go VerifyWebhookSignature).
const (
	mailgunSignatureField = "signature"
	// mailgunParentSignature is a second signature over the same
	// timestamp and token, made with the primary account's key, on events
	// of a subaccount's domain.
	mailgunParentSignature = "parent-signature"
	// mailgunMaxTokenLen bounds the token: Mailgun's are 50 characters.
	mailgunMaxTokenLen = 256
	// mailgunTolerance covers Mailgun's retries. Mailgun retries a webhook
	// answered with anything but 200 or 406 "during 8 hours" (5 min, 10
	// min, 15 min, 1 h, 2 h, 4 h: "Automatic Retries",
	// https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/webhook-retries),
	// and does not document whether a retry is signed afresh; third-party
	// references say retries resend the first signature block. A shorter
	// bound would then refuse genuine late retries (and a refusal is itself
	// retried until Mailgun gives up): 8 hours of retries, plus an hour for
	// queueing and clock skew. The price is a longer life for a captured
	// signature block, which signs no event data: set
	// WHGUARD_<NAME>_TOLERANCE lower if no retry ever arrives late.
	mailgunTolerance = 9 * time.Hour
)

// mailgunScheme verifies Mailgun: the body carries
// signature.{timestamp, token, signature} (JSON webhooks), or the form
// fields timestamp, token and signature (legacy webhooks), where signature
// is hex(HMAC-SHA256(HTTP webhook signing key, timestamp + token)), the key
// used as raw bytes. The event data is NOT signed: a request whose signature
// block verifies may carry any event, and its id (event-data.id) is not
// signed either (IDSigned is false; the body guard applies). The signature
// block changes when Mailgun signs a retry afresh and holds no event
// content, so it is left out of the content hash (Volatile). A
// parent-signature, made with the primary account's key, is accepted as
// well: configure that key to receive a subaccount's events.
type mailgunScheme struct {
	keys      [][]byte
	tolerance time.Duration
}

var (
	_ Scheme           = (*mailgunScheme)(nil)
	_ volatileDeclarer = (*mailgunScheme)(nil)
)

// newMailgunScheme builds the mailgun scheme from the configured signing keys.
func newMailgunScheme(cfg ProviderConfig, tolerance time.Duration) (Scheme, error) {
	keys, err := secretKeys(cfg.Secrets, rawSecret)
	if err != nil {
		return nil, err
	}
	return &mailgunScheme{keys: keys, tolerance: tolerance}, nil
}

// Volatile: the signature block is delivery metadata, not the event; a
// retry may carry a new one (see mailgunScheme).
func (*mailgunScheme) Volatile() []string { return []string{mailgunSignatureField} }

// mailgunSigned is what a Mailgun body says of its signature and event.
type mailgunSigned struct {
	timestamp, token string
	sigs             []string // signature, then parent-signature if any
	id, typ          string
}

// Verify reads the signature block from the body (a JSON object, or a form
// post by its Content-Type), checks the timestamp (±tolerance) and the
// signature, and returns event-data.id and event-data.event (legacy form:
// no id, Check uses the digest; the type is the "event" field). Every
// problem with the body's fields is a malformed body (400), never a header
// refusal, so Precheck lets such requests be read.
func (s *mailgunScheme) Verify(in Input, now time.Time) (Verified, error) {
	var (
		m   mailgunSigned
		err error
	)
	if isForm(in.Header) {
		m, err = mailgunForm(in.Body)
	} else {
		m, err = mailgunJSON(in.Body)
	}
	if err != nil {
		return Verified{}, err
	}
	ts, ok := parseUnixSeconds(m.timestamp)
	if !ok {
		return Verified{}, refusef(ReasonMalformedBody, "%w: malformed signature timestamp, expected unix seconds", ErrBadRequest)
	}
	if m.token == "" || len(m.token) > mailgunMaxTokenLen {
		return Verified{}, refusef(ReasonMalformedBody, "%w: signature token missing or longer than %d bytes", ErrBadRequest, mailgunMaxTokenLen)
	}
	var sigs []signature
	for _, text := range m.sigs {
		if sig, ok := slackDecodeHexSHA256(text); ok {
			sigs = append(sigs, sig)
		}
	}
	if len(sigs) == 0 {
		return Verified{}, refusef(ReasonMalformedBody, "%w: no signature of 64 hex digits in the body", ErrBadRequest)
	}
	if err := checkTimestamp(ts, now, s.tolerance); err != nil {
		return Verified{}, err
	}
	if !anyKeyMatches(s.keys, sigs, []byte(m.timestamp), []byte(m.token)) {
		return Verified{}, refusef(ReasonSignatureMismatch, "%w: no signature matches", ErrUnauthorized)
	}
	return Verified{ID: m.id, Type: m.typ}, nil
}

// mailgunJSON reads a JSON webhook: {"signature": {…}, "event-data": {…}}.
// The timestamp may be a string or a number (Mailgun's docs show both).
func mailgunJSON(body []byte) (mailgunSigned, error) {
	v, err := parseJSON(body)
	if err != nil || v.kind != kindObject {
		return mailgunSigned{}, refusef(ReasonMalformedBody, "%w: expected a JSON object with a signature object, or a form post", ErrBadRequest)
	}
	block, ok := v.field(mailgunSignatureField)
	if !ok || block.kind != kindObject {
		return mailgunSigned{}, refusef(ReasonMalformedBody, "%w: body has no signature object", ErrBadRequest)
	}
	var m mailgunSigned
	if f, ok := block.field("timestamp"); ok && (f.kind == kindString || f.kind == kindNumber) {
		m.timestamp = f.text
	}
	m.token, _ = block.stringField("token")
	for _, name := range []string{mailgunSignatureField, mailgunParentSignature} {
		if sig, ok := block.stringField(name); ok {
			m.sigs = append(m.sigs, sig)
		}
	}
	event, _ := v.field("event-data")
	m.id, _ = event.stringField("id")
	m.typ, _ = event.stringField("event")
	return m, nil
}

// mailgunForm reads a legacy form webhook: the signature fields and the
// event's fields side by side.
func mailgunForm(body []byte) (mailgunSigned, error) {
	values, err := url.ParseQuery(string(body))
	if err != nil {
		// url's error quotes the body: keep it out of the answer.
		return mailgunSigned{}, refusef(ReasonMalformedBody, "%w: form body unparseable", ErrBadRequest)
	}
	m := mailgunSigned{timestamp: values.Get("timestamp"), token: values.Get("token"), typ: values.Get("event")}
	for _, name := range []string{mailgunSignatureField, mailgunParentSignature} {
		if sig := values.Get(name); sig != "" {
			m.sigs = append(m.sigs, sig)
		}
	}
	return m, nil
}
