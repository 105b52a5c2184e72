package verify

import (
	"crypto"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"
)

// Pub/Sub push authentication
// (https://cloud.google.com/pubsub/docs/authenticate-push-subscriptions):
// Google signs an OpenID Connect token (RS256, iss accounts.google.com,
// aud the subscription's audience, exp an hour after iat) and sends it as
// "Authorization: Bearer"; its keys are Google's JWKS. The tests serve a
// JWKS of their own keys from a TLS test server (KeyHosts, CAFile) and
// build the tokens by hand, independently of go-jose.

const (
	pubsubAudience = "https://hooks.example.com/pubsub"
	pubsubNow      = int64(1700000000)
	pubsubBody     = `{"message":{"attributes":{"bucketId":"photos","eventType":"OBJECT_FINALIZE","objectId":"cat.jpg"},"data":"eyJuYW1lIjoiY2F0LmpwZyJ9",` +
		`"messageId":"2070443601311540","message_id":"2070443601311540","publishTime":"2023-11-14T22:13:19.749Z","publish_time":"2023-11-14T22:13:19.749Z"},` +
		`"subscription":"projects/myproject/subscriptions/photos-push","deliveryAttempt":1}`
)

func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// signJWT returns header.claims.signature, RS256 with key, from the JSON
// of header and claims.
func signJWT(t testing.TB, key *rsa.PrivateKey, header, claims any) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	return signRS256(t, key, b64url(h)+"."+b64url(c))
}

