package verify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
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

// maxResignSecrets bounds how many secrets a multi-signature header
// (stripe's v1 list, standard's and svix's space-separated list) is signed
// with during a rotation: the current one and up to three previous ones.
// Each costs an HMAC of the body per attempt.
const maxResignSecrets = 4

// resigner is implemented by schemes that can replace a request's
// signature headers with a fresh signature of the same scheme.
type resigner interface {
	// resign rewrites the signature headers in h for body at time at,
	// signed with the current (first) secret, and, where the scheme's
	// header carries several signatures, with each other accepted secret
	// too (up to maxResignSecrets, current first).
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
func (p *Provider) CanResign() bool { return p.keys.Load().signer != nil }

// BackendSigned tells whether Resign signs with the backend secret
// (ProviderConfig.BackendSecret) rather than the sender's secrets.
func (p *Provider) BackendSigned() bool { return p.backendSigned }

// Resign replaces the provider's signature headers in h with a valid
// signature of body made at time at; the body and the other headers are
// untouched. It signs with the backend secret when one is configured,
// else with the current secret (the first configured) and, for schemes
// whose header carries several signatures (stripe, standard, svix), with
// each other accepted secret too, current first and at most
// maxResignSecrets, so that during a rotation a backend holding either
// secret verifies. h must hold a request Check accepted (the id a scheme
// signs is read from it). It does nothing when CanResign is false.
func (p *Provider) Resign(h http.Header, body []byte, at time.Time) {
	if s := p.keys.Load().signer; s != nil {
		s.resign(h, body, at)
	}
}

// backendSigner is the signer of a provider configured with a backend
// secret: the scheme built a second time (cfg's other settings, the
// backend secret as its only secret), so that the secret is decoded and
// checked the way the scheme's own are. Its errors are FieldErrors about
// FieldBackendSecret; v is the scheme built from cfg, nil if that failed.
func backendSigner(spec *schemeSpec, cfg ProviderConfig, tolerance time.Duration, v Scheme) (resigner, error) {
	if spec.resign != ResignYes {
		return nil, fieldErrorf(FieldBackendSecret, "scheme %s does not re-sign deliveries (%s), so there is nothing to sign with a backend secret; leave it unset",
			spec.name, spec.resign)
	}
	if _, ok := v.(resigner); v != nil && !ok { // hmac without a timestamp header
		return nil, fieldErrorf(FieldBackendSecret, "scheme %s re-signs only with a signed timestamp ({HMAC.TimestampHeader}); without one there is nothing to sign with a backend secret", spec.name)
	}
	bcfg := cfg
	bcfg.Secrets = append([]string{cfg.BackendSecret}, cfg.PreviousBackendSecrets...)
	b, err := spec.build(bcfg, tolerance)
	if err != nil {
		var out []error
		for _, fe := range FieldErrors(err) {
			if fe.Field == FieldSecrets {
				// The message says "secret 1 of 1"; the backend secret is one.
				out = append(out, &FieldError{Field: FieldBackendSecret, Err: fe.Err})
			}
		}
		if len(out) == 0 {
			return nil, nil // another setting's problem, reported by the scheme's own build
		}
		return nil, out[0]
	}
	r, _ := b.(resigner)
	return r, nil
}

// SignUnsigned signs h as Resign does when h carries no signature of the
// provider's scheme, and leaves it as it is otherwise. An event catch-up
// read from the provider's API arrived with no signature at all (its
// authenticity is the API call), so it is signed for the backend even
// where received signatures are passed on as they came.
func (p *Provider) SignUnsigned(h http.Header, body []byte, at time.Time) {
	r := p.keys.Load().signer
	if r == nil {
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
	if s := p.keys.Load().signer; s != nil {
		s.unsign(h)
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

// signingKeys are the keys a multi-signature header is signed with: keys
// in order (current first), each once, at most maxResignSecrets.
func signingKeys(keys [][]byte) [][]byte {
	out := make([][]byte, 0, min(len(keys), maxResignSecrets))
	for _, k := range keys {
		if len(out) == maxResignSecrets {
			break
		}
		dup := false
		for _, o := range out {
			dup = dup || bytes.Equal(o, k)
		}
		if !dup {
			out = append(out, k)
		}
	}
	return out
}

// resign writes "t=<at>,v1=<hex>[,v1=<hex>…]": one v1 per accepted
// secret (signingKeys), as Stripe itself sends while a secret is rolled.
func (s *stripeScheme) resign(h http.Header, body []byte, at time.Time) {
	ts := unixText(at)
	var b strings.Builder
	b.WriteString("t=" + ts)
	for _, key := range signingKeys(s.keys) {
		b.WriteString(",v1=")
		b.WriteString(hex.EncodeToString(macSHA256(key, ts+".", body)))
	}
	h.Set(stripeSignatureHeader, b.String())
}

// resign writes the timestamp and the signatures (a space-separated
// "v1,<base64>" per accepted secret: signingKeys) under the header set the
// request used (svix-* or webhook-*), keeping its id header, which is
// signed too.
func (s *standardScheme) resign(h http.Header, body []byte, at time.Time) {
	names, id, _, _ := s.readHeaders(h)
	ts := unixText(at)
	var b strings.Builder
	var sum signature
	for i, m := range s.signing {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1," + base64.StdEncoding.EncodeToString(m.sum(sum[:0], id+"."+ts+".", body)))
	}
	h[names.keys[1]] = []string{ts}
	h[names.keys[2]] = []string{b.String()}
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
