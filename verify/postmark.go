package verify

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"time"
)

// SchemePostmark verifies Postmark's webhooks: Postmark signs nothing, and
// its webhooks are protected by HTTP basic authentication written into the
// webhook URL as https://user:password@host/path
// (https://postmarkapp.com/developer/webhooks/webhooks-overview,
// "Protecting your webhook").
const SchemePostmark = "postmark"

// postmarkAuthHeader carries the basic-auth credential.
const postmarkAuthHeader = "Authorization"

// postmarkScheme compares the Authorization header with the one the
// configured ProviderConfig.BasicAuth gives, in constant time: the whole
// "Basic " + base64(user:password) value, byte for byte. Nothing is
// signed, so the body is authenticated only by TLS; the credential proves
// the sender.
type postmarkScheme struct {
	// digests holds SHA-256 of the expected header value (one: Postmark
	// has one credential per webhook URL).
	digests [][sha256.Size]byte
}

var _ Scheme = (*postmarkScheme)(nil)

// newPostmarkScheme checks BasicAuth: user:password, the user before the
// first colon (RFC 7617: a user-id holds no colon), no control
// characters. Secrets are not used (the credential is BASIC_AUTH).
func newPostmarkScheme(cfg ProviderConfig) (Scheme, error) {
	cred := cfg.BasicAuth
	if strings.TrimSpace(cred) == "" {
		return nil, fieldErrorf(FieldBasicAuth, "basic auth (the user:password written into the Postmark webhook URL) is required")
	}
	if !strings.Contains(cred, ":") {
		return nil, fieldErrorf(FieldBasicAuth, "basic auth must be user:password, the two separated by a colon")
	}
	for i := 0; i < len(cred); i++ {
		if cred[i] < 0x20 || cred[i] == 0x7f {
			return nil, fieldErrorf(FieldBasicAuth, "basic auth holds a control character at byte %d (RFC 7617 forbids them)", i)
		}
	}
	expected := "Basic " + base64.StdEncoding.EncodeToString([]byte(cred))
	return &postmarkScheme{digests: credentialDigests([]string{expected})}, nil
}

// Verify compares the Authorization header with the configured credential
// in constant time. The type is the body's RecordType; the id:
//   - Bounce and SpamComplaint: RecordType + ":" + ID, the bounce record's
//     own id (https://postmarkapp.com/developer/webhooks/bounce-webhook,
//     https://postmarkapp.com/developer/webhooks/spam-complaint-webhook);
//   - Delivery: "Delivery:" + MessageID + ":" + Recipient: one delivery
//     confirmation per email and recipient, "since there can be multiple"
//     (https://postmarkapp.com/developer/webhooks/delivery-webhook);
//   - anything else "", so Check keys it by the body digest: Open fires
//     on every open of a message when PostFirstOpenOnly is false
//     (https://postmarkapp.com/developer/webhooks/open-tracking-webhook),
//     Click once per recipient and link, SubscriptionChange on each
//     change, so RecordType + MessageID would make distinct events
//     conflict.
//
// None of them is signed (IDSigned is false).
func (s *postmarkScheme) Verify(in Input, _ time.Time) (Verified, error) {
	if err := checkCredentialHeader(in.Header, postmarkAuthHeader, s.digests); err != nil {
		return Verified{}, err
	}
	v, err := parseJSON(in.Body)
	if err != nil {
		return Verified{}, nil // Check keys it by the digest, or refuses it
	}
	typ, _ := v.stringField("RecordType")
	return Verified{ID: postmarkID(v, typ), Type: typ}, nil
}

// postmarkID is the event id of a Postmark record of type typ ("" when
// the record has none that is unique: see Verify).
func postmarkID(v jsonValue, typ string) string {
	switch typ {
	case "Bounce", "SpamComplaint":
		id, ok := v.field("ID")
		if ok && (id.kind == kindNumber || id.kind == kindString) && id.text != "" {
			return typ + ":" + id.text
		}
	case "Delivery":
		msg, _ := v.stringField("MessageID")
		rcpt, _ := v.stringField("Recipient")
		if msg != "" && rcpt != "" {
			return typ + ":" + msg + ":" + rcpt
		}
	}
	return ""
}
