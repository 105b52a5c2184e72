package verify

import (
	"strings"
	"testing"
	"time"
)

// Fuzz targets for the second ring's body-HMAC schemes: never panic,
// every error wraps exactly one sentinel with a reason, and only a genuine
// signature verifies.

// FuzzBodyHMACHeader: any signature header value and body, for the scheme
// picked by which; only the genuine signature of the body verifies.
func FuzzBodyHMACHeader(f *testing.F) {
	for i, fx := range bodyHMACFixtures {
		good := fx.sign(ringASecret, fx.body)
		f.Add(uint8(i), good, []byte(fx.body))
		f.Add(uint8(i), strings.ToUpper(good), []byte(fx.body))
		f.Add(uint8(i), good+","+good, []byte(fx.body))
		f.Add(uint8(i), fx.prefix, []byte("{}"))
	}
	providers := make([]*Provider, len(bodyHMACFixtures))
	for i, fx := range bodyHMACFixtures {
		p, err := NewProvider(fx.config(ringASecret))
		if err != nil {
			f.Fatal(err)
		}
		providers[i] = p
	}
	f.Fuzz(func(t *testing.T, which uint8, sig string, body []byte) {
		i := int(which) % len(bodyHMACFixtures)
		fx := bodyHMACFixtures[i]
		ev, err := providers[i].Check(Input{Header: headers(fx.header, sig), Body: body}, time.Unix(1700000000, 0))
		checkSchemeError(t, err)
		if err != nil {
			return
		}
		want := fx.sign(ringASecret, string(body))
		if sig != want && (fx.base64 || !strings.EqualFold(sig, want)) {
			t.Fatalf("%s: %q verified %q", fx.scheme, sig, body)
		}
		if ev.ID == "" || len(ev.ID) > MaxEventIDLength {
			t.Fatalf("%s: id %q", fx.scheme, ev.ID)
		}
	})
}
