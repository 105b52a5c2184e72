package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
	"time"
)

// Diagnosis codes: what Diagnose found to explain a refused request, in a
// word fit for a metric label (DiagnosisCodes is the whole set).
const (
	// DiagnosisWrongPath: the request verifies with (or, its body unread,
	// carries the signature headers of) another provider configured here:
	// the sender posts to the wrong path.
	DiagnosisWrongPath = "wrong_path"
	// DiagnosisWrongScheme: the request carries the signature header of
	// another scheme, none of this provider's.
	DiagnosisWrongScheme = "wrong_scheme"
	// DiagnosisEncodingHex: the signature is hex where the scheme expects
	// base64.
	DiagnosisEncodingHex = "encoding_hex"
	// DiagnosisEncodingBase64: the signature is base64 where the scheme
	// expects hex.
	DiagnosisEncodingBase64 = "encoding_base64"
	// DiagnosisTimestampMillis: a timestamp header holds milliseconds where
	// the scheme expects seconds.
	DiagnosisTimestampMillis = "timestamp_ms"
	// DiagnosisClockSkew: the signed time lies further from this replica's
	// clock than the tolerance; the detail says by how many seconds.
	DiagnosisClockSkew = "clock_skew"
	// DiagnosisBodyReserialized: the body verifies once its JSON is
	// re-serialized compactly: something in front of whguard re-formatted
	// it.
	DiagnosisBodyReserialized = "body_reserialized"
	// DiagnosisURLMismatch: the signature matches a URL that differs from
	// the configured public URL only by scheme, host or port (schemes that
	// sign the URL: twilio, square, hubspot).
	DiagnosisURLMismatch = "url_mismatch"
	// DiagnosisNone: no cause found, or none tried.
	DiagnosisNone = "none"
)

// DiagnosisCodes returns every code Diagnose returns, in a new slice.
func DiagnosisCodes() []string {
	return []string{DiagnosisWrongPath, DiagnosisWrongScheme, DiagnosisEncodingHex, DiagnosisEncodingBase64,
		DiagnosisTimestampMillis, DiagnosisClockSkew, DiagnosisBodyReserialized, DiagnosisURLMismatch, DiagnosisNone}
}

// Bounds on one diagnosis, so that a flood of bad requests cannot make
// diagnosing them cost more than a small multiple of refusing them.
const (
	// MaxDiagnosisAttempts is the most verifications one diagnosis runs:
	// each is what one request costs its scheme (one HMAC of the body per
	// configured secret, or one public-key check), or a header-only
	// precheck.
	MaxDiagnosisAttempts = 16
	// MaxDiagnosedBody is the largest body the causes are tried on; a
	// larger one is diagnosed from its headers alone.
	MaxDiagnosedBody = 64 << 10
)

// Peer is another provider configured on the same listener, and its path.
type Peer struct {
	Path     string
	Provider *Provider
}

// Refused is a refused request as Diagnose sees it.
type Refused struct {
	// Input is the request; its Body is nil when it was not read.
	Input Input
	// BodyRead tells that Input.Body is the whole received body (a
	// request refused from its headers alone has none).
	BodyRead bool
	// Host is the request's Host, a candidate for the signing URL.
	Host string
	// Err is the refusal, as Check or Precheck returned it; nil for a
	// request whose path routes to no provider.
	Err error
}

// Diagnosis is what Diagnose found.
type Diagnosis struct {
	// Code is one of DiagnosisCodes.
	Code string
	// Detail is a sentence for people. It names headers, providers,
	// paths and schemes, never a header value, a secret or the body.
	Detail string
	// Attempts is how many verifications the diagnosis ran (at most
	// MaxDiagnosisAttempts).
	Attempts int
}

// Diagnose explains why p refused a request by trying each known cause
// in turn and keeping the first that fixes it: another provider's secret
// (peers), another scheme's headers, the other signature encoding, a
// timestamp in milliseconds, a clock skew, a re-formatted JSON body, a
// signing URL that differs by scheme, host or port. With p nil the
// request's path routed to no provider, and only its headers are looked
// at. Diagnose is pure (no I/O, now is the clock) and bounded: at most
// MaxDiagnosisAttempts verifications, over at most MaxDiagnosedBody bytes.
// Peers whose scheme fetches keys (sns, pubsub) or verifies nothing
// (none) are never run.
func Diagnose(p *Provider, peers []Peer, r Refused, now time.Time) Diagnosis {
	d := &diagnoser{p: p, peers: peers, in: r.Input, host: r.Host, err: r.Err, reason: Reason(r.Err), now: now,
		body: r.BodyRead && len(r.Input.Body) <= MaxDiagnosedBody, bodyTooLarge: r.BodyRead && len(r.Input.Body) > MaxDiagnosedBody}
	d.in.precheck = false
	dg := d.run()
	dg.Attempts = d.attempts
	return dg
}

