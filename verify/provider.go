package verify

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/whguard/whguard/internal/fields"
)

// MaxEventIDLength is the longest event id Check returns (bytes). Real ids
// are short (Stripe "evt_…", Svix "msg_…", GitHub's UUID, a 71-byte digest);
// the bound keeps a hostile ID header from becoming an oversized unique-index
// entry in the journal.
const MaxEventIDLength = 512

// maxEventTypeLength is the longest event type Check returns; a longer or
// unprintable one is dropped (returned as ""), not refused.
const maxEventTypeLength = 256

// ProviderConfig configures one sender (the WHGUARD_<NAME>_* variables).
// Zero fields mean defaults where the field says so.
type ProviderConfig struct {
	// Name is the provider name, lower case; it appears only in error
	// messages.
	Name string
	// Scheme is one of KnownSchemes; RequiredFields says which of the
	// other settings it needs.
	Scheme string
	// Secrets holds the signing secrets, current first, then previous ones
	// still accepted during a rotation. Each is taken verbatim (spaces
	// included). Required (and each non-empty) for every scheme but "none",
	// which ignores them.
	Secrets []string
	// Tolerance bounds the timestamp's distance from now, in both
	// directions; 0 means DefaultTolerance(Scheme). Schemes without a
	// signed timestamp (github, none) ignore it.
	Tolerance time.Duration
	// IDHeader, when set (WHGUARD_<NAME>_ID_HEADER), names the header that
	// holds the event id, and a request without it is refused; "" means the
	// scheme's own id, else the body digest. The hmac scheme also signs it
	// as {id}.
	IDHeader string
	// PublicKey verifies the public-key schemes (WHGUARD_<NAME>_PUBLIC_KEY):
	// sendgrid, base64 DER ECDSA P-256; discord, hex ed25519.
	PublicKey string
	// PreviousPublicKeys are older public keys still accepted during a
	// rotation: a request whose signature PublicKey does not verify is
	// checked with each of them, in order.
	PreviousPublicKeys []string
	// PublicURL is the URL the sender posts to, without query, for schemes
	// that sign it (twilio, square): WHGUARD_<NAME>_PUBLIC_URL. The received
	// query string is appended.
	PublicURL string
	// HMAC configures the generic hmac scheme.
	HMAC HMACConfig
	// VerifyToken is the token a GET subscription handshake must carry
	// (meta: hub.verify_token; WHGUARD_<NAME>_VERIFY_TOKEN). A credential:
	// never logged or shown.
	VerifyToken string
	// BasicAuth is the "user:password" a sender puts in the URL it posts
	// to (postmark; WHGUARD_<NAME>_BASIC_AUTH). A credential.
	BasicAuth string
	// KeyHosts replaces the scheme's allow-list of hosts its keys may be
	// fetched from (sns, pubsub; WHGUARD_<NAME>_KEY_HOSTS): exact host
	// names, or "*.suffix" for any host under suffix. Keys are fetched
	// over HTTPS only.
	KeyHosts []string
	// CAFile is a PEM file of the CAs trusted for the key hosts instead of
	// the system's (WHGUARD_<NAME>_CA_FILE): private regions and tests.
	CAFile string
	// Audience is the audience a pubsub token must carry
	// (WHGUARD_<NAME>_AUDIENCE): the push subscription's audience, by
	// default its push endpoint URL.
	Audience string
	// TopicARNs, when set, are the only SNS topics accepted and confirmed
	// (WHGUARD_<NAME>_TOPIC_ARNS): ARNs, * matching any run of characters.
	// Unset, any AWS account's topic is (warned at start-up).
	TopicARNs []string
	// ServiceAccounts, when set, are the only service-account emails a
	// pubsub token may carry, with email_verified
	// (WHGUARD_<NAME>_SERVICE_ACCOUNTS). Unset, any Google account's
	// token for the audience passes (warned at start-up).
	ServiceAccounts []string
	// BackendSecret, when set (WHGUARD_<NAME>_BACKEND_SECRET), is the only
	// secret deliveries are re-signed with (Resign), in place of the
	// sender's: the backend verifies with it, and a rotation of the
	// sender's secrets never touches the backend. It is decoded as the
	// scheme decodes its secrets (whsec_ for standard and svix), and only
	// schemes that re-sign (ResignYes; hmac with a timestamp header) take
	// it. A credential: never logged or shown.
	BackendSecret string
	// PreviousBackendSecrets are older backend secrets during a rotation
	// of BackendSecret: schemes whose header carries several signatures
	// sign with them too, after BackendSecret; the others ignore them.
	PreviousBackendSecrets []string
}

