package verify

import (
	"crypto/sha256"
	"errors"
	"net/http"
	"time"
	"unicode/utf8"
)

// SchemeMSGraph verifies Microsoft Graph change notifications delivered to
// a webhook. Microsoft signs nothing a shared secret could check: every
// notification carries the subscription's clientState, which "must match
// the value originally submitted with the subscription creation request"
// (https://learn.microsoft.com/graph/change-notifications-delivery-webhooks,
// "Processing the change notification"). Rich notifications also carry
// validationTokens (JWTs of Microsoft identity); they are not checked.
const SchemeMSGraph = "msgraph"

const (
	// msGraphMaxClientState is the longest clientState a subscription
	// takes: "The maximum length is 128 characters"
	// (https://learn.microsoft.com/graph/api/resources/subscription).
	msGraphMaxClientState = 128
	// msGraphMaxItems bounds the notifications of one request whose
	// clientState is compared. Microsoft batches notifications of several
	// subscriptions in one POST and documents no maximum; a thousand is
	// far above what one request of the body limit carries in practice.
	msGraphMaxItems = 1000
	// msGraphMaxToken bounds the validation token echoed back. The
	// tokens are opaque ("the token format can change without notice")
	// and short: a sentence and a request id.
	msGraphMaxToken = 1024
)

// msGraphChallenge is the notification URL validation: a POST with
// ?validationToken=T and an empty body, answered within 10 s with 200,
// Content-Type text/plain and T URL-decoded, the same on the lifecycle
// notification URL (https://learn.microsoft.com/graph/change-notifications-delivery-webhooks,
// "notificationUrl validation"). Microsoft sends no clientState with it,
// so nothing proves it; the answer reveals nothing and signs nothing. A
// POST without validationToken is an ordinary notification (challengeOf
// matches only when the parameter is present and not empty).
var msGraphChallenge = challenge{
	method: http.MethodPost, param: "validationToken", maxLen: msGraphMaxToken,
	alphabet: msGraphTokenAlphabet(), proof: proofNone, answer: answerEcho,
	doc: "POST `?validationToken=T` → 200 `text/plain` T (URL-decoded)",
}

// msGraphTokenAlphabet is printable ASCII without the characters that
// make HTML (< > & " ' `): "Microsoft Graph never sends any value
// containing HTML or JavaScript code" (same page), and an echo of one
// would reflect a caller's markup.
func msGraphTokenAlphabet() string {
	b := make([]byte, 0, 0x7f-0x20)
	for c := byte(0x20); c < 0x7f; c++ {
		switch c {
		case '<', '>', '&', '"', '\'', '`':
			continue
		}
		b = append(b, c)
	}
	return string(b)
}

// msGraphScheme checks that every notification of a request carries a
// configured clientState, in constant time.
type msGraphScheme struct {
	// digests holds SHA-256 of each configured clientState.
	digests [][sha256.Size]byte
}

var _ Scheme = (*msGraphScheme)(nil)

// newMSGraphScheme checks that each secret is a clientState Microsoft
// accepts: at most 128 characters, valid UTF-8 without control characters.
func newMSGraphScheme(cfg ProviderConfig) (Scheme, error) {
	if _, err := secretKeys(cfg.Secrets, checkClientState); err != nil {
		return nil, err
	}
	return &msGraphScheme{digests: credentialDigests(cfg.Secrets)}, nil
}

// errClientState says what a clientState may hold.
var errClientState = errors.New("a Microsoft Graph clientState is at most 128 characters of text (learn.microsoft.com/graph/api/resources/subscription)")

// checkClientState refuses a secret no subscription could carry.
func checkClientState(s string) ([]byte, error) {
	if !printable(s, len(s)) || utf8.RuneCountInString(s) > msGraphMaxClientState {
		return nil, errClientState
	}
	return []byte(s), nil
}

// Verify checks a changeNotificationCollection
// (https://learn.microsoft.com/graph/api/resources/changenotificationcollection):
// a JSON object whose "value" holds 1 to msGraphMaxItems notifications,
// each with a clientState equal to a configured one. Every item is
// compared with every secret, without an early exit. The id is "" (Check
// keys the request by its digest: notifications carry no delivery id, and
// one request may batch several subscriptions' notifications). The type
// is the first item's lifecycleEvent for a lifecycle notification
// (https://learn.microsoft.com/graph/change-notifications-lifecycle-events),
// else its changeType.
func (s *msGraphScheme) Verify(in Input, _ time.Time) (Verified, error) {
	v, err := parseJSON(in.Body)
	if err != nil {
		return Verified{}, refusef(ReasonMalformedBody, "%w: body is not the JSON of a change notification collection", ErrBadRequest)
	}
	items, ok := v.field("value")
	if !ok || items.kind != kindArray || len(items.elems) == 0 {
		return Verified{}, refusef(ReasonMalformedBody, "%w: body has no \"value\" array of notifications", ErrBadRequest)
	}
	if len(items.elems) > msGraphMaxItems {
		return Verified{}, refusef(ReasonMalformedBody, "%w: more than %d notifications in one request", ErrBadRequest, msGraphMaxItems)
	}
	bad := 0
	for _, item := range items.elems {
		bad |= 1 ^ s.clientStateMatches(item)
	}
	if bad != 0 {
		return Verified{}, refusef(ReasonSignatureMismatch, "%w: a notification's clientState does not match", ErrUnauthorized)
	}
	first := items.elems[0]
	typ, ok := first.stringField("lifecycleEvent")
	if !ok {
		typ, _ = first.stringField("changeType")
	}
	return Verified{Type: typ}, nil
}

// clientStateMatches is 1 when item's clientState equals one of the
// configured ones (compared as digests, in constant time, every one), else
// 0, also when it has none.
func (s *msGraphScheme) clientStateMatches(item jsonValue) int {
	cs, ok := item.stringField("clientState")
	match := matchesDigest(cs, s.digests)
	if !ok {
		return 0
	}
	return match
}