// diagnoser is one diagnosis in progress.
type diagnoser struct {
	p      *Provider
	peers  []Peer
	in     Input
	host   string
	err    error
	reason string
	now    time.Time
	// body: the causes are tried by verifying (else by prechecking the
	// headers alone).
	body, bodyTooLarge bool
	attempts           int
	exhausted          bool
	// scratch is the received header copied once (shallow), changed by
	// withHeader for one attempt at a time.
	scratch http.Header
}

// cause tries one cause: ok when it explains the refusal.
type cause func() (Diagnosis, bool)

func (d *diagnoser) run() Diagnosis {
	if d.p == nil {
		return d.noRoute()
	}
	var causes []cause
	switch d.reason {
	case ReasonTimestampOutsideTolerance:
		causes = []cause{d.timestampMillis, d.clockSkew}
	case ReasonMalformedHeader:
		causes = []cause{d.timestampMillis, d.wrongPath, d.wrongScheme, d.encoding}
	case ReasonMissingHeader:
		causes = []cause{d.wrongPath, d.wrongScheme}
	case ReasonSignatureMismatch:
		causes = []cause{d.wrongPath, d.encoding, d.reserialized, d.urlMismatch}
	case ReasonMalformedBody:
		causes = []cause{d.wrongPath}
	}
	for _, c := range causes {
		if dg, ok := c(); ok {
			return dg
		}
	}
	return d.none()
}

// spend counts one attempt, or reports the budget spent.
func (d *diagnoser) spend() bool {
	if d.attempts >= MaxDiagnosisAttempts {
		d.exhausted = true
		return false
	}
	d.attempts++
	return true
}

// verifies runs s over in: one attempt.
func (d *diagnoser) verifies(s Scheme, in Input) bool {
	if !d.spend() {
		return false
	}
	_, err := s.Verify(in, d.now)
	return err == nil
}

// prechecks runs p's header checks over in: one attempt.
func (d *diagnoser) prechecks(p *Provider, in Input) bool {
	if !d.spend() {
		return false
	}
	return p.Precheck(in.Header, in.RawQuery, in.Method, d.now) == nil
}

// fixes tells whether a changed request would pass where the received one
// was refused: it verifies, or (the body unread) its headers pass.
func (d *diagnoser) fixes(in Input) bool {
	if d.body {
		return d.verifies(d.p.keys.Load().verifier, in)
	}
	return d.prechecks(d.p, in)
}

// unchecked is said of a cause found from the headers alone.
func (d *diagnoser) unchecked() string {
	if d.body {
		return ""
	}
	return " (the body was not read, so the signature itself was not checked)"
}

// withHeader returns d's request with header name set to value, and the
// function that undoes it, to be called before the next withHeader. The
// received header is copied once per diagnosis, not changed: it may hold
// thousands of headers.
func (d *diagnoser) withHeader(name, value string) (Input, func()) {
	if d.scratch == nil {
		d.scratch = make(http.Header, len(d.in.Header)+1)
		for k, v := range d.in.Header {
			d.scratch[k] = v
		}
	}
	key := textproto.CanonicalMIMEHeaderKey(name)
	old, had := d.scratch[key]
	d.scratch[key] = []string{value}
	in := d.in
	in.Header = d.scratch
	return in, func() {
		if had {
			d.scratch[key] = old
		} else {
			delete(d.scratch, key)
		}
	}
}

// wrongPath: the request verifies with another provider configured here;
// or, the body unread and this provider's signature headers absent, it
// carries a peer's and passes its header checks.
func (d *diagnoser) wrongPath() (Diagnosis, bool) {
	headerOnly := !d.body
	if headerOnly && present(d.in.Header, signatureHeaders(d.p)) != "" {
		return Diagnosis{}, false
	}
	for _, peer := range d.peers {
		q := peer.Provider
		if q == nil || q == d.p || !q.diagnosable() {
			continue
		}
		hs := signatureHeaders(q)
		if len(hs) > 0 && present(d.in.Header, hs) == "" {
			continue // cannot verify: not worth an attempt
		}
		if headerOnly {
			if len(hs) > 0 && d.prechecks(q, d.in) {
				return Diagnosis{Code: DiagnosisWrongPath, Detail: fmt.Sprintf(
					"the request carries the signature headers of provider %q (scheme %s), whose path is %s: the sender posts to the wrong path%s",
					q.name, q.scheme, peer.Path, d.unchecked())}, true
			}
			continue
		}
		if d.verifies(q.keys.Load().verifier, d.in) {
			return Diagnosis{Code: DiagnosisWrongPath, Detail: fmt.Sprintf(
				"signed with the secret of provider %q, whose path is %s: the sender posts to the wrong path, or this provider was given the other's secret",
				q.name, peer.Path)}, true
		}
	}
	return Diagnosis{}, false
}

