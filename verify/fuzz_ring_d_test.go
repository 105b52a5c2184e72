package verify

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// Fuzz targets for the sns and pubsub schemes: the SNS envelope parser,
// the certificate URL check, and the JWT header and claims path. None may
// panic or reach the network (keys are cached beforehand and the client's
// transport refuses); every error wraps exactly one sentinel and carries a
// reason; only a genuine signature verifies.

// noNetwork is a transport that refuses every request: a fetch is a 503.
type noNetwork struct{}

func (noNetwork) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("no network while fuzzing")
}

// checkKeyedError is checkSchemeError for schemes that also answer 503.
func checkKeyedError(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	n := 0
	for _, s := range []error{ErrUnauthorized, ErrBadRequest, ErrUnavailable} {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 || Reason(err) == ReasonOther {
		t.Fatalf("error %v: %d sentinels, reason %q", err, n, Reason(err))
	}
}

// snsFuzzScheme is an sns scheme on AWS's hosts whose cache holds the
// fixtures' certificate and the test certificate (at snsFuzzTestCertURL).
const snsFuzzTestCertURL = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0123456789abcdef0123456789abcdef.pem"

func snsFuzzScheme(f *testing.F) *snsScheme {
	p, err := NewProvider(ProviderConfig{Name: "fuzz", Scheme: SchemeSNS, Tolerance: 2 * time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	s := p.keys.Load().verifier.(*snsScheme)
	s.keys.client.Transport = noNetwork{}
	at := time.Date(2022, 7, 28, 22, 0, 0, 0, time.UTC)
	for u, file := range map[string]string{"https://sns.us-east-2.amazonaws.com" + snsAWSCertPath: "sns-aws-fixture-cert.pem", snsFuzzTestCertURL: "sns-test-cert.pem"} {
		pub, err := parseSNSCert(readTestFile(f, file))
		if err != nil {
			f.Fatal(err)
		}
		s.certs.store(u, keyEntry[*rsa.PublicKey]{val: pub, fetched: at, expires: at.Add(10 * 365 * 24 * time.Hour)}, at)
	}
	return s
}

// FuzzSNSMessage: any body. Only AWS's fixtures, or messages signed with
// the test key, verify.
func FuzzSNSMessage(f *testing.F) {
	s := snsFuzzScheme(f)
	now := time.Date(2022, 7, 28, 22, 0, 0, 0, time.UTC)
	ids := []string{"own-1"}
	for _, fx := range snsAWSFixtures {
		g := map[string]string{"SigningCertURL": "https://sns.us-east-2.amazonaws.com" + snsAWSCertPath}
		for k, v := range fx {
			g[k] = v
		}
		f.Add([]byte(snsJSON(f, g)))
		ids = append(ids, fx["MessageId"])
		if _, err := s.Verify(Input{Body: []byte(snsJSON(f, g))}, now); err != nil {
			f.Fatalf("fixture %s does not verify: %v", fx["MessageId"], err)
		}
	}
	own := signSNS(f, readRSAKey(f, "sns-test-key.pem"), map[string]string{"Type": "UnsubscribeConfirmation", "MessageId": "own-1",
		"TopicArn": "arn:aws:sns:us-east-1:1:t", "Message": "bye\n", "Timestamp": "2022-07-28T21:30:00.000Z", "Token": "tok",
		"SubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription", "SignatureVersion": "2", "SigningCertURL": snsFuzzTestCertURL}, nil)
	f.Add([]byte(snsJSON(f, own)))
	f.Add([]byte(`{"Type":"SubscriptionConfirmation","Message":null,"Subject":null}`))
	if v, err := s.Verify(Input{Body: []byte(snsJSON(f, own))}, now); err != nil || v.Handshake == nil {
		f.Fatalf("the test key's seed does not verify: %v", err) // the rig, not the scheme, would be broken
	}
	ids = append(ids, "own-2") // signed with the test key in the committed corpus
	f.Fuzz(func(t *testing.T, body []byte) {
		m, perr := parseSNSMessage(body)
		if perr == nil && !strings.HasSuffix(string(m.signed), "\nType\n"+m.typ+"\n") {
			t.Fatalf("string to sign %q does not end with the type", m.signed)
		}
		v, err := s.Verify(Input{Body: body}, now)
		checkKeyedError(t, err)
		// RSA cannot be forged here: a message that verifies is a genuine
		// one with its signed fields unchanged.
		if err == nil && (perr != nil || !slices.Contains(ids, m.id) || (v.Handshake == nil && v.ID != m.id)) {
			t.Fatalf("forged message verified: %+v", v)
		}
	})
}

// FuzzSNSCertURL: a URL passes the default allow-list only if it is https
// on AWS's SNS hosts and default port, without user info, ending in .pem.
func FuzzSNSCertURL(f *testing.F) {
	for _, s := range []string{"https://sns.us-east-2.amazonaws.com" + snsAWSCertPath, "https://sns.cn-north-1.amazonaws.com.cn/a.pem",
		"https://sns.us-east-1.amazonaws.com:443/a.pem", "https://evil.com\\@sns.us-east-1.amazonaws.com/a.pem", "https://SNS.US-EAST-1.AMAZONAWS.COM/a.pem"} {
		f.Add(s)
	}
	c, err := newKeyClient(ProviderConfig{}, snsHostPattern)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := c.allowedURL("SigningCertURL", raw, ".pem")
		checkKeyedError(t, err)
		if err != nil {
			return
		}
		again, perr := url.Parse(u.String())
		if perr != nil || u.Scheme != "https" || u.User != nil || !strings.HasSuffix(u.Path, ".pem") ||
			(u.Port() != "" && u.Port() != "443") || !snsHostPattern.MatchString(strings.ToLower(u.Hostname())) || again.Host != u.Host {
			t.Fatalf("%q allowed as %v", raw, u)
		}
	})
}

// pubsubFuzzScheme is a pubsub scheme whose cached JWKS holds jwt-key-1 as
// k1.
func pubsubFuzzScheme(f *testing.F) (*pubsubScheme, *rsa.PrivateKey) {
	p, err := NewProvider(ProviderConfig{Name: "fuzz", Scheme: SchemePubSub, Audience: pubsubAudience})
	if err != nil {
		f.Fatal(err)
	}
	s := p.keys.Load().verifier.(*pubsubScheme)
	s.keys.client.Transport = noNetwork{}
	key := readRSAKey(f, "jwt-key-1.pem")
	at := time.Unix(pubsubNow, 0)
	s.jwks.store(s.jwksURL.String(), keyEntry[map[string]*rsa.PublicKey]{val: map[string]*rsa.PublicKey{"k1": &key.PublicKey}, fetched: at, expires: at.Add(time.Hour)}, at)
	return s, key
}

// FuzzPubSubToken: any Authorization header. Only the genuine token's
// signed part verifies.
func FuzzPubSubToken(f *testing.F) {
	s, key := pubsubFuzzScheme(f)
	good := signJWT(f, key, map[string]string{"alg": "RS256", "kid": "k1", "typ": "JWT"}, googleClaims())
	for _, a := range []string{"Bearer " + good, "bearer  " + good + " ", "Bearer " + good + "x", "Bearer a.b.c", "Bearer ..", "Basic " + good, "Bearer " + strings.ReplaceAll(good, ".", "..")} {
		f.Add(a)
	}
	if _, err := s.Verify(Input{Header: headers("Authorization", "Bearer "+good), Body: []byte(pubsubBody)}, time.Unix(pubsubNow, 0)); err != nil {
		f.Fatalf("the genuine token does not verify: %v", err)
	}
	f.Fuzz(func(t *testing.T, auth string) {
		_, err := s.Verify(Input{Header: headers("Authorization", auth), Body: []byte(pubsubBody)}, time.Unix(pubsubNow, 0))
		checkKeyedError(t, err)
		if err == nil && !rs256Verifies(&key.PublicKey, auth) {
			t.Fatalf("token verified that RS256 with the key does not: %q", auth)
		}
	})
}

// FuzzPubSubClaims: any header and claims, signed with the key the JWKS
// holds. A token accepted has what Google's tokens have, as encoding/json
// reads them: alg RS256, kid k1, Google's issuer, the audience, and exp
// and iat around now, an hour apart at most.
func FuzzPubSubClaims(f *testing.F) {
	s, key := pubsubFuzzScheme(f)
	hdr, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": "k1", "typ": "JWT"})
	for _, c := range []map[string]any{googleClaims(), googleClaims("aud", []string{pubsubAudience}), googleClaims("exp", 1e30), googleClaims("iat", "1"), googleClaims("nbf", pubsubNow+9999)} {
		b, _ := json.Marshal(c)
		f.Add(hdr, b)
	}
	f.Add([]byte(`{"alg":"RS256","kid":"k1","crit":["b64"],"b64":false}`), []byte(`{}`))
	now := time.Unix(pubsubNow, 0)
	f.Fuzz(func(t *testing.T, header, claims []byte) {
		input := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(claims)
		token := signRS256(t, key, input)
		_, err := s.Verify(Input{Header: headers("Authorization", "Bearer "+token), Body: []byte(pubsubBody)}, now)
		checkKeyedError(t, err)
		if err != nil {
			return
		}
		// Maps, not structs: encoding/json matches struct fields without
		// regard to case, JOSE names are case-sensitive.
		var h, c map[string]any
		if json.Unmarshal(header, &h) != nil || json.Unmarshal(claims, &c) != nil {
			t.Fatalf("accepted a token encoding/json cannot read: %q %q", header, claims)
		}
		audOK := c["aud"] == pubsubAudience
		if list, ok := c["aud"].([]any); ok {
			audOK = slices.Contains(list, any(pubsubAudience))
		}
		exp, _ := c["exp"].(float64)
		iat, _ := c["iat"].(float64)
		n := float64(pubsubNow)
		if h["alg"] != "RS256" || h["kid"] != "k1" || (c["iss"] != "accounts.google.com" && c["iss"] != "https://accounts.google.com") || !audOK ||
			exp < n-60 || iat > n+60 || exp-iat > 3600 || exp < iat {
			t.Fatalf("accepted header %s claims %s", header, claims)
		}
	})
}

// rs256Verifies checks, without go-jose, that the bearer token in auth is
// header.payload.signature with an RS256 signature by key.
func rs256Verifies(key *rsa.PublicKey, auth string) bool {
	_, token, _ := strings.Cut(strings.TrimSpace(auth), " ")
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return false
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	return rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig) == nil
}
