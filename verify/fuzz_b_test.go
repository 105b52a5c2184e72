package verify

import (
	"crypto/ed25519"
	"crypto/sha256"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Fuzz targets for the square, sendgrid, pagerduty, discord, gitlab and
// hmac header parsers: none panics, every error wraps exactly one sentinel,
// and only the right signature verifies.

// FuzzSquareSignature: any signature header and received query.
func FuzzSquareSignature(f *testing.F) {
	for _, s := range []string{squareSig, "", "====", squareSig + squareSig, strings.ToLower(squareSig), "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW_S6vkZ9_2N4="} {
		f.Add(s, "")
		f.Add(s, "a=1")
	}
	s := &squareScheme{keys: [][]byte{[]byte(squareKey)}, publicURL: squareURL}
	f.Fuzz(func(t *testing.T, h, query string) {
		_, err := s.Verify(Input{Header: headers("X-Square-Hmacsha256-Signature", h), Body: []byte(squareBody), RawQuery: query}, time.Time{})
		checkSchemeError(t, err)
		if err == nil && (h != squareSig || query != "") {
			t.Fatalf("%q with query %q verified", h, query)
		}
	})
}

// FuzzSendGridSignature: any signature and timestamp headers.
func FuzzSendGridSignature(f *testing.F) {
	f.Add(sgSignature, sgTimestamp)
	f.Add(sgSignature, "01600112502")
	f.Add("MEUCIA==", sgTimestamp)
	f.Add("", "")
	f.Add("MAYCAQECAQE=", "1600112502") // SEQUENCE { 1, 1 }
	f.Add(strings.Repeat("A", 200), "99999999999999")
	key, err := parseSendGridPublicKey(sgPublicKey)
	if err != nil {
		f.Fatal(err)
	}
	s := &sendGridScheme{key: key, tolerance: 5 * time.Minute}
	now := time.Unix(1600112502, 0)
	f.Fuzz(func(t *testing.T, sig, ts string) {
		if der, ok := decodeSendGridSignature(sig); ok && (len(der) == 0 || len(der) > sendGridMaxSignatureLen) {
			t.Fatalf("decoded %d bytes", len(der))
		}
		v, err := s.Verify(Input{Header: headers(sgHeaders(sig, ts)...), Body: []byte(sgPayload)}, now)
		checkSchemeError(t, err)
		if err == nil && (ts != sgTimestamp || v.ID != "" || v.Type != "") {
			t.Fatalf("sig %q at %q verified as %+v", sig, ts, v)
		}
	})
}

// FuzzPagerDutySignature: any X-PagerDuty-Signature header.
func FuzzPagerDutySignature(f *testing.F) {
	good := signPagerDuty(pdSecret, pdBody)
	for _, s := range []string{good, good + "," + good, "v1=,v1=", ",,,,", "v0=00," + good, " " + good + " ", strings.Repeat("v1=00,", 40) + good} {
		f.Add(s)
	}
	s := &pagerDutyScheme{keys: [][]byte{[]byte(pdSecret)}}
	goodHex := strings.TrimPrefix(good, "v1=")
	f.Fuzz(func(t *testing.T, h string) {
		sigs, err := parsePagerDutySignatures(h)
		if err == nil && (len(sigs) == 0 || len(sigs) > maxSignatures) {
			t.Fatalf("parse(%q): %d signatures", h, len(sigs))
		}
		_, err = s.Verify(Input{Header: headers("X-PagerDuty-Signature", h), Body: []byte(pdBody)}, time.Time{})
		checkSchemeError(t, err)
		if err == nil && !strings.Contains(strings.ToLower(h), goodHex) {
			t.Fatalf("%q verified", h)
		}
	})
}

// FuzzDiscordHeaders: any signature and timestamp headers and, with sign
// set, any correctly signed body (which exercises the interaction reader).
func FuzzDiscordHeaders(f *testing.F) {
	tsStr := strconv.FormatInt(discordTS, 10)
	for _, b := range []string{discordPingBody, discordCmdBody, discordCompBody, discordAutoBody, discordModalBody, `{"type":1e0}`, `{"type":-0}`, `{"type":2,"id":7}`, `[]`, ``} {
		f.Add(signDiscord(discordTestKey, tsStr, b), tsStr, []byte(b), false)
		f.Add("", tsStr, []byte(b), true)
	}
	f.Add("zz", "", []byte(nil), false)
	s := &discordScheme{key: discordTestKey.Public().(ed25519.PublicKey), tolerance: 5 * time.Minute}
	now := time.Unix(discordTS, 0)
	f.Fuzz(func(t *testing.T, sig, ts string, body []byte, sign bool) {
		if sign {
			sig = signDiscord(discordTestKey, ts, string(body))
		}
		v, err := s.Verify(Input{Header: headers("X-Signature-Ed25519", sig, "X-Signature-Timestamp", ts), Body: body}, now)
		checkSchemeError(t, err)
		if err != nil {
			return
		}
		if !strings.EqualFold(sig, signDiscord(discordTestKey, ts, string(body))) {
			t.Fatalf("forged %q verified", sig)
		}
		switch {
		case v.Handshake != nil:
			if string(v.Handshake) != `{"type":1}` || v.Reply != nil || v.ID != "" {
				t.Fatalf("handshake %+v", v)
			}
		case string(v.Reply) == `{"type":5}` || string(v.Reply) == `{"type":6}`:
			if !strings.HasPrefix(v.Type, "interaction.") {
				t.Fatalf("type %q", v.Type)
			}
		default:
			t.Fatalf("verified without handshake or reply: %+v", v)
		}
	})
}

// FuzzGitLabToken: only the configured token passes.
func FuzzGitLabToken(f *testing.F) {
	for _, s := range []string{glToken, glToken + " ", "", strings.ToUpper(glToken), glOtherToken} {
		f.Add(s)
	}
	sc, err := newGitLabScheme(ProviderConfig{Secrets: []string{glOtherToken, glToken}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, token string) {
		_, err := sc.Verify(Input{Header: headers("X-Gitlab-Token", token)}, time.Time{})
		checkSchemeError(t, err)
		if (err == nil) != (token == glToken || token == glOtherToken) {
			t.Fatalf("token %q: %v", token, err)
		}
	})
}

// FuzzHMACTemplateAndHeader: any signed-content template parses without
// panicking and round-trips; a scheme built from it accepts the right
// signature and nothing else, whatever the signature header holds.
func FuzzHMACTemplateAndHeader(f *testing.F) {
	const ts = "1700000000"
	for _, tpl := range []string{"{body}", "{timestamp}.{body}", "{id}.{timestamp}.{body}", "v0:{timestamp}:{body}", "{", "}{body}{", "{bo{dy}", "{nonce}"} {
		f.Add(tpl, "sha256=00", []byte(hmacBodyText), "sha256")
	}
	f.Add("{timestamp}{body}", "sha256="+strings.Repeat("ab", 32), []byte(""), "sha512")
	f.Add("{timestamp}{body}", "", []byte("x"), "sha1")
	now := time.Unix(1700000000, 0)
	f.Fuzz(func(t *testing.T, tpl, header string, body []byte, alg string) {
		segs, err := parseHMACTemplate(tpl)
		if err == nil {
			var rebuilt strings.Builder
			for _, s := range segs {
				rebuilt.WriteString([]string{s.literal, "{id}", "{timestamp}", "{body}"}[s.part])
			}
			if rebuilt.String() != tpl {
				t.Fatalf("template %q rebuilt as %q", tpl, rebuilt.String())
			}
		}
		sc, err := newHMACScheme(ProviderConfig{Secrets: []string{hmacSecret}, IDHeader: "X-Id", HMAC: HMACConfig{
			Algorithm: alg, SignatureHeader: "X-Sig", Prefix: "sha256=", TimestampHeader: "X-Ts", SignedContent: tpl,
		}}, 5*time.Minute)
		if err != nil {
			return
		}
		// The right signature, computed by filling the template here.
		filled := strings.NewReplacer("{id}", "evt_1", "{timestamp}", ts, "{body}", string(body)).Replace(tpl)
		in := func(sig string) Input {
			return Input{Header: headers("X-Sig", sig, "X-Ts", ts, "X-Id", "evt_1"), Body: body}
		}
		// The test signs for itself only with SHA-256, the default.
		if alg == "" || strings.EqualFold(alg, "sha256") {
			good := signGenericHMAC(sha256.New, false, "sha256=", hmacSecret, filled)
			if _, err := sc.Verify(in(good), now); err != nil {
				t.Fatalf("template %q: right signature refused: %v", tpl, err)
			}
			_, err := sc.Verify(in(header), now)
			checkSchemeError(t, err)
			if err == nil && !strings.EqualFold(header, good) {
				t.Fatalf("template %q: %q verified", tpl, header)
			}
			return
		}
		_, err = sc.Verify(in(header), now)
		checkSchemeError(t, err)
	})
}
