package verify

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Google rotates its keys: a token with a kid the cached JWKS lacks makes
// one refetch; a kid still unknown after it is refused, and refused again
// without a fetch while the JWKS is recent.
func TestPubSubKeyRotation(t *testing.T) {
	r := newPubSubRig(t)
	if _, err := r.check(r.good, pubsubBody, 0); err != nil {
		t.Fatal(err)
	}
	r.ks.serve(pubsubKeyPath, jwksJSON(t, jwk("k1", r.key1), jwk("k2", r.key2)), "Cache-Control", "max-age=19000")
	rotated := signJWT(t, r.key2, map[string]string{"alg": "RS256", "kid": "k2"}, googleClaims())
	unknown := signJWT(t, r.key2, map[string]string{"alg": "RS256", "kid": "k3"}, googleClaims())
	steps := []struct {
		token   string
		at      time.Duration
		ok      bool
		fetches int
	}{
		{r.good, 10 * time.Second, true, 1}, // cached
		{rotated, time.Minute, true, 2},     // unknown kid: refetched once, found
		{rotated, time.Minute + time.Second, true, 2},
		{unknown, 2 * time.Minute, false, 3},                // refetched once, still unknown
		{unknown, 2*time.Minute + 10*time.Second, false, 3}, // JWKS fetched 10 s ago: no refetch
		{unknown, 2*time.Minute + 40*time.Second, false, 4},
	}
	for i, s := range steps {
		_, err := r.check(s.token, pubsubBody, s.at)
		if (err == nil) != s.ok || (err != nil && (!errors.Is(err, ErrUnauthorized) || Reason(err) != ReasonSignatureMismatch)) {
			t.Errorf("step %d: err = %v, want ok=%v", i, err, s.ok)
		}
		if got := r.jwksPathHits(); got != s.fetches {
			t.Errorf("step %d: %d JWKS fetches, want %d", i, got, s.fetches)
		}
	}
}

// The JWKS is kept for its max-age (within bounds), and a burst of
// requests on an empty cache makes one fetch.
func TestPubSubJWKSCaching(t *testing.T) {
	r := newPubSubRig(t)
	r.ks.handle(pubsubKeyPath, func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(50 * time.Millisecond) // the burst queues on one fetch
		w.Header().Set("Cache-Control", "public, max-age=600")
		_, _ = w.Write([]byte(jwksJSON(t, jwk("k1", r.key1))))
	})
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.check(r.good, pubsubBody, 0); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, step := range []struct {
		at      time.Duration
		fetches int
	}{{0, 1}, {9 * time.Minute, 1}, {10 * time.Minute, 2}, {15 * time.Minute, 2}} {
		if _, err := r.check(r.good, pubsubBody, step.at); err != nil {
			t.Fatalf("at %v: %v", step.at, err)
		}
		if got := r.jwksPathHits(); got != step.fetches {
			t.Errorf("at %v: %d fetches, want %d", step.at, got, step.fetches)
		}
	}
	for header, want := range map[string]time.Duration{"max-age=19000": 19000 * time.Second, "no-cache, max-age=\"60\"": time.Minute,
		"max-age=99999999999": jwksMaxTTL, "private": 0, "max-age=-1": 0, "max-age=x": 0} {
		got, _ := maxAge(header)
		if got != want {
			t.Errorf("maxAge(%q) = %v, want %v", header, got, want)
		}
	}
}

