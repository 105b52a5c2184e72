package verify

import (
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// SchemePubSub verifies Google Cloud Pub/Sub push subscriptions with
// authentication.
const SchemePubSub = "pubsub"

// Google's keys for the tokens it signs (the JWKS google.golang.org/api
// idtoken fetches), and the token's issuers
// (https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions).
const (
	pubsubKeyHost = "www.googleapis.com"
	pubsubKeyPath = "/oauth2/v3/certs"
	// pubsubMaxTokenLife: Google's tokens live an hour (exp - iat); a
	// longer-lived one was not made by Pub/Sub.
	pubsubMaxTokenLife = time.Hour
	// JWKS caching: the answer's Cache-Control max-age, kept within
	// [jwksMinTTL, jwksMaxTTL], jwksDefaultTTL without one.
	jwksMinTTL     = time.Minute
	jwksMaxTTL     = 24 * time.Hour
	jwksDefaultTTL = time.Hour
	// jwksMinRefetch spaces the refetches an unknown kid causes, so that
	// tokens with made-up kids cannot turn into one JWKS fetch each.
	jwksMinRefetch = 30 * time.Second
	// jwksMaxKeys bounds the keys kept from one JWKS (Google lists 2 or 3).
	jwksMaxKeys = 16
)

var pubsubIssuers = []string{"accounts.google.com", "https://accounts.google.com"}

// pubsubScheme verifies a push request's "Authorization: Bearer <JWT>":
// an OpenID Connect token Google signs with RS256, its key picked by kid
// from Google's JWKS, iss Google's, aud the configured audience, exp not
// passed and iat not in the future (both within the tolerance, which is
// clock skew here), and exp at most an hour after iat. Tokens are parsed
// and checked by go-jose, never by hand.
//
// The token proves the sender, not the body: Pub/Sub signs no part of it.
// The id is the body's message.messageId, which the signature does not
// cover (IDSigned is false; whguard's body guard applies). A service
// account email claim is not checked: there is no setting for one yet.
type pubsubScheme struct {
	keys     *keyClient
	jwksURL  *url.URL
	jwks     *keyCache[map[string]*rsa.PublicKey]
	audience string
	skew     time.Duration
	// accounts are the accepted service-account emails; none means any
	// Google account's token for the audience (anyone can create a push
	// subscription to a public URL with any audience).
	accounts []string
}

var _ Scheme = (*pubsubScheme)(nil)

// newPubSubScheme fetches from https://www.googleapis.com/oauth2/v3/certs,
// or, with KeyHosts set, from the same path on its first host (or
// host:port) entry; wildcards alone name no host to fetch from.
func newPubSubScheme(cfg ProviderConfig, tolerance time.Duration) (Scheme, error) {
	keys, err := newKeyClient(cfg, nil)
	if err != nil {
		return nil, err
	}
	host := pubsubKeyHost
	switch {
	case len(keys.hosts.exact) > 0:
		host = keys.hosts.exact[0]
	case len(keys.hosts.suffixes) > 0:
		return nil, fieldErrorf(FieldKeyHosts, "pubsub fetches its keys from one host: list it first, not as a *. wildcard")
	default:
		keys.hosts.exact = []string{pubsubKeyHost}
	}
	accounts := trimmedList(cfg.ServiceAccounts)
	for _, a := range accounts {
		if !strings.Contains(a, "@") || !printable(a, 320) {
			return nil, fieldErrorf(FieldServiceAccounts, "service account %q is not an email address (NAME@PROJECT.iam.gserviceaccount.com)", a)
		}
	}
	return &pubsubScheme{
		keys: keys, jwksURL: &url.URL{Scheme: "https", Host: host, Path: pubsubKeyPath},
		jwks: newKeyCache[map[string]*rsa.PublicKey](1), audience: strings.TrimSpace(cfg.Audience), skew: tolerance,
		accounts: accounts,
	}, nil
}

// Volatile: Pub/Sub counts a message's pushes in deliveryAttempt when the
// subscription has a dead-letter policy.
func (s *pubsubScheme) Volatile() []string { return []string{"deliveryAttempt"} }

// Verify checks the token, then reads the body's message id and, when
// present, message.attributes.eventType (Cloud Storage notifications set
// it; other publishers have no type).
func (s *pubsubScheme) Verify(in Input, now time.Time) (Verified, error) {
	auth := in.Header.Get("Authorization")
	if auth == "" {
		return Verified{}, missingHeader("Authorization")
	}
	if err := checkHeaderLen("Authorization", auth); err != nil {
		return Verified{}, err
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(auth), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: Authorization header is not a Bearer token", ErrUnauthorized)
	}
	if in.precheck {
		// Keys are fetched once the body is read, never twice: here only
		// what the token says of itself (its times), unverified.
		return Verified{}, s.checkTokenTimes(strings.TrimSpace(token), now)
	}
	if err := s.checkToken(strings.TrimSpace(token), now); err != nil {
		return Verified{}, err
	}

	v, err := parseJSON(in.Body)
	if err != nil {
		return Verified{}, refusef(ReasonMalformedBody, "%w: push body unparseable: %w", ErrBadRequest, err)
	}
	msg, _ := v.field("message")
	id, ok := msg.stringField("messageId")
	if !ok {
		id, _ = msg.stringField("message_id")
	}
	attrs, _ := msg.field("attributes")
	typ, _ := attrs.stringField("eventType")
	return Verified{ID: id, Type: typ}, nil
}

// checkToken verifies the token's signature and claims.
func (s *pubsubScheme) checkToken(token string, now time.Time) error {
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil || len(tok.Headers) != 1 || tok.Headers[0].KeyID == "" {
		return refusef(ReasonMalformedHeader, "%w: Authorization token is not an RS256 JWT with a key id", ErrUnauthorized)
	}
	key, err := s.key(tok.Headers[0].KeyID, now)
	if err != nil {
		return err
	}
	var c jwt.Claims
	var who struct {
		Email         string `json:"email"`
		EmailVerified bool   `json:"email_verified"`
	}
	if err := tok.Claims(key, &c, &who); err != nil {
		if errors.Is(err, jose.ErrCryptoFailure) {
			return refusef(ReasonSignatureMismatch, "%w: token signature does not verify", ErrUnauthorized)
		}
		return refusef(ReasonMalformedHeader, "%w: token claims unreadable", ErrUnauthorized)
	}
	if c.Issuer != pubsubIssuers[0] && c.Issuer != pubsubIssuers[1] {
		return refusef(ReasonSignatureMismatch, "%w: token issuer is not Google's", ErrUnauthorized)
	}
	if c.Expiry == nil || c.IssuedAt == nil {
		return refusef(ReasonMalformedHeader, "%w: token has no exp or iat", ErrUnauthorized)
	}
	if life := c.Expiry.Time().Sub(c.IssuedAt.Time()); life < 0 || life > pubsubMaxTokenLife {
		return refusef(ReasonTimestampOutsideTolerance, "%w: token lifetime is not within %v", ErrUnauthorized, pubsubMaxTokenLife)
	}
	if len(s.accounts) > 0 && (!who.EmailVerified || !slices.Contains(s.accounts, who.Email)) {
		return refusef(ReasonNotAllowed, "%w: token's service account is not one of the configured ones", ErrUnauthorized)
	}
	err = c.ValidateWithLeeway(jwt.Expected{AnyAudience: jwt.Audience{s.audience}, Time: now}, s.skew)
	switch {
	case errors.Is(err, jwt.ErrInvalidAudience):
		return refusef(ReasonSignatureMismatch, "%w: token audience does not match", ErrUnauthorized)
	case errors.Is(err, jwt.ErrExpired):
		return refusef(ReasonTimestampOutsideTolerance, "%w: token expired", ErrUnauthorized)
	case err != nil:
		return refusef(ReasonTimestampOutsideTolerance, "%w: token issued in the future", ErrUnauthorized)
	}
	return nil
}

// checkTokenTimes refuses, without its keys, a token that is not an RS256
// JWT or whose exp has passed or iat is ahead (Precheck); Check verifies
// the signature and every claim after.
func (s *pubsubScheme) checkTokenTimes(token string, now time.Time) error {
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return refusef(ReasonMalformedHeader, "%w: Authorization token is not an RS256 JWT with a key id", ErrUnauthorized)
	}
	var c jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&c); err != nil {
		return refusef(ReasonMalformedHeader, "%w: token claims unreadable", ErrUnauthorized)
	}
	if err := c.ValidateWithLeeway(jwt.Expected{Time: now}, s.skew); errors.Is(err, jwt.ErrExpired) || errors.Is(err, jwt.ErrIssuedInTheFuture) {
		return refusef(ReasonTimestampOutsideTolerance, "%w: token expired or issued in the future", ErrUnauthorized)
	}
	return nil
}

