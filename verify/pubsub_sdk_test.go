package verify

import (
	"context"
	"errors"
	"testing"
	"time"

	"cloud.google.com/go/auth/credentials/idtoken"
)

// The pubsub check agrees with Google's own validator
// (cloud.google.com/go/auth/credentials/idtoken, pointed at the test's key
// server) on tokens that differ in what both check: signature, key id,
// audience and expiry. whguard checks more (issuer, iat, lifetime, the
// service account), so only these cases are compared.
func TestPubSubAgreesWithGoogleValidator(t *testing.T) {
	r := newPubSubRig(t)
	v, err := idtoken.NewValidator(&idtoken.ValidatorOptions{Client: r.ks.Client(), RS256CertsURL: r.ks.URL + pubsubKeyPath})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	head := func(kid string) map[string]string { return map[string]string{"alg": "RS256", "kid": kid, "typ": "JWT"} }
	fresh := func(changes ...any) map[string]any {
		return googleClaims(append([]any{"iat", now.Unix() - 60, "exp", now.Unix() + 3000}, changes...)...)
	}
	for _, tc := range []struct {
		name  string
		token string
		ok    bool
	}{
		{"valid", signJWT(t, r.key1, head("k1"), fresh()), true},
		{"another audience", signJWT(t, r.key1, head("k1"), fresh("aud", "https://other.example.com/push")), false},
		{"expired", signJWT(t, r.key1, head("k1"), fresh("iat", now.Unix()-4000, "exp", now.Unix()-400)), false},
		{"signed by another key", signJWT(t, r.forger, head("k1"), fresh()), false},
		{"unknown key id", signJWT(t, r.key1, head("k9"), fresh()), false},
	} {
		_, sdkErr := v.Validate(context.Background(), tc.token, pubsubAudience)
		_, err := r.p.Check(Input{Header: headers("Authorization", "Bearer "+tc.token), Body: []byte(pubsubBody)}, now)
		if (sdkErr == nil) != tc.ok || (err == nil) != tc.ok {
			t.Errorf("%s: Google's validator %v, whguard %v; want both ok=%v", tc.name, sdkErr, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s: %v, want 401", tc.name, err)
		}
	}
}