// HMACConfig configures the generic "hmac" scheme for in-house senders
// (WHGUARD_<NAME>_HMAC_ALGORITHM, _SIGNATURE_HEADER, _SIGNATURE_ENCODING,
// _SIGNATURE_PREFIX, _TIMESTAMP_HEADER, _SIGNED_CONTENT).
type HMACConfig struct {
	// Algorithm is sha256 (default), sha512 or sha1.
	Algorithm string
	// SignatureHeader names the header carrying the signature (required).
	SignatureHeader string
	// Encoding is hex (default) or base64.
	Encoding string
	// Prefix precedes the encoded signature, e.g. "sha256=".
	Prefix string
	// TimestampHeader, when set, names a header of unix seconds that is
	// checked against the tolerance and signed as {timestamp}.
	TimestampHeader string
	// SignedContent is a template over {id}, {timestamp} and {body};
	// "" means "{body}".
	SignedContent string
}

// Provider verifies the requests of one configured sender. It is safe for
// concurrent use. Only its credentials change after NewProvider, and only
// through Rekey, which replaces them all at once: each call reads them
// once, so a request is checked, or a delivery signed, with one set.
type Provider struct {
	name     string
	scheme   string
	idHeader string
	volatile []string // top-level JSON fields left out of the content hash
	// challenges are the scheme's handshakes answered before it sees the
	// request (challenge.go); verifyToken and the keys' crcKey prove or
	// answer them.
	challenges  []challenge
	verifyToken string
	// backendSigned: deliveries are signed with a backend secret; Rekey
	// keeps it so.
	backendSigned bool

	// spec, cfg and tolerance build the keys again (Rekey); mu serializes
	// Rekey calls.
	spec      *schemeSpec
	cfg       ProviderConfig
	tolerance time.Duration
	mu        sync.Mutex
	keys      atomic.Pointer[keyed]
}

// NewProvider checks cfg and returns its Provider. The error names the
// provider and holds one *FieldError per problem (unknown scheme, missing,
// empty or undecodable secret, negative tolerance, invalid header name, …),
// all of them, not only the first: see FieldErrors. It never contains a
// secret or key.
func NewProvider(cfg ProviderConfig) (*Provider, error) {
	p, err := newProvider(cfg)
	if err != nil {
		return nil, fmt.Errorf("configure provider %q: %w", cfg.Name, err)
	}
	return p, nil
}

