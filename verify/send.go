package verify

import (
	"crypto/hmac"
	"crypto/sha1" // GitHub's legacy X-Hub-Signature, Intercom's and Twilio's HMAC-SHA1
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"time"
)

// ErrProviderKey: the scheme's sender signs with a private key only the
// provider holds (sendgrid, discord, sns, pubsub), so whguard cannot make
// its requests; SenderKeyHint says how to have the provider send one.
var ErrProviderKey = errors.New("signed with a key only the provider holds")

// senderKeyHints says, per scheme whose sender holds its key, how to have
// the provider send a real request instead.
var senderKeyHints = map[string]string{
	SchemeSendGrid: "SendGrid signs its Event Webhook with its own ECDSA key: use \"Test Your Integration\" in the Event Webhook settings (Settings → Mail Settings) to have SendGrid send a signed sample",
	SchemeDiscord:  "Discord signs interactions with its ed25519 key: saving the Interactions Endpoint URL in the Developer Portal makes Discord send a signed PING, and running one of the app's commands sends an interaction",
	SchemeSNS:      "AWS signs SNS messages with the key of its signing certificate: publish to the topic instead (aws sns publish --topic-arn <arn> --message '{\"hello\":\"world\"}')",
	SchemePubSub:   "Google signs push requests with its own keys: publish to the topic instead (gcloud pubsub topics publish <topic> --message '{\"hello\":\"world\"}')",
}

// SenderKeyHint says how to test a scheme whose sender signs with a key
// only the provider holds (a sentence naming the provider's own test
// tool); "" for the schemes whguard can sign as the sender (Sender).
func SenderKeyHint(scheme string) string { return senderKeyHints[scheme] }

// Request is one request as a sender puts it on the wire.
type Request struct {
	// Header holds the request's headers; Sign adds the signature's.
	Header http.Header
	// Body holds the exact bytes sent; Sign rewrites it for the schemes
	// that sign inside the body (mailgun, msgraph, adyen).
	Body []byte
	// RawQuery is the query string it is posted with, without "?": the
	// schemes that sign the URL (twilio, square, hubspot) sign the
	// configured public URL with it.
	RawQuery string
}

// Sender makes requests the way a configured provider's sender does:
// signed with the current (first) secret, or carrying the credential,
// exactly as the provider puts them on the wire. It never uses the backend
// secret. A Sender is immutable and safe for concurrent use.
type Sender struct {
	signer   sender
	idHeader string
	cred     string // the current secret as configured; postmark: the basic auth
}

// sender is implemented by every scheme whose sender signs with a secret
// or sends a credential: send adds the signature (or credential) to r,
// made at time at with cred, the current secret as configured, and the
// scheme's key derived from it.
type sender interface {
	send(r *Request, cred string, at time.Time) error
}

var (
	_ sender = (*standardScheme)(nil)
	_ sender = (*githubScheme)(nil)
	_ sender = (*shopifyScheme)(nil)
	_ sender = (*twilioScheme)(nil)
	_ sender = (*linearScheme)(nil)
	_ sender = (*intercomScheme)(nil)
	_ sender = (*squareScheme)(nil)
	_ sender = (*pagerDutyScheme)(nil)
	_ sender = (*gitLabScheme)(nil)
	_ sender = (*bodyHMACScheme)(nil)
	_ sender = (*twitchScheme)(nil)
	_ sender = (*hubspotScheme)(nil)
	_ sender = (*mailgunScheme)(nil)
	_ sender = (*postmarkScheme)(nil)
	_ sender = (*telegramScheme)(nil)
	_ sender = (*oktaScheme)(nil)
	_ sender = (*msGraphScheme)(nil)
	_ sender = (*adyenScheme)(nil)
	_ sender = (*hmacScheme)(nil)
	_ sender = hmacTimestampScheme{}
	_ sender = noneScheme{}
)

