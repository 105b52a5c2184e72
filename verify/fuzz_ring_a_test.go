package verify

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Fuzz targets for the second ring's body-HMAC schemes (typeform,
// razorpay, vercel, bitbucket, atlassian, meta, sentry, paystack, twitter)
// and their GET handshakes: never panic, every error wraps exactly one
// sentinel with a reason, only a genuine signature verifies, and no
// handshake answer signs a body an event could carry.

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

// FuzzTwitterCRC: any query on a GET. An answered CRC's token holds none
// of '{', '"', ':' or a space, and its response_token verifies no event
// with the token as the body.
func FuzzTwitterCRC(f *testing.F) {
	for _, q := range []string{"crc_token=crc-1", "crc_token=" + url.QueryEscape(ringABody), "crc_token=12345", "crc_token=ab+cd",
		"crc_token=a%2Bb&crc_token=c", "x=1&crc_token=" + strings.Repeat("A", 129), "crc_token=%zz", "crc_token=true"} {
		f.Add(q)
	}
	p, err := NewProvider(ProviderConfig{Name: "x", Scheme: SchemeTwitter, Secrets: []string{ringASecret}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, query string) {
		ev, err := p.Check(Input{Header: http.Header{}, Method: http.MethodGet, RawQuery: query}, time.Now())
		if err != nil {
			if Reason(err) == ReasonOther || ev.Handshake != nil {
				t.Fatalf("%q: %+v, %v", query, ev, err)
			}
			return
		}
		token := queryValue(query, "crc_token")
		if token == "" || len(token) > twitterCRCMaxLen || strings.ContainsAny(token, "{\": ") {
			t.Fatalf("%q answered for token %q", query, token)
		}
		var answer struct {
			ResponseToken string `json:"response_token"`
		}
		if err := json.Unmarshal(ev.Handshake, &answer); err != nil {
			t.Fatalf("%q: answer %s", query, ev.Handshake)
		}
		if _, err := p.Check(Input{Header: headers("X-Twitter-Webhooks-Signature", answer.ResponseToken), Body: []byte(token)}, time.Now()); err == nil {
			t.Fatalf("the CRC answer for %q verifies it as an event", token)
		}
	})
}

// FuzzMetaChallenge: any query on a GET. Meta's challenge is answered only
// with the right verify token and echoes digits only.
func FuzzMetaChallenge(f *testing.F) {
	for _, q := range []string{"hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhock",
		"hub.mode=subscribe&hub.challenge=1&hub.verify_token=meatyhamhock&hub.verify_token=x", "hub.challenge=%3Cb%3E",
		"hub.mode=subscribe&hub.challenge=12&hub.verify_token=meatyhamhoc", "hub.challenge=1;hub.mode=subscribe"} {
		f.Add(q)
	}
	p, err := NewProvider(ProviderConfig{Name: "meta", Scheme: SchemeMeta, Secrets: []string{ringASecret}, VerifyToken: metaVerifyToken})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, query string) {
		ev, err := p.Check(Input{Header: http.Header{}, Method: http.MethodGet, RawQuery: query}, time.Now())
		if err != nil {
			if Reason(err) == ReasonOther || ev.Handshake != nil {
				t.Fatalf("%q: %+v, %v", query, ev, err)
			}
			return
		}
		if queryValue(query, "hub.verify_token") != metaVerifyToken || string(ev.Handshake) != queryValue(query, "hub.challenge") ||
			strings.Trim(string(ev.Handshake), "0123456789") != "" {
			t.Fatalf("%q answered %q", query, ev.Handshake)
		}
	})
}
