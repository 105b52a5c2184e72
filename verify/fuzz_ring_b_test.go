package verify

import (
	"strings"
	"testing"
	"time"
)

// Fuzz targets for the second ring's timestamp schemes: the RFC 3339 and
// millisecond timestamps, the twitch, zendesk, workos and hubspot headers,
// HubSpot's URI decoding and Mailgun's signature block. None panics, every
// error wraps exactly one sentinel and carries a reason, and only the right
// signature verifies. (calendly reuses parseStripeHeader, fuzzed by
// FuzzStripeHeader.) Seeds beyond these are in testdata/fuzz/<name>/.

// FuzzTwitchHeaders: any signature, message id and timestamp headers.
func FuzzTwitchHeaders(f *testing.F) {
	f.Add(twitchVector, "msg-1", twitchTS)
	f.Add(twitchVector, "msg-1", "2023-11-14T22:13:20Z")
	f.Add("sha256=", "", "2023-11-14T22:13:20.123+02:00")
	f.Add(strings.ToUpper(twitchVector), "msg-1", "2023-11-14t22:13:20z")
	s := &twitchScheme{keys: [][]byte{[]byte(ringSecret)}, tolerance: twitchTolerance}
	now := time.Unix(ringUnix, 0)
	f.Fuzz(func(t *testing.T, sig, id, ts string) {
		if at, ok := parseRFC3339(ts); ok && (len(ts) > maxRFC3339Len || at.Year() < 0 || at.Year() > 9999) {
			t.Fatalf("parseRFC3339(%q) = %v", ts, at)
		}
		v, err := s.Verify(Input{Header: twitchHeaders(sig, id, ts, "notification"), Body: []byte(ringBody)}, now)
		checkSchemeError(t, err)
		if err == nil && (!strings.EqualFold(sig, signTwitch(ringSecret, id, ts, ringBody)) || v.ID != id || v.Handshake != nil) {
			t.Fatalf("%q %q %q verified as %+v", sig, id, ts, v)
		}
	})
}

// FuzzZendeskHeaders: any signature and timestamp headers.
func FuzzZendeskHeaders(f *testing.F) {
	f.Add(zendeskVector, zendeskTS)
	f.Add(zendeskVector, "2023-11-14T22:13:20+00:00")
	f.Add(strings.TrimSuffix(zendeskVector, "="), "2023-11-14T22:13:20.999999999Z")
	f.Add("", "")
	s := &zendeskScheme{keys: [][]byte{[]byte(ringSecret)}, tolerance: defaultTol}
	now := time.Unix(ringUnix, 0)
	f.Fuzz(func(t *testing.T, sig, ts string) {
		v, err := s.Verify(Input{Header: zendeskHeaders(sig, ts), Body: []byte(ringBody)}, now)
		checkSchemeError(t, err)
		if err == nil && (sig != signZendesk(ringSecret, ts, ringBody) || v.ID != "") {
			t.Fatalf("%q at %q verified as %+v", sig, ts, v)
		}
	})
}

// FuzzWorkOSHeader: any WorkOS-Signature header.
func FuzzWorkOSHeader(f *testing.F) {
	v1 := workosVector[len("t=1700000000000, v1="):]
	for _, h := range []string{workosVector, "t=1700000000000,v1=" + v1, " v1=" + v1 + " , t=1700000000000 ", "t=,v1=", "t=1,t=2",
		",,,", "t=0001700000000000, v1=" + v1, "t=1700000000000, v1=" + strings.Repeat("0", 64) + ", v1=" + v1} {
		f.Add(h)
	}
	s := &workosScheme{keys: [][]byte{[]byte(ringSecret)}, tolerance: workosTolerance}
	now := time.Unix(ringUnix, 0)
	f.Fuzz(func(t *testing.T, h string) {
		ts, ms, sigs, err := parseWorkOSHeader(h)
		if err == nil {
			if got, ok := parseUnixMillis(ts); !ok || got != ms || len(sigs) == 0 || len(sigs) > maxSignatures {
				t.Fatalf("parse(%q) = %q, %d, %d signatures", h, ts, ms, len(sigs))
			}
		}
		_, err = s.Verify(Input{Header: headers("WorkOS-Signature", h), Body: []byte(ringBody)}, now)
		checkSchemeError(t, err)
		if err == nil && !strings.Contains(strings.ToLower(h), v1) {
			t.Fatalf("%q verified", h)
		}
	})
}

// FuzzHubSpotHeaders: any v3 signature, timestamp and received query.
func FuzzHubSpotHeaders(f *testing.F) {
	f.Add(hubspotVector, "1700000000000", "")
	f.Add(hubspotVector, "1700000000000", "a=%3A%2f%zz%4")
	f.Add("", "1700000000", "%")
	f.Add(hubspotVector, "01700000000000", "x=%252F")
	s := &hubspotScheme{keys: [][]byte{[]byte(ringSecret)}, tolerance: defaultTol, publicURL: hubspotURL}
	now := time.Unix(ringUnix, 0)
	f.Fuzz(func(t *testing.T, sig, ts, query string) {
		uri := hubspotURL + "?" + query
		if d := hubspotDecodeURI(uri); len(d) > len(uri) || (!strings.Contains(uri, "%") && d != uri) {
			t.Fatalf("decoded %q to %q", uri, d)
		}
		_, err := s.Verify(Input{Header: hubspotHeaders(sig, ts), Body: []byte(ringBody), RawQuery: query}, now)
		checkSchemeError(t, err)
		if query == "" {
			uri = hubspotURL
		}
		if err == nil && sig != signHubSpot(ringSecret, "POST", hubspotDecodeURI(uri), ringBody, ts) {
			t.Fatalf("%q at %q with query %q verified", sig, ts, query)
		}
	})
}

// FuzzMailgunBody: any body, as JSON or as a legacy form.
func FuzzMailgunBody(f *testing.F) {
	good := mailgunBody(mailgunBlock("1700000000", "tok-1", mailgunVector), mailgunEvent)
	for _, b := range []string{good, mailgunBody(`{"timestamp":1700000000,"token":"tok-1","signature":"`+mailgunVector+`"}`, `{}`),
		`{"signature":{}}`, `{"signature":[]}`, "", "[]"} {
		f.Add(b, false)
	}
	f.Add("timestamp=1700000000&token=tok-1&signature="+mailgunVector+"&event=delivered", true)
	f.Add("a=%zz", true)
	s := &mailgunScheme{keys: [][]byte{[]byte(ringSecret)}, tolerance: mailgunTolerance}
	now := time.Unix(ringUnix, 0)
	f.Fuzz(func(t *testing.T, body string, form bool) {
		h := headers("Content-Type", "application/json")
		read := mailgunJSON
		if form {
			h, read = headers("Content-Type", "application/x-www-form-urlencoded"), mailgunForm
		}
		_, err := s.Verify(Input{Header: h, Body: []byte(body)}, now)
		checkSchemeError(t, err)
		if err != nil {
			return
		}
		m, _ := read([]byte(body))
		want := signMailgun(ringSecret, m.timestamp, m.token)
		for _, sig := range m.sigs {
			if strings.EqualFold(sig, want) {
				return
			}
		}
		t.Fatalf("%q verified without the signature of its timestamp and token", body)
	})
}