func newProvider(cfg ProviderConfig) (*Provider, error) {
	// Every problem is reported, each as a FieldError naming its setting.
	var errs []error
	if cfg.Tolerance < 0 {
		errs = append(errs, fieldErrorf(FieldTolerance, "negative tolerance %v; expected a positive duration, or 0 for the scheme's default", cfg.Tolerance))
	}
	tolerance := cfg.Tolerance
	if tolerance <= 0 {
		tolerance = DefaultTolerance(cfg.Scheme)
	}
	if cfg.IDHeader != "" && !fields.HeaderName(cfg.IDHeader) {
		errs = append(errs, fieldErrorf(FieldIDHeader, "ID header %q is not a valid header name (%s)", cfg.IDHeader, fields.HeaderNameHint))
	}

	spec, ok := lookupScheme(cfg.Scheme)
	if !ok {
		errs = append(errs, fieldErrorf(FieldScheme, "unknown scheme %q (known: %s)", cfg.Scheme, strings.Join(KnownSchemes(), ", ")))
		return nil, errors.Join(errs...)
	}
	// Build even when a required setting is missing, so that the other
	// settings' problems are reported too; the missing one's is said once.
	missing := spec.missing(cfg)
	k, buildErrs := buildKeys(spec, cfg, tolerance)
	errs = append(errs, missing...)
	for _, err := range buildErrs {
		if len(missing) == 0 {
			errs = append(errs, err)
			continue
		}
		for _, fe := range FieldErrors(err) {
			if !slices.ContainsFunc(missing, func(m error) bool { return m.(*FieldError).Field == fe.Field }) {
				errs = append(errs, fe)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	p := &Provider{name: cfg.Name, scheme: cfg.Scheme, idHeader: cfg.IDHeader,
		challenges: spec.challenges, verifyToken: cfg.VerifyToken, backendSigned: cfg.BackendSecret != "",
		spec: spec, cfg: cfg, tolerance: tolerance}
	p.keys.Store(k)
	if d, ok := k.verifier.(volatileDeclarer); ok {
		p.volatile = d.Volatile()
	}
	return p, nil
}

// secretKeys turns each secret into its HMAC key with decode. Errors count
// secrets from 1 and never quote them.
func secretKeys(secrets []string, decode func(string) ([]byte, error)) ([][]byte, error) {
	if len(secrets) == 0 {
		return nil, &FieldError{Field: FieldSecrets, Err: errors.New("no secret configured")}
	}
	keys := make([][]byte, 0, len(secrets))
	for i, s := range secrets {
		if s == "" {
			return nil, &FieldError{Field: FieldSecrets, Index: i, Err: fmt.Errorf("secret %d of %d is empty", i+1, len(secrets))}
		}
		key, err := decode(s)
		if err != nil {
			return nil, &FieldError{Field: FieldSecrets, Index: i, Err: fmt.Errorf("secret %d of %d: %w", i+1, len(secrets), err)}
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// rawSecret uses the secret's bytes as the key (Stripe, GitHub).
func rawSecret(s string) ([]byte, error) { return []byte(s), nil }

// Name returns the provider name.
func (p *Provider) Name() string { return p.name }

// SchemeName returns the provider's scheme name, one of KnownSchemes.
func (p *Provider) SchemeName() string { return p.scheme }

// Check verifies one request and derives its event:
//
//  1. the scheme checks the signature over the exact body with every
//     configured secret, and the timestamp against now;
//  2. the event id is the IDHeader's value when one is configured (missing
//     or empty: ErrBadRequest), else the scheme's own id, else
//     Digest(header, body); an id longer than MaxEventIDLength or holding
//     control characters or invalid UTF-8 is refused with ErrBadRequest;
//  3. the content hash is ContentDigest with the scheme's volatile fields
//     (Stripe: pending_webhooks) left out;
//  4. the type comes from the scheme (dropped if longer than 256 bytes or
//     unprintable).
//
// Every error wraps ErrUnauthorized or ErrBadRequest and is safe to show
// the sender.
func (p *Provider) Check(in Input, now time.Time) (Event, error) {
	if ch := p.challengeOf(in); ch != nil {
		return p.answer(ch, in)
	}
	if in.Method != "" && in.Method != http.MethodPost {
		return Event{}, refusef(ReasonUnsupportedEvent, "%w: %s carries no handshake whguard knows; events come by POST", ErrBadRequest, in.Method)
	}
	v, err := p.keys.Load().verify(in, now)
	if err != nil {
		return Event{}, err
	}
	if v.Handshake != nil {
		// Verified, answered at once, never journaled: no key needed.
		return Event{Handshake: v.Handshake, AnswerType: v.AnswerType, Note: v.Note}, nil
	}
	id, typ := v.ID, v.Type
	if p.idHeader != "" {
		id = in.Header.Get(p.idHeader)
		if id == "" {
			return Event{}, missingHeader(p.idHeader)
		}
	}
	if id != "" {
		if err := checkEventID(id); err != nil {
			return Event{}, err
		}
	}

	// One parse of the body gives the content hash, the digest key and
	// the type.
	d, err := digestBody(in.Header, in.Body, p.volatile)
	if err != nil {
		if id == "" {
			// The key itself needs the canonical body: refuse with 400
			// (docs/ingress.md, "The checks, in order").
			return Event{}, err
		}
		// The key came from a header or the scheme: a body we cannot
		// canonicalize (duplicate keys, too deep, a broken form) is still a
		// verified event. Compare resends by their raw bytes rather than
		// refuse it and have the sender retry until it gives up.
		d = bodyDigests{content: hashBytes(in.Body)}
	}
	contentHash := d.content
	if id == "" {
		id = d.plain
	}
	if typ == "" {
		// Schemes without a type of their own (standard, none, hmac, …): a
		// JSON body's top-level "type" is what most senders use.
		typ = d.typ
	}
	typ = EventType(typ)
	return Event{ID: id, Type: typ, ContentHash: contentHash, Reply: v.Reply, AnswerType: v.AnswerType}, nil
}

// Digest is the content hash Check gives body with headers h (the
// scheme's volatile fields left out; the raw bytes' hash when the body
// cannot be canonicalized), for an event that comes with no signature to
// check: one catch-up read from the provider's API.
func (p *Provider) Digest(h http.Header, body []byte) string {
	d, err := digestBody(h, body, p.volatile)
	if err != nil {
		return hashBytes(body)
	}
	return d.content
}

// CheckEventID refuses, as the webhook path does, an event id that is
// empty, longer than MaxEventIDLength, or holds control characters or
// invalid UTF-8: for an event that comes with no request to check (one
// catch-up read from the provider's API).
func CheckEventID(id string) error {
	if id == "" {
		return refusef(ReasonInvalidEventID, "%w: no event id", ErrBadRequest)
	}
	return checkEventID(id)
}

// EventType is typ as the webhook path keeps an event's type: "" unless
// it is printable text of a bounded length.
func EventType(typ string) string {
	if !printable(typ, maxEventTypeLength) {
		return ""
	}
	return typ
}

func checkEventID(id string) error {
	if len(id) > MaxEventIDLength {
		return refusef(ReasonInvalidEventID, "%w: event id longer than %d bytes", ErrBadRequest, MaxEventIDLength)
	}
	if !printable(id, MaxEventIDLength) {
		return refusef(ReasonInvalidEventID, "%w: event id holds control characters or invalid UTF-8", ErrBadRequest)
	}
	return nil
}

// printable tells whether s is valid UTF-8 of at most maxLen bytes without
// ASCII control characters.
func printable(s string, maxLen int) bool {
	if len(s) > maxLen || !utf8.ValidString(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return true
}