// wrongScheme: none of this provider's signature headers, but another
// scheme's. Headers only: no attempt.
func (d *diagnoser) wrongScheme() (Diagnosis, bool) {
	own := signatureHeaders(d.p)
	if present(d.in.Header, own) != "" {
		return Diagnosis{}, false
	}
	header, schemes := otherSchemeHeader(d.in.Header, d.p.scheme)
	if header == "" {
		return Diagnosis{}, false
	}
	reads := ""
	if len(own) > 0 {
		reads = ", which reads " + own[0]
	}
	return Diagnosis{Code: DiagnosisWrongScheme, Detail: fmt.Sprintf(
		"the request carries %s, the signature header of the %s scheme, while provider %q uses the %s scheme%s: the sender and this provider's WHGUARD_<NAME>_SCHEME do not agree",
		header, strings.Join(schemes, " or "), d.p.name, d.p.scheme, reads)}, true
}

// encoding: the signature re-encoded (hex to base64, or back) verifies,
// or, the body unread, parses.
func (d *diagnoser) encoding() (Diagnosis, bool) {
	for _, name := range signatureHeaders(d.p) {
		v := d.in.Header.Get(name)
		if v == "" || len(v) > maxSignatureHeaderLen {
			continue
		}
		for _, tok := range signatureTokens(v) {
			variant := v[:tok.start] + tok.other + v[tok.end:]
			in, undo := d.withHeader(name, variant)
			fixed := d.fixes(in)
			undo()
			if !fixed {
				continue
			}
			code, was, want := DiagnosisEncodingHex, "hex", "base64"
			if tok.base64 {
				code, was, want = DiagnosisEncodingBase64, "base64", "hex"
			}
			then := "verifies"
			if !d.body {
				then = "parses"
			}
			return Diagnosis{Code: code, Detail: fmt.Sprintf("the signature in %s is %s where the %s scheme expects %s: re-encoded, it %s%s",
				name, was, d.p.scheme, want, then, d.unchecked())}, true
		}
	}
	return Diagnosis{}, false
}

// reserialized: the body, a JSON text, verifies once compacted.
func (d *diagnoser) reserialized() (Diagnosis, bool) {
	if !d.body || !json.Valid(d.in.Body) {
		return Diagnosis{}, false
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, d.in.Body); err != nil || bytes.Equal(compact.Bytes(), d.in.Body) {
		return Diagnosis{}, false
	}
	in := d.in
	in.Body = compact.Bytes()
	if !d.verifies(d.p.keys.Load().verifier, in) {
		return Diagnosis{}, false
	}
	return Diagnosis{Code: DiagnosisBodyReserialized, Detail: "the body verifies once its JSON is re-serialized compactly: " +
		"something between the sender and whguard (a proxy, a gateway, a body parser) re-formatted it, and whguard needs the exact bytes the sender signed"}, true
}

// timestampMillis: a header holds a 13-digit time in milliseconds near
// now, and with it in seconds the headers pass where as received they do
// not. Headers that pass as received (a scheme reading its time from the
// body: mailgun, sns, linear) explain nothing: any header changed would
// "fix" them, a sender's own one included, whose name is the sender's to
// choose.
func (d *diagnoser) timestampMillis() (Diagnosis, bool) {
	if d.prechecks(d.p, d.in) {
		return Diagnosis{}, false
	}
	for _, name := range boundedNames(d.in.Header) {
		v := d.in.Header.Get(name)
		if len(v) > maxSignatureHeaderLen {
			continue
		}
		for _, run := range millisRuns(v, d.now) {
			variant := v[:run.start] + run.seconds + v[run.end:]
			in, undo := d.withHeader(name, variant)
			fixed := d.prechecks(d.p, in)
			undo()
			if fixed {
				return Diagnosis{Code: DiagnosisTimestampMillis, Detail: fmt.Sprintf(
					"%s holds a timestamp in milliseconds where the %s scheme expects seconds: the sender is set up for another scheme or library",
					name, d.p.scheme)}, true
			}
		}
	}
	return Diagnosis{}, false
}