// key returns the JWKS key kid names. A kid missing from a fresh JWKS
// makes one refetch (Google may have just rotated), unless the JWKS was
// fetched less than jwksMinRefetch ago; concurrent refetches are one.
func (s *pubsubScheme) key(kid string, now time.Time) (*rsa.PublicKey, error) {
	u := s.jwksURL.String()
	e, fresh := s.jwks.get(u, now)
	if fresh {
		if k := e.val[kid]; k != nil {
			return k, nil
		}
		if now.Sub(e.fetched) < jwksMinRefetch {
			return nil, refusef(ReasonSignatureMismatch, "%w: token key id is not among Google's keys", ErrUnauthorized)
		}
	}
	e, err := s.jwks.refresh(u, now, s.fetchJWKS)
	if err != nil {
		return nil, err
	}
	if k := e.val[kid]; k != nil {
		return k, nil
	}
	return nil, refusef(ReasonSignatureMismatch, "%w: token key id is not among Google's keys", ErrUnauthorized)
}

// fetchJWKS fetches and reads the JWKS, and says how long to keep it.
func (s *pubsubScheme) fetchJWKS() (map[string]*rsa.PublicKey, time.Duration, error) {
	body, h, err := s.keys.fetch("Google token keys", s.jwksURL)
	if err != nil {
		return nil, 0, err
	}
	keys, err := parseJWKS(body)
	if err != nil {
		return nil, 0, unavailable("Google token keys", s.jwksURL, err)
	}
	ttl, ok := maxAge(h.Get("Cache-Control"))
	if !ok {
		ttl = jwksDefaultTTL
	}
	return keys, min(max(ttl, jwksMinTTL), jwksMaxTTL), nil
}