// NewSender returns the Sender of cfg, checked as NewProvider checks it
// (its errors). For a scheme whose sender signs with a key only the
// provider holds the error wraps ErrProviderKey and says how to test it
// instead.
func NewSender(cfg ProviderConfig) (*Sender, error) {
	spec, ok := lookupScheme(cfg.Scheme)
	if ok && SenderKeyHint(cfg.Scheme) != "" {
		return nil, fmt.Errorf("provider %q: scheme %s is %w, so whguard cannot send its requests. %s",
			cfg.Name, cfg.Scheme, ErrProviderKey, SenderKeyHint(cfg.Scheme))
	}
	if _, err := NewProvider(cfg); err != nil {
		return nil, err
	}
	// The scheme built with the current secret alone: the sender signs
	// with one secret, decoded as the scheme decodes it.
	cur := cfg
	cur.BackendSecret = ""
	if len(cfg.Secrets) > 1 {
		cur.Secrets = cfg.Secrets[:1]
	}
	v, err := spec.build(cur, max(cfg.Tolerance, DefaultTolerance(cfg.Scheme)))
	if err != nil {
		return nil, fmt.Errorf("configure provider %q: %w", cfg.Name, err)
	}
	s, ok := v.(sender)
	if r, isResigner := v.(resigner); !ok && isResigner {
		// A scheme that re-signs writes what its sender writes: built
		// with the current secret alone, it signs with it alone.
		s, ok = resignSender{r}, true
	}
	if !ok {
		return nil, fmt.Errorf("provider %q: scheme %s cannot sign as its sender", cfg.Name, cfg.Scheme)
	}
	out := &Sender{signer: s, idHeader: cfg.IDHeader}
	switch {
	case cfg.Scheme == SchemePostmark:
		out.cred = cfg.BasicAuth
	case len(cur.Secrets) > 0:
		out.cred = cur.Secrets[0]
	}
	return out, nil
}

// send signs as it re-signs. Needed: the embedded *hmacScheme's send
// (no timestamp) would otherwise be promoted.
func (s hmacTimestampScheme) send(r *Request, _ string, at time.Time) error {
	s.resign(r.Header, r.Body, at)
	return nil
}

// resignSender sends as a re-signing scheme re-signs (the schemes whose
// sender needs nothing more: no id or type of their own to set first).
type resignSender struct{ r resigner }

func (s resignSender) send(r *Request, _ string, at time.Time) error {
	s.r.resign(r.Header, r.Body, at)
	return nil
}

// Sign adds to r what the provider's sender adds at time at: the signature
// headers (or the credential), and the signature inside the body for the
// schemes that sign there. The configured ID header, when r lacks it, is
// set to a fresh id first (the hmac scheme may sign it). The error says
// why r cannot be signed (a body the scheme cannot read where it signs
// inside it); it never holds a secret.
func (s *Sender) Sign(r *Request, at time.Time) error {
	if r.Header == nil {
		r.Header = http.Header{}
	}
	if s.idHeader != "" && r.Header.Get(s.idHeader) == "" {
		r.Header.Set(s.idHeader, randomText(24))
	}
	if err := s.signer.send(r, s.cred, at); err != nil {
		return fmt.Errorf("sign the request: %w", err)
	}
	return nil
}

// send sets the message id (signed) when r lacks one, then signs.
func (s *standardScheme) send(r *Request, _ string, at time.Time) error {
	names, id, _, _ := s.readHeaders(r.Header)
	if id == "" {
		r.Header.Set(names.id, "msg_"+randomText(27))
	}
	s.resign(r.Header, r.Body, at)
	return nil
}

// send sets the message id (signed) and type when r lacks them, then signs.
func (s *twitchScheme) send(r *Request, _ string, at time.Time) error {
	if r.Header.Get(twitchMessageIDHeader) == "" {
		r.Header.Set(twitchMessageIDHeader, randomUUID())
	}
	if r.Header.Get(twitchMessageTypeHeader) == "" {
		r.Header.Set(twitchMessageTypeHeader, "notification")
	}
	s.resign(r.Header, r.Body, at)
	return nil
}

// send signs POST + the public URL with r's query + body + timestamp: the
// URI HubSpot signs is the one it posts to.
func (s *hubspotScheme) send(r *Request, _ string, at time.Time) error {
	ts := strconv.FormatInt(at.UnixMilli(), 10)
	sum := hubspotMAC(nil, s.keys[0], http.MethodPost+hubspotDecodeURI(withQuery(s.publicURL, r.RawQuery)), r.Body, ts)
	r.Header.Set(hubspotTimestampHeader, ts)
	r.Header.Set(hubspotSignatureHeader, base64.StdEncoding.EncodeToString(sum))
	return nil
}

