package verify

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Reason codes: why a request was refused, in a word fit for a log field
// or a metric label (Reason). They never carry a secret or a value from
// the request.
const (
	// ReasonMissingHeader: a required header (signature, timestamp, id)
	// is absent or empty. → 400
	ReasonMissingHeader = "missing_header"
	// ReasonMalformedHeader: a signature or timestamp header that does not
	// parse, or is too long to be genuine. → 401
	ReasonMalformedHeader = "malformed_header"
	// ReasonTimestampOutsideTolerance: the signed timestamp is further
	// from now than the tolerance, in either direction. → 401
	ReasonTimestampOutsideTolerance = "timestamp_outside_tolerance"
	// ReasonSignatureMismatch: well-formed, but no configured secret or
	// key verifies it. → 401
	ReasonSignatureMismatch = "signature_mismatch"
	// ReasonMalformedBody: the body cannot be parsed where the scheme or
	// the event key needs it. → 400
	ReasonMalformedBody = "malformed_body"
	// ReasonInvalidEventID: the event id is too long, or holds control
	// characters or invalid UTF-8. → 400
	ReasonInvalidEventID = "invalid_event_id"
	// ReasonUnsupportedEvent: a verified request whguard cannot serve
	// (a Discord autocomplete or unknown interaction type). → 400
	ReasonUnsupportedEvent = "unsupported_event"
	// ReasonChallengeRefused: a sender handshake whose proof does not
	// match, or whose challenge is not shaped like the sender's. → 403
	// (proof) or 400 (shape)
	ReasonChallengeRefused = "challenge_refused"
	// ReasonKeyUnavailable: the provider's key host could not be reached,
	// or served no usable key. → 503
	ReasonKeyUnavailable = "key_unavailable"
	// ReasonUntrustedKeyURL: a key or confirmation URL named by the
	// request (SNS SigningCertURL, SubscribeURL) is not https, not on the
	// key-host allow-list, or not shaped like the provider's; nothing was
	// fetched. → 401
	ReasonUntrustedKeyURL = "untrusted_key_url"
	// ReasonNotAllowed: a verified sender that is not one of those
	// configured (an SNS topic off WHGUARD_<NAME>_TOPIC_ARNS, a Pub/Sub
	// service account off _SERVICE_ACCOUNTS). → 401
	ReasonNotAllowed = "sender_not_allowed"
	// ReasonOther: an error that carries no reason (not one of Check's).
	ReasonOther = "other"
)

// refusal is an error of Check with its reason code.
type refusal struct {
	reason string
	err    error
	// skew, for a timestamp outside the tolerance, is how far the signed
	// time lies behind now (negative: ahead of it); tolerance is the
	// bound it broke. Diagnose reads them.
	skew, tolerance time.Duration
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// refusef is fmt.Errorf for a refusal: format wraps ErrUnauthorized or
// ErrBadRequest with %w, and reason says why in a word.
func refusef(reason, format string, a ...any) error {
	return &refusal{reason: reason, err: fmt.Errorf(format, a...)}
}

// skewed is refusef for a signed time skew away from now, beyond
// tolerance (ReasonTimestampOutsideTolerance).
func skewed(skew, tolerance time.Duration, format string, a ...any) error {
	return &refusal{reason: ReasonTimestampOutsideTolerance, err: fmt.Errorf(format, a...), skew: skew, tolerance: tolerance}
}

// Reason returns the reason code of an error returned by Provider.Check
// (ReasonMissingHeader, ReasonMalformedHeader, …): "" for nil, ReasonOther
// for an error that carries none.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	var r *refusal
	if errors.As(err, &r) {
		return r.reason
	}
	return ReasonOther
}

// Precheck refuses, before the body is read, a request whose signature
// headers are missing or malformed, whose signed timestamp is outside the
// tolerance, or that lacks the configured id header: the same error Check
// would give. It runs the scheme's own checks over an empty body and keeps
// only the refusals that cannot depend on the body, so a request it passes
// may still be refused by Check. Reading (and buffering) the body of a
// request that can never verify is what an unauthenticated client could
// otherwise make whguard do. A declared handshake (method and challenge)
// passes: Check answers it.
func (p *Provider) Precheck(h http.Header, rawQuery, method string, now time.Time) error {
	if p.challengeOf(Input{Header: h, RawQuery: rawQuery, Method: method}) != nil {
		return nil // a handshake: Check answers it
	}
	if method != "" && method != http.MethodPost {
		// Refused before a body is read.
		return refusef(ReasonUnsupportedEvent, "%w: %s carries no handshake whguard knows; events come by POST", ErrBadRequest, method)
	}
	if p.idHeader != "" && h.Get(p.idHeader) == "" {
		return missingHeader(p.idHeader)
	}
	_, err := p.keys.Load().verifier.Verify(Input{Header: h, RawQuery: rawQuery, precheck: true}, now)
	switch Reason(err) {
	case ReasonMissingHeader, ReasonMalformedHeader, ReasonTimestampOutsideTolerance:
		return err
	}
	return nil
}
