package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"time"
)

// What re-signing means for a scheme (ResignSupport). A backend that
// verifies the forwarded headers with the provider's library refuses a
// signed timestamp older than that library's tolerance (Stripe, Standard
// Webhooks, Svix and Slack: 5 minutes), so a delivery made after a backlog
// would be refused for good; re-signing with the current secret at the
// attempt's time avoids that.
const (
	// ResignYes: the scheme signs a timestamp whguard can sign afresh.
	ResignYes = "yes"
	// ResignNotNeeded: the signature covers no timestamp and never
	// expires (or there is no signature at all).
	ResignNotNeeded = "not needed (no timestamp)"
	// ResignPublicKey: the sender signs with a private key whguard does
	// not hold; the backend must not enforce the signature's age.
	ResignPublicKey = "cannot (public key)"
	// ResignBodyTimestamp: the signed timestamp is inside the body, which
	// whguard forwards unchanged; the backend must not enforce its age.
	ResignBodyTimestamp = "cannot (timestamp in the body)"
)

// resigner is implemented by schemes that can replace a request's
// signature headers with a fresh signature of the same scheme.
type resigner interface {
	// resign rewrites the signature headers in h for body at time at,
	// signed with the current (first) secret.
	resign(h http.Header, body []byte, at time.Time)
	// unsign removes the signature headers resign writes.
	unsign(h http.Header)
}

var (
	_ resigner = (*stripeScheme)(nil)
	_ resigner = (*standardScheme)(nil)
	_ resigner = (*slackScheme)(nil)
	_ resigner = (*paddleScheme)(nil)
	_ resigner = (*zoomScheme)(nil)
	_ resigner = hmacTimestampScheme{}
)

// ResignSupport says whether a scheme's signatures can be made afresh
// when forwarding: one of ResignYes, ResignNotNeeded, ResignPublicKey,
// ResignBodyTimestamp; "" for an unknown name. For hmac, ResignYes holds
// only when a timestamp header is configured (Provider.CanResign says).
func ResignSupport(scheme string) string {
	if s, ok := lookupScheme(scheme); ok {
		return s.resign
	}
	return ""
}

// CanResign tells whether Resign can sign this provider's requests afresh:
// true for schemes that sign a timestamp with a secret whguard holds
// (stripe, standard, svix, slack, paddle, zoom, twitch, calendly, zendesk,
// workos, hubspot, and hmac with a timestamp header).
func (p *Provider) CanResign() bool {
	_, ok := p.verifier.(resigner)
	return ok
}

// Resign replaces the provider's signature headers in h with one valid
// signature of body made with the current secret (the first configured)
// at time at; the body and the other headers are untouched. h must hold a
// request Check accepted (the id a scheme signs is read from it). It does
// nothing when CanResign is false.
func (p *Provider) Resign(h http.Header, body []byte, at time.Time) {
	if r, ok := p.verifier.(resigner); ok {
		r.resign(h, body, at)
	}
}

// SignUnsigned signs h as Resign does when h carries no signature of the
// provider's scheme, and leaves it as it is otherwise. An event catch-up
// read from the provider's API arrived with no signature at all (its
// authenticity is the API call), so it is signed for the backend even
// where received signatures are passed on as they came.
func (p *Provider) SignUnsigned(h http.Header, body []byte, at time.Time) {
	r, ok := p.verifier.(resigner)
	if !ok {
		return
	}
	probe := h.Clone()
	r.unsign(probe)
	if len(probe) == len(h) { // unsign found nothing to remove
		r.resign(h, body, at)
	}
}

// Unsign removes the provider's signature headers from h (those Resign
// writes), for a delivery whguard must not sign: content it did not verify
// with this provider's scheme (journaled under another scheme, or under
// none). It does nothing when CanResign is false: such schemes' headers
// are forwarded as received, and cannot verify without the sender's key.
func (p *Provider) Unsign(h http.Header) {
	if r, ok := p.verifier.(resigner); ok {
		r.unsign(h)
	}
}

func (s *stripeScheme) unsign(h http.Header) { h.Del(stripeSignatureHeader) }