// send writes X-Hub-Signature-256 and, as GitHub does too, the legacy
// SHA-1 X-Hub-Signature.
func (s *githubScheme) send(r *Request, _ string, _ time.Time) error {
	r.Header.Set(githubSignatureHeader, githubSignaturePrefix+hex.EncodeToString(macSHA256(s.keys[0], "", r.Body)))
	r.Header.Set("X-Hub-Signature", "sha1="+hex.EncodeToString(macOf(sha1Hash, s.keys[0], r.Body)))
	return nil
}

func (s *shopifyScheme) send(r *Request, _ string, _ time.Time) error {
	r.Header.Set(shopifySignatureHeader, base64.StdEncoding.EncodeToString(macSHA256(s.keys[0], "", r.Body)))
	return nil
}

func (s *intercomScheme) send(r *Request, _ string, _ time.Time) error {
	r.Header.Set(intercomSignatureHeader, intercomSignaturePrefix+hex.EncodeToString(macOf(sha1Hash, s.keys[0], r.Body)))
	return nil
}

func (s *linearScheme) send(r *Request, _ string, _ time.Time) error {
	r.Header.Set(linearSignatureHeader, hex.EncodeToString(macSHA256(s.keys[0], "", r.Body)))
	return nil
}

func (s *pagerDutyScheme) send(r *Request, _ string, _ time.Time) error {
	r.Header.Set(pagerDutySignatureHeader, pagerDutySignaturePrefix+hex.EncodeToString(macSHA256(s.keys[0], "", r.Body)))
	return nil
}

// send signs the public URL as configured (the one Twilio posts to) with
// r's query, and the form body's parameters sorted.
func (s *twilioScheme) send(r *Request, _ string, _ time.Time) error {
	params, err := twilioSortedParams(r.Body)
	if err != nil {
		return err
	}
	mac := hmac.New(sha1Hash, s.keys[0])
	mac.Write([]byte(withQuery(s.urls[0], r.RawQuery)))
	mac.Write(params)
	r.Header.Set(twilioSignatureHeader, base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return nil
}

func (s *squareScheme) send(r *Request, _ string, _ time.Time) error {
	sum := macSHA256(s.keys[0], withQuery(s.publicURL, r.RawQuery), r.Body)
	r.Header.Set(squareSignatureHeader, base64.StdEncoding.EncodeToString(sum))
	return nil
}

// send signs the body (and, as configured, the id header) with the
// generic template; the timestamp-less configuration only.
func (s *hmacScheme) send(r *Request, _ string, _ time.Time) error {
	var id string
	if s.usesID {
		id = r.Header.Get(s.idHeader)
	}
	sum := s.sign(nil, s.keys[0], id, "", r.Body)
	sig := hex.EncodeToString(sum)
	if s.base64 {
		sig = base64.StdEncoding.EncodeToString(sum)
	}
	r.Header.Set(s.sigHeader, s.prefix+sig)
	return nil
}

func (s *bodyHMACScheme) send(r *Request, cred string, at time.Time) error {
	return s.mac.send(r, cred, at)
}

// The credentials that are not signatures are sent as they are.

func (s *gitLabScheme) send(r *Request, cred string, _ time.Time) error {
	r.Header.Set(gitLabTokenHeader, cred)
	return nil
}

func (s *telegramScheme) send(r *Request, cred string, _ time.Time) error {
	r.Header.Set(telegramTokenHeader, cred)
	return nil
}

func (s *oktaScheme) send(r *Request, cred string, _ time.Time) error {
	r.Header.Set(oktaAuthHeader, cred)
	return nil
}

// send writes the basic-auth header Postmark derives from the user and
// password written into the webhook URL.
func (s *postmarkScheme) send(r *Request, cred string, _ time.Time) error {
	r.Header.Set(postmarkAuthHeader, "Basic "+base64.StdEncoding.EncodeToString([]byte(cred)))
	return nil
}

// send adds nothing: scheme none verifies nothing.
func (noneScheme) send(*Request, string, time.Time) error { return nil }

// withQuery is u with "?" and the query appended when there is one.
func withQuery(u, rawQuery string) string {
	if rawQuery == "" {
		return u
	}
	return u + "?" + rawQuery
}

// sha1Hash is sha1.New, for the HMAC-SHA1 senders.
var sha1Hash = sha1.New

// macOf is HMAC(newHash)(key, body).
func macOf(newHash func() hash.Hash, key, body []byte) []byte {
	mac := hmac.New(newHash, key)
	mac.Write(body)
	return mac.Sum(nil)
}