// parseJWKS reads a JWKS's RSA signing keys by kid, each key read by
// go-jose. Keys of another type, use or algorithm, without a kid, or of
// fewer than 2048 bits are skipped, and at most jwksMaxKeys are kept; a set
// left with none is an error.
func parseJWKS(body []byte) (map[string]*rsa.PublicKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, errors.New("JWKS is not JSON")
	}
	keys := map[string]*rsa.PublicKey{}
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if len(keys) == jwksMaxKeys || k.UnmarshalJSON(raw) != nil || k.KeyID == "" ||
			(k.Use != "" && k.Use != "sig") || (k.Algorithm != "" && k.Algorithm != string(jose.RS256)) {
			continue
		}
		if pub, ok := k.Key.(*rsa.PublicKey); ok && pub.N.BitLen() >= minRSAKeyBits {
			keys[k.KeyID] = pub
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("JWKS holds no RSA signing key")
	}
	return keys, nil
}

// maxAge reads the max-age directive of a Cache-Control header.
func maxAge(cacheControl string) (time.Duration, bool) {
	for _, d := range strings.Split(cacheControl, ",") {
		name, val, _ := strings.Cut(strings.TrimSpace(d), "=")
		if !strings.EqualFold(name, "max-age") {
			continue
		}
		n, err := strconv.ParseInt(strings.Trim(val, `"`), 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		return time.Duration(min(n, int64(jwksMaxTTL/time.Second))) * time.Second, true
	}
	return 0, false
}

// trimmedList returns the non-blank entries of list, trimmed.
func trimmedList(list []string) []string {
	var out []string
	for _, e := range list {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