// unsign removes the signature of both header sets (svix-* and webhook-*).
func (s *standardScheme) unsign(h http.Header) {
	h.Del("Webhook-Signature")
	h.Del("Svix-Signature")
}

func (s *slackScheme) unsign(h http.Header)        { h.Del(slackSignatureHeader) }
func (s *zoomScheme) unsign(h http.Header)         { h.Del(zoomSignatureHeader) }
func (s *paddleScheme) unsign(h http.Header)       { h.Del(paddleSignatureHeader) }
func (s hmacTimestampScheme) unsign(h http.Header) { h.Del(s.sigHeader) }

// unixText formats at as the unix seconds the schemes sign.
func unixText(at time.Time) string { return strconv.FormatInt(at.Unix(), 10) }

// macSHA256 is HMAC-SHA256(key, prefix+body).
func macSHA256(key []byte, prefix string, body []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(prefix))
	mac.Write(body)
	return mac.Sum(nil)
}

// resign writes "t=<at>,v1=<hex>": one v1 of the current secret, as Stripe
// sends outside a secret roll.
func (s *stripeScheme) resign(h http.Header, body []byte, at time.Time) {
	ts := unixText(at)
	h.Set(stripeSignatureHeader, "t="+ts+",v1="+hex.EncodeToString(macSHA256(s.keys[0], ts+".", body)))
}

// resign writes the timestamp and signature under the header set the
// request used (svix-* or webhook-*), keeping its id header, which is
// signed too.
func (s *standardScheme) resign(h http.Header, body []byte, at time.Time) {
	names, id, _, _ := s.readHeaders(h)
	ts := unixText(at)
	h.Set(names.timestamp, ts)
	h.Set(names.signature, "v1,"+base64.StdEncoding.EncodeToString(macSHA256(s.keys[0], id+"."+ts+".", body)))
}

// resign writes X-Slack-Request-Timestamp and X-Slack-Signature.
func (s *slackScheme) resign(h http.Header, body []byte, at time.Time) {
	resignV0(h, slackSignatureHeader, slackTimestampHeader, s.keys[0], body, at)
}

// resign writes x-zm-request-timestamp and x-zm-signature.
func (s *zoomScheme) resign(h http.Header, body []byte, at time.Time) {
	resignV0(h, zoomSignatureHeader, zoomTimestampHeader, s.keys[0], body, at)
}

// resignV0 writes the timestamp header and "v0=" + hex(HMAC-SHA256(key,
// "v0:{ts}:{body}")): Slack's scheme, which Zoom copied.
func resignV0(h http.Header, sigName, tsName string, key, body []byte, at time.Time) {
	ts := unixText(at)
	h.Set(tsName, ts)
	h.Set(sigName, slackSignaturePrefix+hex.EncodeToString(macSHA256(key, "v0:"+ts+":", body)))
}

// resign writes "ts=<at>;h1=<hex>" with one h1, the current secret's.
func (s *paddleScheme) resign(h http.Header, body []byte, at time.Time) {
	ts := unixText(at)
	h.Set(paddleSignatureHeader, "ts="+ts+";h1="+hex.EncodeToString(macSHA256(s.keys[0], ts+":", body)))
}

// hmacTimestampScheme is the hmac scheme configured with a timestamp
// header: the only configuration of it that can (and needs to) re-sign.
type hmacTimestampScheme struct{ *hmacScheme }

// resign writes the timestamp header and the signature over the template
// filled in with the request's id header, the new timestamp and body, in
// the configured algorithm, encoding and prefix.
func (s hmacTimestampScheme) resign(h http.Header, body []byte, at time.Time) {
	ts := unixText(at)
	var id string
	if s.usesID {
		id = h.Get(s.idHeader)
	}
	sum := s.sign(nil, s.keys[0], id, ts, body)
	sig := hex.EncodeToString(sum)
	if s.base64 {
		sig = base64.StdEncoding.EncodeToString(sum)
	}
	h.Set(s.tsHeader, ts)
	h.Set(s.sigHeader, s.prefix+sig)
}
