package verify

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"strings"
	"time"
)

// SendGrid's signed event webhook headers (Twilio SendGrid docs, "Getting
// Started with the Event Webhook Security Features"; sendgrid-go
// helpers/eventwebhook VerificationHTTPHeader and TimestampHTTPHeader).
const (
	sendGridSignatureHeader = "X-Twilio-Email-Event-Webhook-Signature"
	sendGridTimestampHeader = "X-Twilio-Email-Event-Webhook-Timestamp"
)

// sendGridScheme verifies SendGrid's signed event webhook: an ECDSA P-256
// signature, base64 of its ASN.1 DER form, over SHA-256("{timestamp}{body}")
// where the timestamp is the header's text (sendgrid-go VerifySignature
// hashes the header string, not a re-formatted number). The verifying key
// is the account's public key; secrets are not used.
//
// The body is a JSON array of events, each with its own sg_event_id. The
// scheme returns no id, so Check keys the whole request by its content
// digest: SendGrid resends a failed batch with the same body (under a new
// timestamp and signature), which is then a duplicate.
type sendGridScheme struct {
	key       *ecdsa.PublicKey
	tolerance time.Duration
}

var _ Scheme = (*sendGridScheme)(nil)

func newSendGridScheme(cfg ProviderConfig, tolerance time.Duration) (Scheme, error) {
	key, err := parseSendGridPublicKey(cfg.PublicKey)
	if err != nil {
		return nil, err
	}
	return &sendGridScheme{key: key, tolerance: tolerance}, nil
}

// parseSendGridPublicKey reads the key as SendGrid shows it: base64 (standard
// alphabet) of the PKIX DER form, as sendgrid-go
// ConvertPublicKeyBase64ToECDSA does; surrounding whitespace from a pasted
// value is ignored. Errors never quote the key.
func parseSendGridPublicKey(s string) (*ecdsa.PublicKey, error) {
	s = strings.TrimSpace(s)
	der, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fieldErrorf(FieldPublicKey, "public key is not base64 DER of an ECDSA P-256 key: not base64")
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fieldErrorf(FieldPublicKey, "public key is not base64 DER of an ECDSA P-256 key: not a PKIX public key")
	}
	key, ok := pub.(*ecdsa.PublicKey)
	if !ok || key.Curve != elliptic.P256() {
		return nil, fieldErrorf(FieldPublicKey, "public key is not base64 DER of an ECDSA P-256 key: another key type or curve")
	}
	return key, nil
}

// Verify checks the timestamp against the tolerance (SendGrid documents no
// bound; the default 5 minutes apply) and the signature. It returns no id and
// no type (see sendGridScheme).
func (s *sendGridScheme) Verify(in Input, now time.Time) (Verified, error) {
	sig, ts, err := timestampedHeaders(in, sendGridSignatureHeader, sendGridTimestampHeader, now, s.tolerance)
	if err != nil {
		return Verified{}, err
	}
	der, ok := decodeSendGridSignature(sig)
	if !ok {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: %s header: expected base64 of a DER ECDSA signature", ErrUnauthorized, sendGridSignatureHeader)
	}
	h := sha256.New()
	h.Write([]byte(ts))
	h.Write(in.Body)
	// VerifyASN1 wants strict DER; sendgrid-go's encoding/asn1 parse also
	// tolerates trailing bytes after the signature, which SendGrid never
	// sends.
	if !ecdsa.VerifyASN1(s.key, h.Sum(nil), der) {
		return Verified{}, refusef(ReasonSignatureMismatch, "%w: signature does not verify", ErrUnauthorized)
	}
	return Verified{}, nil
}

// sendGridMaxSignatureLen bounds the DER signature: two 33-byte integers
// with their tags and lengths inside a SEQUENCE make at most 72 bytes.
const sendGridMaxSignatureLen = 72

// decodeSendGridSignature decodes the base64 (standard alphabet, padded, as
// sendgrid-go decodes it) signature header into at most
// sendGridMaxSignatureLen bytes.
func decodeSendGridSignature(value string) ([]byte, bool) {
	if len(value) > base64.StdEncoding.EncodedLen(sendGridMaxSignatureLen) {
		return nil, false
	}
	der, err := base64.StdEncoding.DecodeString(value)
	if err != nil || len(der) == 0 {
		return nil, false
	}
	return der, true
}