// clockSkew: the scheme said how far the signed time lies from now.
func (d *diagnoser) clockSkew() (Diagnosis, bool) {
	var rf *refusal
	if !errors.As(d.err, &rf) || rf.tolerance <= 0 {
		return Diagnosis{}, false
	}
	secs, where := int64(rf.skew/time.Second), "behind"
	if secs < 0 {
		secs, where = -secs, "ahead of"
	}
	return Diagnosis{Code: DiagnosisClockSkew, Detail: fmt.Sprintf(
		"the signed timestamp is %d seconds %s this replica's clock, beyond the %v tolerance: the sender's clock or this replica's is off, or the request is an old one sent again",
		secs, where, rf.tolerance)}, true
}

// noRoute explains a request whose path routes to no provider, from its
// headers alone (its body is not read).
func (d *diagnoser) noRoute() Diagnosis {
	for _, peer := range d.peers {
		q := peer.Provider
		if q == nil {
			continue
		}
		hs := signatureHeaders(q)
		if len(hs) > 0 && present(d.in.Header, hs) != "" && d.prechecks(q, d.in) {
			return Diagnosis{Code: DiagnosisWrongPath, Detail: fmt.Sprintf(
				"no provider on this path; the request carries the signature headers of provider %q (scheme %s), whose path is %s: check the URL set at the sender",
				q.name, q.scheme, peer.Path)}
		}
	}
	if header, schemes := otherSchemeHeader(d.in.Header, ""); header != "" {
		return Diagnosis{Code: DiagnosisNone, Detail: fmt.Sprintf(
			"no provider on this path; the request carries %s, the signature header of the %s scheme, which no provider here takes on another path",
			header, strings.Join(schemes, " or "))}
	}
	return Diagnosis{Code: DiagnosisNone, Detail: "no provider on this path: check the URL set at the sender"}
}

// noCause says, per reason, what was refused when no cause was found.
var noCause = map[string]string{
	ReasonMissingHeader:             "a header the %s scheme requires is missing, and the request carries no other provider's or scheme's signature header",
	ReasonMalformedHeader:           "a signature or timestamp header does not parse as the %s scheme's, and neither the other encoding nor milliseconds explain it",
	ReasonTimestampOutsideTolerance: "the signed time is outside the %s scheme's tolerance",
	ReasonSignatureMismatch: "no configured secret verifies the %s signature, and no cause tried (another provider's secret, the encoding, " +
		"a re-formatted body, the signing URL) explains it: check that the sender signs with this provider's secret",
	ReasonMalformedBody:    "the body does not parse where the %s scheme or the event key needs it",
	ReasonInvalidEventID:   "the event id is too long, or holds control characters or invalid UTF-8 (%s)",
	ReasonUnsupportedEvent: "a request the %s scheme verifies but whguard cannot serve (a method, handshake or interaction it does not know)",
	ReasonChallengeRefused: "a sender handshake whose proof does not match, or whose challenge is not shaped like the %s sender's",
	ReasonUntrustedKeyURL:  "a key or confirmation URL named by the request is not on the %s scheme's allow-list: nothing was fetched",
	ReasonNotAllowed:       "a verified %s sender that is not one of those configured",
	ReasonKeyUnavailable:   "the %s keys could not be fetched from the provider's key host",
}

// none is the diagnosis when no cause explains the refusal.
func (d *diagnoser) none() Diagnosis {
	detail := "refused by the %s scheme; no cause found"
	if s, ok := noCause[d.reason]; ok {
		detail = s
	}
	detail = fmt.Sprintf(detail, d.p.scheme)
	switch {
	case d.exhausted:
		detail += fmt.Sprintf(" (not every cause was tried: at most %d verifications per refusal)", MaxDiagnosisAttempts)
	case d.bodyTooLarge:
		detail += fmt.Sprintf(" (a body over %d KiB is diagnosed from its headers alone)", MaxDiagnosedBody>>10)
	}
	return Diagnosis{Code: DiagnosisNone, Detail: detail}
}

// diagnosable reports whether Diagnose may run p's verifier on a request
// meant for another provider: not when it would fetch keys from the
// network (sns, pubsub), nor when it verifies nothing (none).
func (p *Provider) diagnosable() bool {
	switch p.scheme {
	case SchemeNone, SchemeSNS, SchemePubSub:
		return false
	}
	return true
}