// signRS256 appends to input "." and its RS256 signature with key.
func signRS256(t testing.TB, key *rsa.PrivateKey, input string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(nil, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return input + "." + b64url(sig)
}

// googleClaims are a push token's claims at pubsubNow, changed by the
// given pairs (a nil value deletes the claim).
func googleClaims(changes ...any) map[string]any {
	c := map[string]any{
		"aud": pubsubAudience, "azp": "113774264463038321964", "email": "push@myproject.iam.gserviceaccount.com",
		"email_verified": true, "iss": "https://accounts.google.com", "sub": "113774264463038321964",
		"iat": pubsubNow - 60, "exp": pubsubNow - 60 + 3600,
	}
	for i := 0; i+1 < len(changes); i += 2 {
		if changes[i+1] == nil {
			delete(c, changes[i].(string))
			continue
		}
		c[changes[i].(string)] = changes[i+1]
	}
	return c
}

// jwk is the JWKS entry of key under kid.
func jwk(kid string, key *rsa.PrivateKey) map[string]string {
	return map[string]string{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": kid,
		"n": b64url(key.N.Bytes()), "e": b64url(big.NewInt(int64(key.E)).Bytes())}
}

// jwksJSON is a JWKS of the given entries.
func jwksJSON(t testing.TB, keys ...map[string]string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pubsubRig is a pubsub provider fetching its keys from a test server
// that serves the JWKS of jwt-key-1 (kid k1) with max-age 19000, like
// Google's.
type pubsubRig struct {
	ks           *keyServer
	p            *Provider
	key1, key2   *rsa.PrivateKey
	forger       *rsa.PrivateKey
	good         string // a valid token of key1
	jwksPathHits func() int
}

func newPubSubRig(t *testing.T) *pubsubRig {
	t.Helper()
	r := &pubsubRig{ks: newKeyServer(t), key1: readRSAKey(t, "jwt-key-1.pem"), key2: readRSAKey(t, "jwt-key-2.pem"), forger: readRSAKey(t, "jwt-forger.pem")}
	r.ks.serve(pubsubKeyPath, jwksJSON(t, jwk("k1", r.key1)), "Cache-Control", "public, max-age=19000, must-revalidate, no-transform")
	r.p = mustProvider(t, ProviderConfig{Name: "photos", Scheme: SchemePubSub, Audience: pubsubAudience, KeyHosts: []string{r.ks.host}, CAFile: r.ks.caFile})
	r.good = signJWT(t, r.key1, map[string]string{"alg": "RS256", "kid": "k1", "typ": "JWT"}, googleClaims())
	r.jwksPathHits = func() int { return r.ks.pathHits(pubsubKeyPath) }
	return r
}

// check runs Check with token as the bearer token at pubsubNow+at.
func (r *pubsubRig) check(token, body string, at time.Duration) (Event, error) {
	return r.p.Check(Input{Header: headers("Authorization", "Bearer "+token, "Content-Type", "application/json"), Body: []byte(body)}, time.Unix(pubsubNow, 0).Add(at))
}

func TestPubSubCheck(t *testing.T) {
	k1 := map[string]string{"alg": "RS256", "kid": "k1", "typ": "JWT"}
	for _, tc := range []struct {
		name     string
		token    func(r *pubsubRig, t *testing.T) string
		auth     string // replaces the Authorization header when set
		body     string
		at       time.Duration
		wantErr  error
		reason   string
		wantID   string
		wantType string
		fetches  int
	}{
		{name: "valid", token: func(r *pubsubRig, _ *testing.T) string { return r.good }, wantID: "2070443601311540", wantType: "OBJECT_FINALIZE", fetches: 1},
		{name: "issuer without https, audience in a list, no type", token: func(r *pubsubRig, t *testing.T) string {
			return signJWT(t, r.key1, k1, googleClaims("iss", "accounts.google.com", "aud", []string{"other", pubsubAudience}))
		}, body: `{"message":{"data":"e30=","messageId":"9"},"subscription":"projects/p/subscriptions/s"}`, wantID: "9", fetches: 1},
		{name: "token reused 55 minutes later", token: func(r *pubsubRig, _ *testing.T) string { return r.good }, at: 55 * time.Minute,
			wantID: "2070443601311540", wantType: "OBJECT_FINALIZE", fetches: 1},
		{name: "expired 30 s ago: within the clock skew", token: func(r *pubsubRig, _ *testing.T) string { return r.good }, at: 59*time.Minute + 30*time.Second,
			wantID: "2070443601311540", wantType: "OBJECT_FINALIZE", fetches: 1},
		{name: "expired", token: func(r *pubsubRig, _ *testing.T) string { return r.good }, at: 61 * time.Minute,
			wantErr: ErrUnauthorized, reason: ReasonTimestampOutsideTolerance, fetches: 1},
		{name: "issued in the future", token: func(r *pubsubRig, t *testing.T) string {
			return signJWT(t, r.key1, k1, googleClaims("iat", pubsubNow+300, "exp", pubsubNow+3000))
		}, wantErr: ErrUnauthorized, reason: ReasonTimestampOutsideTolerance, fetches: 1},
		{name: "lives longer than an hour", token: func(r *pubsubRig, t *testing.T) string {
			return signJWT(t, r.key1, k1, googleClaims("exp", pubsubNow+7200))
		}, wantErr: ErrUnauthorized, reason: ReasonTimestampOutsideTolerance, fetches: 1},
		{name: "no exp", token: func(r *pubsubRig, t *testing.T) string { return signJWT(t, r.key1, k1, googleClaims("exp", nil)) },
			wantErr: ErrUnauthorized, reason: ReasonMalformedHeader, fetches: 1},
		{name: "wrong audience", token: func(r *pubsubRig, t *testing.T) string {
			return signJWT(t, r.key1, k1, googleClaims("aud", "https://hooks.example.com/other"))
		}, wantErr: ErrUnauthorized, reason: ReasonSignatureMismatch, fetches: 1},
		{name: "wrong issuer", token: func(r *pubsubRig, t *testing.T) string {
			return signJWT(t, r.key1, k1, googleClaims("iss", "https://accounts.example.com"))
		}, wantErr: ErrUnauthorized, reason: ReasonSignatureMismatch, fetches: 1},
		{name: "signed by another key under kid k1", token: func(r *pubsubRig, t *testing.T) string { return signJWT(t, r.forger, k1, googleClaims()) },
			wantErr: ErrUnauthorized, reason: ReasonSignatureMismatch, fetches: 1},
		{name: "tampered claims", token: func(r *pubsubRig, t *testing.T) string {
			parts := strings.Split(r.good, ".")
			c, _ := json.Marshal(googleClaims("exp", pubsubNow+3540+86400))
			return parts[0] + "." + b64url(c) + "." + parts[2]
		}, wantErr: ErrUnauthorized, reason: ReasonSignatureMismatch, fetches: 1},
		{name: "unknown kid (first fetch)", token: func(r *pubsubRig, t *testing.T) string {
			return signJWT(t, r.key2, map[string]string{"alg": "RS256", "kid": "k9"}, googleClaims())
		}, wantErr: ErrUnauthorized, reason: ReasonSignatureMismatch, fetches: 1},
		{name: "alg none", token: func(r *pubsubRig, t *testing.T) string {
			c, _ := json.Marshal(googleClaims())
			return b64url([]byte(`{"alg":"none","kid":"k1"}`)) + "." + b64url(c) + "."
		}, wantErr: ErrUnauthorized, reason: ReasonMalformedHeader},
		{name: "HS256 keyed with the public key", token: func(r *pubsubRig, t *testing.T) string {
			c, _ := json.Marshal(googleClaims())
			input := b64url([]byte(`{"alg":"HS256","kid":"k1"}`)) + "." + b64url(c)
			m := hmac.New(sha256.New, r.key1.N.Bytes())
			m.Write([]byte(input))
			return input + "." + b64url(m.Sum(nil))
		}, wantErr: ErrUnauthorized, reason: ReasonMalformedHeader},
		{name: "no kid", token: func(r *pubsubRig, t *testing.T) string {
			return signJWT(t, r.key1, map[string]string{"alg": "RS256"}, googleClaims())
		},
			wantErr: ErrUnauthorized, reason: ReasonMalformedHeader},
		{name: "malformed token", token: func(*pubsubRig, *testing.T) string { return "not.a.jwt" }, wantErr: ErrUnauthorized, reason: ReasonMalformedHeader},
		{name: "not a bearer token", auth: "Basic dXNlcjpwYXNz", wantErr: ErrUnauthorized, reason: ReasonMalformedHeader},
		{name: "bearer without a token", auth: "Bearer", wantErr: ErrUnauthorized, reason: ReasonMalformedHeader},
		{name: "oversized header", auth: "Bearer " + strings.Repeat("a", maxSignatureHeaderLen), wantErr: ErrUnauthorized, reason: ReasonMalformedHeader},
		{name: "no Authorization", auth: "-", wantErr: ErrBadRequest, reason: ReasonMissingHeader},
		{name: "body not JSON", token: func(r *pubsubRig, _ *testing.T) string { return r.good }, body: "message=1",
			wantErr: ErrBadRequest, reason: ReasonMalformedBody, fetches: 1},
		{name: "body without messageId: content digest", token: func(r *pubsubRig, _ *testing.T) string { return r.good }, body: `{"message":{"data":"e30="}}`,
			wantID: "digest", fetches: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newPubSubRig(t)
			body := tc.body
			if body == "" {
				body = pubsubBody
			}
			h := headers("Content-Type", "application/json")
			switch {
			case tc.auth == "-":
			case tc.auth != "":
				h.Set("Authorization", tc.auth)
			default:
				h.Set("Authorization", "Bearer "+tc.token(r, t))
			}
			ev, err := r.p.Check(Input{Header: h, Body: []byte(body)}, time.Unix(pubsubNow, 0).Add(tc.at))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || Reason(err) != tc.reason {
					t.Fatalf("err = %v (reason %s), want %v (%s)", err, Reason(err), tc.wantErr, tc.reason)
				}
				assertNoLeakB(t, err, ProviderConfig{}, h)
			} else if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if tc.wantID == "digest" {
				if want, _ := Digest(h, []byte(body)); ev.ID != want {
					t.Errorf("ID = %q, want the digest %q", ev.ID, want)
				}
			} else if ev.ID != tc.wantID || ev.Type != tc.wantType {
				t.Errorf("event id %q type %q, want %q %q", ev.ID, ev.Type, tc.wantID, tc.wantType)
			}
			if got := r.jwksPathHits(); got != tc.fetches {
				t.Errorf("JWKS fetched %d times, want %d", got, tc.fetches)
			}
		})
	}
}
