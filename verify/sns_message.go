package verify

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"time"
)

// The SNS message types an HTTP/S subscription receives (AWS docs,
// "Parsing Amazon SNS message formats":
// https://docs.aws.amazon.com/sns/latest/dg/json-formats.html).
const (
	snsNotification             = "Notification"
	snsSubscriptionConfirmation = "SubscriptionConfirmation"
	snsUnsubscribeConfirmation  = "UnsubscribeConfirmation"
)

// snsSignedKeys lists, per message type, the fields signed, in the order
// they are signed; a field absent from the message is left out. Notification
// from AWS's docs ("Verifying the signature of an Amazon SNS message when
// using HTTP query-based requests":
// https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message-verify-message-signature.html);
// the confirmations' list as aws/aws-php-sns-message-validator
// src/MessageValidator.php signs them (aws-js-sns-message-validator signs an
// UnsubscribeConfirmation with the Notification list, a known slip).
var snsSignedKeys = map[string][]string{
	snsNotification:             {"Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"},
	snsSubscriptionConfirmation: {"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"},
	snsUnsubscribeConfirmation:  {"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"},
}

// snsMaxSignatureLen bounds the decoded signature: 512 bytes is an RSA key
// of 4096 bits (AWS's are 2048).
const snsMaxSignatureLen = 512

// snsMessage is an SNS envelope, parsed but not yet verified.
type snsMessage struct {
	typ, id, topic string
	certURL        string // SigningCertURL: NOT signed, checked against the allow-list
	subscribeURL   string // confirmations only: signed
	version        string // SignatureVersion: "1" (SHA1) or "2" (SHA256)
	ts             time.Time
	sig            []byte
	signed         []byte // the string to sign
}

// parseSNSMessage reads an SNS envelope: a JSON object (duplicate keys
// refused) whose signed fields are strings, a JSON null counting as absent
// as the PHP validator's isset does. Structural problems are 400s
// (ReasonMalformedBody); a Signature, SignatureVersion or Timestamp that
// does not parse is a 401 ReasonMalformedHeader, as the same fault in a
// signature header would be.
func parseSNSMessage(body []byte) (*snsMessage, error) {
	v, err := parseJSON(body)
	if err != nil {
		return nil, refusef(ReasonMalformedBody, "%w: SNS message unparseable: %w", ErrBadRequest, err)
	}
	if v.kind != kindObject {
		return nil, refusef(ReasonMalformedBody, "%w: SNS message is not a JSON object", ErrBadRequest)
	}
	field := func(name string) (string, bool, error) {
		f, ok := v.field(name)
		if !ok || f.kind == kindNull {
			return "", false, nil
		}
		if f.kind != kindString {
			return "", false, refusef(ReasonMalformedBody, "%w: SNS message field %s is not a string", ErrBadRequest, name)
		}
		return f.text, true, nil
	}
	required := func(name string) (string, error) {
		s, ok, err := field(name)
		if err == nil && !ok {
			err = refusef(ReasonMalformedBody, "%w: SNS message has no %s", ErrBadRequest, name)
		}
		return s, err
	}

	m := &snsMessage{}
	if m.typ, err = required("Type"); err != nil {
		return nil, err
	}
	keys, ok := snsSignedKeys[m.typ]
	if !ok {
		return nil, refusef(ReasonMalformedBody, "%w: unknown SNS message Type", ErrBadRequest)
	}
	values := map[string]string{}
	for _, k := range keys {
		s, ok, err := field(k)
		if err != nil {
			return nil, err
		}
		if !ok && k != "Subject" {
			return nil, refusef(ReasonMalformedBody, "%w: SNS message has no %s", ErrBadRequest, k)
		}
		if ok {
			values[k] = s
			m.signed = append(append(append(append(m.signed, k...), '\n'), s...), '\n')
		}
	}
	m.id, m.topic, m.subscribeURL = values["MessageId"], values["TopicArn"], values["SubscribeURL"]

	var sig string
	for _, f := range []struct {
		name string
		dst  *string
	}{{"Signature", &sig}, {"SignatureVersion", &m.version}, {"SigningCertURL", &m.certURL}} {
		if *f.dst, err = required(f.name); err != nil {
			return nil, err
		}
	}
	if m.version != "1" && m.version != "2" {
		return nil, refusef(ReasonMalformedHeader, "%w: SNS SignatureVersion is neither 1 nor 2", ErrUnauthorized)
	}
	if len(sig) > base64.StdEncoding.EncodedLen(snsMaxSignatureLen) {
		return nil, refusef(ReasonMalformedHeader, "%w: SNS Signature longer than %d bytes", ErrUnauthorized, snsMaxSignatureLen)
	}
	if m.sig, err = base64.StdEncoding.DecodeString(sig); err != nil || len(m.sig) == 0 {
		return nil, refusef(ReasonMalformedHeader, "%w: SNS Signature is not base64", ErrUnauthorized)
	}
	// AWS writes ISO 8601 in UTC with milliseconds, e.g.
	// 2022-07-28T21:23:58.317Z; RFC 3339 reads it.
	if m.ts, err = time.Parse(time.RFC3339Nano, values["Timestamp"]); err != nil {
		return nil, refusef(ReasonMalformedHeader, "%w: SNS Timestamp is not an ISO 8601 time", ErrUnauthorized)
	}
	return m, nil
}

// verify checks the RSA PKCS#1 v1.5 signature of the string to sign under
// key, hashed with SHA1 (SignatureVersion 1) or SHA256 (2).
func (m *snsMessage) verify(key *rsa.PublicKey) error {
	var err error
	if m.version == "1" {
		sum := sha1.Sum(m.signed)
		err = rsa.VerifyPKCS1v15(key, crypto.SHA1, sum[:], m.sig)
	} else {
		sum := sha256.Sum256(m.signed)
		err = rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], m.sig)
	}
	if err != nil {
		return refusef(ReasonSignatureMismatch, "%w: SNS signature does not verify", ErrUnauthorized)
	}
	return nil
}

// topicForLog is the TopicArn for a log line: signed by AWS, but dropped
// if it could break the line.
func (m *snsMessage) topicForLog() string {
	if !printable(m.topic, maxEventTypeLength) {
		return "(unprintable)"
	}
	return m.topic
}