// A key host down, or serving no usable key, is a 503.
func TestPubSubKeysUnavailable(t *testing.T) {
	r := newPubSubRig(t)
	for name, serve := range map[string]func(){
		"garbage": func() { r.ks.serve(pubsubKeyPath, "<html>") },
		"no RSA key": func() {
			r.ks.serve(pubsubKeyPath, `{"keys":[{"kty":"EC","kid":"k1","crv":"P-256","x":"AA","y":"AA"}]}`)
		},
		"weak RSA key": func() { r.ks.serve(pubsubKeyPath, `{"keys":[{"kty":"RSA","kid":"k1","n":"AQAB","e":"AQAB"}]}`) },
		"500": func() {
			r.ks.handle(pubsubKeyPath, func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "oops", 500) })
		},
		"empty keys":    func() { r.ks.serve(pubsubKeyPath, `{"keys":[]}`) },
		"keys not list": func() { r.ks.serve(pubsubKeyPath, `{"keys":{}}`) },
	} {
		serve()
		p := mustProvider(t, ProviderConfig{Name: "photos", Scheme: SchemePubSub, Audience: pubsubAudience, KeyHosts: []string{r.ks.host}, CAFile: r.ks.caFile})
		_, err := p.Check(Input{Header: headers("Authorization", "Bearer "+r.good), Body: []byte(pubsubBody)}, time.Unix(pubsubNow, 0))
		if !errors.Is(err, ErrUnavailable) || Reason(err) != ReasonKeyUnavailable {
			t.Errorf("%s: err = %v, want 503", name, err)
		}
	}
	down := mustProvider(t, ProviderConfig{Name: "photos", Scheme: SchemePubSub, Audience: pubsubAudience, KeyHosts: []string{downHost(t)}, CAFile: r.ks.caFile})
	_, err := down.Check(Input{Header: headers("Authorization", "Bearer "+r.good), Body: []byte(pubsubBody)}, time.Unix(pubsubNow, 0))
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrBadRequest) {
		t.Errorf("key host down: err = %v, want 503 alone", err)
	}
	// A JWKS mixing a key go-jose cannot read with a good one keeps the
	// good one.
	r.ks.serve(pubsubKeyPath, `{"keys":[{"kty":"OKP","kid":"x","crv":"Ed448","x":"AA"},`+strings.TrimPrefix(jwksJSON(t, jwk("k1", r.key1)), `{"keys":[`))
	mixed := mustProvider(t, ProviderConfig{Name: "photos", Scheme: SchemePubSub, Audience: pubsubAudience, KeyHosts: []string{r.ks.host}, CAFile: r.ks.caFile})
	if _, err := mixed.Check(Input{Header: headers("Authorization", "Bearer "+r.good), Body: []byte(pubsubBody)}, time.Unix(pubsubNow, 0)); err != nil {
		t.Errorf("mixed JWKS: %v", err)
	}
}

func TestPubSubProperties(t *testing.T) {
	r := newPubSubRig(t)
	now := time.Unix(pubsubNow, 0)
	// Precheck refuses an expired token before the body is read, and
	// passes a valid one with no body yet.
	if err := r.p.Precheck(headers("Authorization", "Bearer "+r.good), "", "", now.Add(2*time.Hour)); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("Precheck of an expired token: %v", err)
	}
	if err := r.p.Precheck(headers("Authorization", "Bearer "+r.good), "", "", now); err != nil {
		t.Errorf("Precheck of a valid token: %v", err)
	}
	// deliveryAttempt changes between pushes of one message.
	a, err1 := r.check(r.good, pubsubBody, 0)
	b, err2 := r.check(r.good, strings.Replace(pubsubBody, `"deliveryAttempt":1`, `"deliveryAttempt":5`, 1), 0)
	if err1 != nil || err2 != nil || a.ContentHash != b.ContentHash || a.ID != b.ID {
		t.Errorf("redelivery: %+v %v / %+v %v", a, err1, b, err2)
	}
	if r.p.IDSigned() || r.p.CanResign() || ResignSupport(SchemePubSub) != ResignPublicKey || DefaultTolerance(SchemePubSub) != time.Minute {
		t.Errorf("IDSigned %v, CanResign %v, resign %q", r.p.IDSigned(), r.p.CanResign(), ResignSupport(SchemePubSub))
	}
	if got := RequiredFields(SchemePubSub); len(got) != 1 || got[0] != FieldAudience {
		t.Errorf("RequiredFields = %v", got)
	}
	for _, cfg := range []ProviderConfig{{Scheme: SchemePubSub}, {Scheme: SchemePubSub, Audience: "a", KeyHosts: []string{"*.example.com"}}} {
		if fes := FieldErrors(mustFail(t, cfg)); len(fes) != 1 {
			t.Errorf("%+v: %v", cfg, fes)
		}
	}
	def := mustProvider(t, ProviderConfig{Name: "g", Scheme: SchemePubSub, Audience: pubsubAudience}).keys.Load().verifier.(*pubsubScheme)
	if got := def.jwksURL.String(); got != "https://www.googleapis.com/oauth2/v3/certs" {
		t.Errorf("JWKS URL %s", got)
	}
	if !def.keys.hosts.allows(def.jwksURL) {
		t.Error("the default JWKS host is not on its own allow-list")
	}
}

func mustFail(t *testing.T, cfg ProviderConfig) error {
	t.Helper()
	_, err := NewProvider(cfg)
	if err == nil {
		t.Fatalf("%+v accepted", cfg)
	}
	return err
}
