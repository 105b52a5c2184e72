package verify

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Fuzz targets for the second ring's credential and Adyen schemes
// (postmark, telegram, okta, msgraph, adyen): none panics, every error
// wraps exactly one sentinel and carries a reason, only the configured
// credential or a correct signature verifies, and the handshakes answer
// only values of the sender's shape. Seeds are in
// testdata/fuzz/<FuzzName>/.

// FuzzRingCCredentialHeaders: any credential header value for postmark
// (0), telegram (1) and okta (2); only the configured one verifies.
func FuzzRingCCredentialHeaders(f *testing.F) {
	f.Add(uint8(0), pmAuth(pmBasicAuth))
	f.Add(uint8(1), tgSecret)
	f.Add(uint8(2), oktaSecret)
	schemes := []struct {
		header, want string
		cfg          ProviderConfig
	}{
		{"Authorization", pmAuth(pmBasicAuth), ProviderConfig{Name: "pm", Scheme: SchemePostmark, BasicAuth: pmBasicAuth}},
		{"X-Telegram-Bot-Api-Secret-Token", tgSecret, ProviderConfig{Name: "tg", Scheme: SchemeTelegram, Secrets: []string{tgSecret}}},
		{"Authorization", oktaSecret, ProviderConfig{Name: "okta", Scheme: SchemeOkta, Secrets: []string{oktaSecret}}},
	}
	providers := make([]*Provider, len(schemes))
	for i, s := range schemes {
		p, err := NewProvider(s.cfg)
		if err != nil {
			f.Fatal(err)
		}
		providers[i] = p
	}
	f.Fuzz(func(t *testing.T, which uint8, value string) {
		i := int(which) % len(schemes)
		ev, err := providers[i].Check(Input{Header: http.Header{schemes[i].header: {value}}, Body: []byte(`{"update_id":1,"message":{}}`)}, time.Time{})
		checkSchemeError(t, err)
		if (err == nil) != (value == schemes[i].want) {
			t.Fatalf("%s: %q gave %+v, %v", schemes[i].cfg.Scheme, value, ev, err)
		}
		if err != nil && len(value) >= 6 && strings.Contains(err.Error(), value) {
			t.Fatalf("the error echoes the header: %v", err)
		}
	})
}

// FuzzTelegramUpdate: any body under the right token verifies; its id is
// an integer's text or "", its type one of the body's top-level keys.
func FuzzTelegramUpdate(f *testing.F) {
	for _, b := range []string{tgMessageBody, tgCallbackBody, `{"update_id":1e3}`, `{"update_id":-0,"a":1,"b":2}`, `[]`, `{`} {
		f.Add(b)
	}
	s := &telegramScheme{digests: credentialDigests([]string{tgSecret})}
	f.Fuzz(func(t *testing.T, body string) {
		v, err := s.Verify(Input{Header: headers("X-Telegram-Bot-Api-Secret-Token", tgSecret), Body: []byte(body)}, time.Time{})
		if err != nil {
			t.Fatalf("verified token refused: %v", err)
		}
		if v.ID != "" && !isInteger(v.ID) {
			t.Fatalf("id %q", v.ID)
		}
		if v.Type == "" {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatalf("type %q of a body encoding/json refuses (%v): %q", v.Type, err, body)
		}
		if _, ok := m[v.Type]; !ok || v.Type == "update_id" || len(m) > 2 {
			t.Fatalf("type %q of %q", v.Type, body)
		}
	})
}

// FuzzMSGraphNotifications: any body; it verifies only when every item of
// its value array carries the configured clientState (checked here with
// encoding/json, independently of the package's parser).
func FuzzMSGraphNotifications(f *testing.F) {
	for _, b := range []string{mgBody(strings.ReplaceAll(mgItem, "%s", mgSecret)), mgBody(`{"clientState":"x"}`), `{"value":[]}`, `{"value":null}`, ``} {
		f.Add(b)
	}
	s := &msGraphScheme{digests: credentialDigests([]string{mgSecret})}
	f.Fuzz(func(t *testing.T, body string) {
		_, err := s.Verify(Input{Body: []byte(body)}, time.Time{})
		checkSchemeError(t, err)
		if err != nil {
			return
		}
		var c struct {
			Value []struct {
				ClientState *string `json:"clientState"`
			} `json:"value"`
		}
		if jerr := json.Unmarshal([]byte(body), &c); jerr != nil || len(c.Value) == 0 {
			return // duplicate keys and the like: encoding/json reads them otherwise
		}
		for _, it := range c.Value {
			if it.ClientState == nil || *it.ClientState != mgSecret {
				t.Fatalf("%q verified", body)
			}
		}
	})
}

// FuzzAdyenNotification: any body; only a correctly signed item verifies,
// and a verified request always gets the [accepted] reply.
func FuzzAdyenNotification(f *testing.F) {
	f.Add(adyenBody(adyenVectorItem))
	f.Add(adyenBody(adyenVectorItem, adyenVectorItem))
	f.Add(adyenBody(strings.Replace(adyenVectorItem, "1000", "1e3", 1)))
	f.Add(`{"notificationItems":[{"NotificationRequestItem":{"amount":{"value":-0}}}]}`)
	key, err := decodeAdyenKey(adyenKey)
	if err != nil {
		f.Fatal(err)
	}
	s := &adyenScheme{keys: [][]byte{key}}
	f.Fuzz(func(t *testing.T, body string) {
		v, err := s.Verify(Input{Body: []byte(body)}, time.Time{})
		checkSchemeError(t, err)
		if err != nil {
			return
		}
		if string(v.Reply) != "[accepted]" || !strings.Contains(body, "hmacSignature") {
			t.Fatalf("%q verified as %+v", body, v)
		}
	})
}

// FuzzRingCChallenges: any Okta verification value (header) and Microsoft
// validation token (raw query value). Answers hold exactly the value (JSON
// for Okta, decoded text for Microsoft), never markup, never more than the
// bound.
func FuzzRingCChallenges(f *testing.F) {
	f.Add("Hdm6CaKd8pcWJUiNdHvQxUPsKXy2wJ1kqWI4ooYK", url.QueryEscape(mgToken))
	f.Add(`a"b\c`, "%3Cscript%3E")
	f.Add("", "%zz&validationToken=x")
	okta, err := NewProvider(ProviderConfig{Name: "okta", Scheme: SchemeOkta, Secrets: []string{oktaSecret}})
	if err != nil {
		f.Fatal(err)
	}
	graph, err := NewProvider(ProviderConfig{Name: "graph", Scheme: SchemeMSGraph, Secrets: []string{mgSecret}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, v, token string) {
		ev, err := okta.Check(Input{Header: http.Header{"X-Okta-Verification-Challenge": {v}, "Authorization": {oktaSecret}}, Method: http.MethodGet}, time.Time{})
		if err == nil {
			var got struct{ Verification string }
			if json.Unmarshal(ev.Handshake, &got) != nil || got.Verification != v || len(v) > 512 {
				t.Fatalf("okta %q answered %s", v, ev.Handshake)
			}
		}
		ev, err = graph.Check(Input{RawQuery: "validationToken=" + token}, time.Time{})
		if err != nil || ev.Handshake == nil {
			return // refused, or not a validation (then verified as a notification)
		}
		if want := queryValue("validationToken="+token, "validationToken"); string(ev.Handshake) != want ||
			len(want) > msGraphMaxToken || strings.ContainsAny(want, "<>&\"'`") {
			t.Fatalf("msgraph %q answered %q", token, ev.Handshake)
		}
	})
}
