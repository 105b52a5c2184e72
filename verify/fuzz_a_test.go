package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Fuzz targets for the slack, zoom, shopify, paddle, linear, intercom and
// twilio header parsers: never panic, every error wraps exactly one
// sentinel, and only a genuine signature verifies.

// FuzzSlackHeaders: any X-Slack-Signature / X-Slack-Request-Timestamp pair.
func FuzzSlackHeaders(f *testing.F) {
	const ts = int64(1700000000)
	good := signSlack(slackSecret, ts, slackEventBody)
	for _, s := range []string{good, strings.ToUpper(good), "v0=", "v0", "v0=" + strings.Repeat("0", 64), good + "00", " " + good} {
		f.Add(s, "1700000000")
	}
	f.Add(good, "01700000000")
	f.Add(good, "-1")
	f.Add(good, "99999999999999999999")
	s := &slackScheme{keys: [][]byte{[]byte(slackSecret)}, tolerance: 5 * time.Minute}
	f.Fuzz(func(t *testing.T, sig, tsHeader string) {
		_, _ = slackParseV0Signature(sig)
		v, err := s.Verify(Input{Header: headers("X-Slack-Signature", sig, "X-Slack-Request-Timestamp", tsHeader), Body: []byte(slackEventBody)}, time.Unix(ts, 0))
		checkSchemeError(t, err)
		if err != nil {
			return
		}
		want := "v0=" + hex.EncodeToString(hmacSHA256([]byte(slackSecret), "v0:", tsHeader, ":", slackEventBody))
		if !strings.EqualFold(sig, want) || v.ID != "Ev123ABC456" {
			t.Fatalf("%q at %q verified: %+v", sig, tsHeader, v)
		}
	})
}

// FuzzZoomHeaders: any x-zm-signature, timestamp and body, including the
// url_validation handshake path.
func FuzzZoomHeaders(f *testing.F) {
	f.Add(signZoom(zoomSecret, zoomTS, zoomBody), "1700000000", []byte(zoomBody))
	f.Add(signZoom(zoomSecret, zoomTS, zoomValidationBody), "1700000000", []byte(zoomValidationBody))
	f.Add("v0=zz", "1700000000", []byte(`{"event":"endpoint.url_validation","payload":{"plainToken":1}}`))
	f.Add("v1="+strings.Repeat("a", 64), "", []byte("{"))
	s := &zoomScheme{keys: [][]byte{[]byte(zoomSecret)}, tolerance: 5 * time.Minute}
	f.Fuzz(func(t *testing.T, sig, tsHeader string, body []byte) {
		v, err := s.Verify(Input{Header: headers("x-zm-signature", sig, "x-zm-request-timestamp", tsHeader), Body: body}, time.Unix(zoomTS, 0))
		checkSchemeError(t, err)
		if err != nil {
			return
		}
		want := "v0=" + hex.EncodeToString(hmacSHA256([]byte(zoomSecret), "v0:", tsHeader, ":", string(body)))
		if !strings.EqualFold(sig, want) {
			t.Fatalf("%q verified", sig)
		}
		if v.Handshake != nil && !bytes.Contains(body, []byte("url_validation")) {
			t.Fatalf("handshake for %q", body)
		}
	})
}

// FuzzShopifySignature: any X-Shopify-Hmac-SHA256 value; only the right
// one verifies.
func FuzzShopifySignature(f *testing.F) {
	good := signShopify(shopifySecret, shopifyBody)
	for _, s := range []string{good, strings.TrimRight(good, "="), good + "=", "====", strings.Repeat("A", 44), "sha256=" + good} {
		f.Add(s)
	}
	s := &shopifyScheme{keys: [][]byte{[]byte(shopifySecret)}}
	f.Fuzz(func(t *testing.T, h string) {
		_, err := s.Verify(Input{Header: headers("X-Shopify-Hmac-Sha256", h), Body: []byte(shopifyBody)}, time.Time{})
		checkSchemeError(t, err)
		if err == nil && h != good {
			t.Fatalf("%q verified", h)
		}
	})
}

// FuzzPaddleSignature: parsing and verifying any Paddle-Signature header
// never panics and keeps within its bounds.
func FuzzPaddleSignature(f *testing.F) {
	good := "ts=1671552777;h1=" + signPaddle(paddleSecret, paddleTS, paddleBody)
	for _, s := range []string{good, good + ";h1=" + strings.Repeat("0", 64) + ";h2=00", "ts=", "ts=1;ts=2", ";;;", "h1=zz",
		"ts=99999999999999999999;h1=00", strings.Repeat("h1=;", 40)} {
		f.Add(s)
	}
	s := &paddleScheme{keys: [][]byte{[]byte(paddleSecret)}, tolerance: 5 * time.Minute}
	goodSig := good[len("ts=1671552777;h1="):]
	f.Fuzz(func(t *testing.T, h string) {
		ts, sigs, err := parsePaddleHeader(h)
		if err == nil && (len(sigs) == 0 || len(sigs) > maxSignatures || ts < 0) {
			t.Fatalf("parse(%q) = %d, %d signatures", h, ts, len(sigs))
		}
		v, err := s.Verify(Input{Header: headers("Paddle-Signature", h), Body: []byte(paddleBody)}, time.Unix(paddleTS, 0))
		checkSchemeError(t, err)
		if err == nil && (!strings.Contains(strings.ToLower(h), goodSig) || v.ID != "evt_01h8bzakzx3hm2fmen703n5q45") {
			t.Fatalf("%q verified: %+v", h, v)
		}
	})
}

