package verify

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"
)

// SchemeSNS verifies Amazon SNS HTTP/S subscriptions.
const SchemeSNS = "sns"

// snsHostPattern is the host name AWS's own validators accept a
// SigningCertURL from (aws/aws-js-sns-message-validator index.js,
// aws/aws-php-sns-message-validator src/MessageValidator.php): sns.<region>.
// amazonaws.com, or .com.cn in China.
var snsHostPattern = regexp.MustCompile(`^sns\.[a-zA-Z0-9\-]{3,}\.amazonaws\.com(\.cn)?$`)

const (
	// snsRawDeliveryHeader is set to "true" on a raw message delivery
	// (https://docs.aws.amazon.com/sns/latest/dg/sns-large-payload-raw-message-delivery.html):
	// the body is the published message alone, with no envelope and so no
	// signature.
	snsRawDeliveryHeader = "X-Amz-Sns-Rawdelivery"
	// snsCertTTL is how long a fetched certificate is kept per URL. AWS
	// publishes a new certificate under a new URL, so a URL's certificate
	// does not change; the bound only lets a dropped one go.
	snsCertTTL = 24 * time.Hour
	// snsMaxCerts bounds the cached certificates (AWS uses one per region
	// at a time).
	snsMaxCerts = 32
	// snsHandshake is the answer to a confirmation: 200 with an empty
	// JSON object, which SNS ignores.
	snsHandshake = "{}"
)

// snsScheme verifies Amazon SNS messages
// (https://docs.aws.amazon.com/sns/latest/dg/sns-verify-signature-of-message.html):
// the JSON envelope's Signature is RSA PKCS#1 v1.5 over the string to sign
// (snsSignedKeys), SHA1 for SignatureVersion 1 and SHA256 for 2, by the key
// of the X.509 certificate at SigningCertURL. That URL is not signed, so it
// is checked before any fetch: https, an allow-listed host (AWS's by
// default), a path ending in .pem. Like AWS's validators, whguard trusts the
// TLS connection to the allow-listed host and not the certificate's own
// chain or dates (AWS's published test certificate expired in 2022 and
// still verifies its messages). No secret is used.
//
// The signed Timestamp is checked against the tolerance: SNS resends the
// same signed message for as long as its delivery policy retries, at most
// an hour for HTTP/S
// (https://docs.aws.amazon.com/sns/latest/dg/sns-message-delivery-retries.html),
// hence the 1 h default.
//
// A notification's id is its MessageId (signed, and kept on retries); its
// type is its TopicArn, so that WHGUARD_<NAME>_EVENT_TYPES can pick topics
// (arn:aws:sns:*:*:orders-*); the Subject is free text and left out.
//
// A SubscriptionConfirmation, once verified, is confirmed by fetching its
// SubscribeURL (same allow-list, https) and answered 200 without being
// journaled; an UnsubscribeConfirmation is answered 200 only.
type snsScheme struct {
	keys      *keyClient
	certs     *keyCache[*rsa.PublicKey]
	tolerance time.Duration
	// topics are the accepted TopicArn patterns (path.Match: * is any run
	// of characters, ARNs having no "/"); none means every topic. AWS advises checking the topic:
	// any AWS account can subscribe an endpoint to a topic of its own.
	topics []string
}

var _ Scheme = (*snsScheme)(nil)

// newSNSScheme builds the sns scheme: keys from AWS's SNS hosts (or
// KeyHosts, trusted through CAFile), the accepted topics from TopicARNs.
func newSNSScheme(cfg ProviderConfig, tolerance time.Duration) (Scheme, error) {
	keys, err := newKeyClient(cfg, snsHostPattern)
	if err != nil {
		return nil, err
	}
	s := &snsScheme{keys: keys, certs: newKeyCache[*rsa.PublicKey](snsMaxCerts), tolerance: tolerance}
	for _, t := range cfg.TopicARNs {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if _, err := path.Match(t, ""); err != nil || !strings.HasPrefix(t, "arn:") {
			return nil, fieldErrorf(FieldTopicARNs, "topic %q is not an ARN pattern (arn:aws:sns:REGION:ACCOUNT:NAME, * for any run of characters)", t)
		}
		s.topics = append(s.topics, t)
	}
	return s, nil
}

// topicAllowed tells whether the topic matches one of s.topics (or none
// are configured).
func (s *snsScheme) topicAllowed(topic string) bool {
	if len(s.topics) == 0 {
		return true
	}
	for _, t := range s.topics {
		if ok, _ := path.Match(t, topic); ok {
			return true
		}
	}
	return false
}