// FuzzLinearSignature: any Linear-Signature over any body; the timestamp
// check reads only verified bodies.
func FuzzLinearSignature(f *testing.F) {
	body := linearBody(linearTSms, "Fix it")
	f.Add(signLinear(linearSecret, body), []byte(body))
	f.Add(signLinear(linearSecret, `{"webhookTimestamp":"1"}`), []byte(`{"webhookTimestamp":"1"}`))
	f.Add(signLinear(linearSecret, `{"webhookTimestamp":1e400}`), []byte(`{"webhookTimestamp":1e400}`))
	f.Add("sha256=00", []byte("x"))
	s := &linearScheme{keys: [][]byte{[]byte(linearSecret)}, tolerance: time.Minute}
	f.Fuzz(func(t *testing.T, h string, body []byte) {
		_, err := s.Verify(Input{Header: headers("Linear-Signature", h), Body: body}, time.UnixMilli(linearTSms))
		checkSchemeError(t, err)
		if err == nil && !strings.EqualFold(h, signLinear(linearSecret, string(body))) {
			t.Fatalf("%q verified", h)
		}
	})
}

// FuzzIntercomSignature: any X-Hub-Signature value; only the right one
// verifies.
func FuzzIntercomSignature(f *testing.F) {
	good := signIntercom(intercomSecret, intercomBody)
	for _, s := range []string{good, strings.ToUpper(good), "sha1=", "sha256=" + good[5:], good[5:], good + "0"} {
		f.Add(s)
	}
	s := &intercomScheme{keys: [][]byte{[]byte(intercomSecret)}}
	f.Fuzz(func(t *testing.T, h string) {
		_, _ = parseIntercomSignature(h)
		_, err := s.Verify(Input{Header: headers("X-Hub-Signature", h), Body: []byte(intercomBody)}, time.Time{})
		checkSchemeError(t, err)
		if err == nil && !strings.EqualFold(h, good) {
			t.Fatalf("%q verified", h)
		}
	})
}

// FuzzTwilioSignature: any signature, query and body (form or JSON mode);
// whatever verifies is a signature the test's own signer makes for that
// request, with or without the default port.
func FuzzTwilioSignature(f *testing.F) {
	params := url.Values{"CallSid": {"CA1"}, "Digits": {"1", "2"}}
	f.Add(signTwilio(twilioToken, twilioURL, params), "", []byte(params.Encode()))
	f.Add(signTwilio(twilioToken, twilioURL+"?a=1", params), "a=1", []byte(params.Encode()))
	sum := sha256.Sum256([]byte(`{"a":1}`))
	jq := "bodySHA256=" + hex.EncodeToString(sum[:])
	f.Add(signTwilio(twilioToken, twilioURL+"?"+jq, nil), jq, []byte(`{"a":1}`))
	f.Add("AAAA", "bodySHA256=&bodySHA256=x", []byte("a=%zz;b"))
	s, err := newTwilioScheme(ProviderConfig{Secrets: []string{twilioToken}, PublicURL: twilioURL})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, sig, rawQuery string, body []byte) {
		_, _ = twilioDecodeSignature(sig)
		_, err := s.Verify(Input{Header: headers("X-Twilio-Signature", sig), Body: body, RawQuery: rawQuery}, time.Time{})
		checkSchemeError(t, err)
		if err != nil {
			return
		}
		suffix := ""
		if rawQuery != "" {
			suffix = "?" + rawQuery
		}
		q, _ := url.ParseQuery(rawQuery)
		var vals url.Values
		if q.Get("bodySHA256") == "" {
			vals, _ = url.ParseQuery(string(body))
		} else {
			sum := sha256.Sum256(body)
			if q.Get("bodySHA256") != hex.EncodeToString(sum[:]) {
				t.Fatalf("body %q verified against bodySHA256 %q", body, q.Get("bodySHA256"))
			}
		}
		if sig != signTwilio(twilioToken, twilioURL+suffix, vals) && sig != signTwilio(twilioToken, "https://hooks.example.com:443/twilio/sms"+suffix, vals) {
			t.Fatalf("%q verified for query %q, body %q", sig, rawQuery, body)
		}
	})
}

// FuzzTwilioURLVariants: any public URL is refused or gives itself first
// and at most its default-port twin, naming the same scheme, host and path.
func FuzzTwilioURLVariants(f *testing.F) {
	for _, s := range []string{twilioURL, "http://a:80", "https://[::1]:443/x", "https://a:/x", "https://u@a/x", "https://a/x?y", "https://%61/x", "HTTP://A:80/%zz", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		urls, err := twilioURLVariants(raw)
		if err != nil {
			// Errors are fixed texts: they never quote the URL.
			if !strings.HasPrefix(err.Error(), "public URL ") || strings.ContainsAny(err.Error(), "\"%") {
				t.Fatalf("error %q", err)
			}
			return
		}
		if len(urls) == 0 || len(urls) > 2 || urls[0] != raw {
			t.Fatalf("%q → %q", raw, urls)
		}
		u0, err := url.Parse(urls[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range urls[1:] {
			u, err := url.Parse(v)
			if err != nil {
				t.Fatalf("%q → variant %q: %v", raw, v, err)
			}
			if u.Scheme != u0.Scheme || u.Hostname() != u0.Hostname() || u.EscapedPath() != u0.EscapedPath() || u.RawQuery != "" {
				t.Fatalf("%q → variant %q", raw, v)
			}
			want := map[string]string{"http": "80", "https": "443"}[u.Scheme]
			if (u.Port() != want || u0.Port() != "") && (u.Port() != "" || u0.Port() != want) {
				t.Fatalf("%q → variant %q: ports %q, %q", raw, v, u0.Port(), u.Port())
			}
		}
	})
}