// Verify refuses a raw delivery, parses the envelope, checks the
// timestamp and both URLs it may fetch, and only then fetches the
// certificate (cached) and checks the signature. A notification's id is
// its MessageId, its type its TopicArn; a confirmation is a handshake.
func (s *snsScheme) Verify(in Input, now time.Time) (Verified, error) {
	if strings.EqualFold(strings.TrimSpace(in.Header.Get(snsRawDeliveryHeader)), "true") {
		// 400, not 401: nothing is wrong with who sent it, but the
		// subscription's setting makes every message unverifiable, and no
		// resend will change that.
		return Verified{}, refusef(ReasonMissingHeader, "%w: raw message delivery carries no SNS signature; turn RawMessageDelivery off on the subscription", ErrBadRequest)
	}
	m, err := parseSNSMessage(in.Body)
	if err != nil {
		return Verified{}, err
	}
	if err := checkTimestamp(m.ts.Unix(), now, s.tolerance); err != nil {
		return Verified{}, err
	}
	if !s.topicAllowed(m.topic) {
		// Refused before anything is fetched: a topic of someone else's
		// is neither confirmed nor accepted.
		return Verified{}, refusef(ReasonNotAllowed, "%w: TopicArn is not one of the configured topics", ErrUnauthorized)
	}
	certURL, err := s.keys.allowedURL("SigningCertURL", m.certURL, ".pem")
	if err != nil {
		return Verified{}, err
	}
	if certURL.RawQuery != "" || certURL.Fragment != "" || (s.keys.hosts.pattern != nil && !snsCertPathRE.MatchString(certURL.Path)) {
		// AWS's certificates live at /SimpleNotificationService-<32 hex>.pem:
		// another path or a query would only make whguard fetch again.
		return Verified{}, refusef(ReasonUntrustedKeyURL, "%w: SigningCertURL is not shaped like an SNS certificate URL", ErrUnauthorized)
	}
	var subscribeURL *url.URL
	if m.typ == snsSubscriptionConfirmation {
		if subscribeURL, err = s.keys.allowedURL("SubscribeURL", m.subscribeURL, ""); err != nil {
			return Verified{}, err
		}
	}
	key, err := s.cert(certURL, now)
	if err != nil {
		return Verified{}, err
	}
	if err := m.verify(key); err != nil {
		return Verified{}, err
	}

	switch m.typ {
	case snsSubscriptionConfirmation:
		if _, _, err := s.keys.fetch("SNS subscription confirmation", subscribeURL); err != nil {
			return Verified{}, err // 503: SNS resends the confirmation
		}
		return Verified{Handshake: []byte(snsHandshake), Note: "sns subscription confirmed: topic " + m.topicForLog()}, nil
	case snsUnsubscribeConfirmation:
		return Verified{Handshake: []byte(snsHandshake), Note: "sns unsubscribe confirmation received (not re-subscribed): topic " + m.topicForLog()}, nil
	}
	return Verified{ID: m.id, Type: m.topic}, nil
}

// cert returns the key of the certificate at u, from the cache or fetched.
func (s *snsScheme) cert(u *url.URL, now time.Time) (*rsa.PublicKey, error) {
	key := "https://" + strings.ToLower(u.Host) + u.Path // one entry per certificate
	if e, ok := s.certs.get(key, now); ok {
		return e.val, nil
	}
	e, err := s.certs.refresh(key, now, func() (*rsa.PublicKey, time.Duration, error) {
		body, _, err := s.keys.fetch("SNS signing certificate", u)
		if err != nil {
			return nil, 0, err
		}
		pub, err := parseSNSCert(body)
		if err != nil {
			return nil, 0, unavailable("SNS signing certificate", u, err)
		}
		return pub, snsCertTTL, nil
	})
	return e.val, err
}

// snsCertPathRE is the path of AWS's SNS signing certificates, checked
// when the default hosts are in use.
var snsCertPathRE = regexp.MustCompile(`^/SimpleNotificationService-[0-9a-f]{32}\.pem$`)

// parseSNSCert reads the RSA key of the first PEM certificate in body. Its
// chain and dates are not checked (see snsScheme).
func parseSNSCert(body []byte) (*rsa.PublicKey, error) {
	block, _ := pem.Decode(body)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate in the answer")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, errors.New("certificate does not parse")
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok || pub.N.BitLen() < minRSAKeyBits {
		return nil, errors.New("certificate key is not RSA of 2048 bits or more")
	}
	return pub, nil
}
