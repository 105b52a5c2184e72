package verify

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The published vector of Adyen/adyen-go-api-library
// src/hmacvalidator/hmacvalidator_test.go (the same in Adyen's Java
// library): this key signs this data as adyenVectorSig.
const (
	adyenKey       = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"
	adyenOtherKey  = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	adyenVectorSig = "ipnxGCaUZ4l8TUW75a71/ghd2Fe5ffvX0pV4TLTntIc="
	adyenVectorStr = "pspReference:originalReference:merchantAccount:reference:1000:EUR:EVENT:true"
	// adyenVectorItem is that test's NotificationRequestItem as Adyen's
	// JSON writes it.
	adyenVectorItem = `{"additionalData":{"hmacSignature":"` + adyenVectorSig + `"},"amount":{"currency":"EUR","value":1000},` +
		`"eventCode":"EVENT","eventDate":"1970-01-01T00:00:00+00:00","merchantAccountCode":"merchantAccount",` +
		`"merchantReference":"reference","originalReference":"originalReference","paymentMethod":"VISA",` +
		`"pspReference":"pspReference","reason":"reason","success":"true"}`
)

// adyenBody wraps items in a standard notification.
func adyenBody(items ...string) string {
	wrapped := make([]string, len(items))
	for i, it := range items {
		wrapped[i] = `{"NotificationRequestItem":` + it + `}`
	}
	return `{"live":"false","notificationItems":[` + strings.Join(wrapped, ",") + `]}`
}

// signAdyen is the base64 HMAC-SHA256 of data under the hex key, computed
// here independently of the package.
func signAdyen(t *testing.T, key, data string) string {
	t.Helper()
	k, err := hex.DecodeString(key)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(hmacSHA256(k, data))
}

// adyenItem is an AUTHORISATION item (the shape of Adyen's docs example,
// https://docs.adyen.com/development-resources/webhooks/webhook-types)
// with no originalReference, signed with key over its fields (value as
// written in the JSON).
func adyenItem(t *testing.T, key, psp, value, success string) string {
	t.Helper()
	data := fmt.Sprintf("%s::TestMerchant:TestPayment-1407325143704:%s:EUR:AUTHORISATION:%s", psp, value, success)
	return fmt.Sprintf(`{"additionalData":{"hmacSignature":"%s"},"amount":{"currency":"EUR","value":%s},"eventCode":"AUTHORISATION",`+
		`"eventDate":"2026-01-01T01:00:00+01:00","merchantAccountCode":"TestMerchant","merchantReference":"TestPayment-1407325143704",`+
		`"pspReference":"%s","success":"%s"}`, signAdyen(t, key, data), value, psp, success)
}

func TestAdyenVector(t *testing.T) {
	v, err := parseJSON([]byte(adyenVectorItem))
	if err != nil {
		t.Fatal(err)
	}
	data, err := adyenSignedData(v)
	if err != nil || data != adyenVectorStr {
		t.Fatalf("signed data %q, %v; want %q", data, err, adyenVectorStr)
	}
	if got := signAdyen(t, adyenKey, adyenVectorStr); got != adyenVectorSig {
		t.Fatalf("the test's HMAC gives %s", got)
	}
}

func TestAdyenCheck(t *testing.T) {
	now := time.Unix(1700000000, 0)
	base := ProviderConfig{Name: "adyen", Scheme: SchemeAdyen, Secrets: []string{adyenKey}}
	one := adyenItem(t, adyenKey, "7914073381342284", "1130", "true")
	two := adyenItem(t, adyenKey, "8815073381342285", "0", "false")
	byOld := adyenItem(t, adyenOtherKey, "7914073381342284", "1130", "true")
	const reply = "[accepted]"
	tampered := func(item, from, to string) string { return adyenBody(strings.Replace(item, from, to, 1)) }
	runCasesB(t, base, []caseB{
		{name: "published vector", header: headers(), body: adyenBody(adyenVectorItem), now: now,
			wantID: "pspReference:EVENT", wantType: "EVENT", wantReply: reply},
		{name: "authorisation without originalReference", body: adyenBody(one), now: now,
			wantID: "7914073381342284:AUTHORISATION", wantType: "AUTHORISATION", wantReply: reply},
		{name: "batch of two: every item verified, digest id", body: adyenBody(one, two), now: now,
			wantID: "digest", wantType: "AUTHORISATION", wantReply: reply},
		{name: "no timestamp: any clock", body: adyenBody(one), now: time.Unix(0, 0), wantID: "7914073381342284:AUTHORISATION", wantType: "AUTHORISATION", wantReply: reply},
		{name: "lower-case key", cfg: func(c *ProviderConfig) { c.Secrets = []string{strings.ToLower(adyenKey)} },
			body: adyenBody(adyenVectorItem), now: now, wantID: "pspReference:EVENT", wantType: "EVENT", wantReply: reply},
		{name: "rotated: a retry signed with the previous key", cfg: func(c *ProviderConfig) { c.Secrets = []string{adyenKey, adyenOtherKey} },
			body: adyenBody(byOld), now: now, wantID: "7914073381342284:AUTHORISATION", wantType: "AUTHORISATION", wantReply: reply},
		{name: "rotated: items of both keys in one batch", cfg: func(c *ProviderConfig) { c.Secrets = []string{adyenKey, adyenOtherKey} },
			body: adyenBody(two, byOld), now: now, wantID: "digest", wantType: "AUTHORISATION", wantReply: reply},
		{name: "escaped text is signed decoded", body: adyenBody(strings.Replace(adyenVectorItem, `"reference"`, `"\u0072eference"`, 1)), now: now,
			wantID: "pspReference:EVENT", wantType: "EVENT", wantReply: reply},
		{name: "wrong key", cfg: func(c *ProviderConfig) { c.Secrets = []string{adyenOtherKey} }, body: adyenBody(one), now: now,
			wantErr: ErrUnauthorized, wantMsg: "no configured HMAC key"},
		{name: "tampered value", body: tampered(one, `"value":1130`, `"value":1131`), now: now, wantErr: ErrUnauthorized},
		{name: "tampered success", body: tampered(one, `"success":"true"`, `"success":"false"`), now: now, wantErr: ErrUnauthorized},
		{name: "tampered currency", body: tampered(one, `"EUR"`, `"USD"`), now: now, wantErr: ErrUnauthorized},
		{name: "tampered reference", body: tampered(one, `TestPayment-`, `TestPaymenT-`), now: now, wantErr: ErrUnauthorized},
		{name: "originalReference added", body: tampered(one, `"pspReference"`, `"originalReference":"x","pspReference"`), now: now, wantErr: ErrUnauthorized},
		{name: "second item tampered", body: adyenBody(one, strings.Replace(two, `"value":0`, `"value":1`, 1)), now: now,
			wantErr: ErrUnauthorized, wantMsg: "item 2"},
		{name: "second item unsigned", body: adyenBody(one, `{"eventCode":"REPORT_AVAILABLE","pspReference":"r1","success":"true"}`), now: now,
			wantErr: ErrUnauthorized, wantMsg: "carries no additionalData.hmacSignature"},
		{name: "signature not base64", body: tampered(one, `"hmacSignature":"`, `"hmacSignature":"*`), now: now, wantErr: ErrUnauthorized, wantMsg: "not a base64"},
		{name: "signature unpadded", body: adyenBody(strings.Replace(adyenVectorItem, "TntIc=", "TntIc", 1)), now: now, wantErr: ErrUnauthorized},
		{name: "value with a fraction", body: tampered(one, `"value":1130`, `"value":11.30`), now: now, wantErr: ErrBadRequest, wantMsg: "minor units"},
		{name: "value as a string", body: tampered(one, `"value":1130`, `"value":"1130"`), now: now, wantErr: ErrBadRequest},
		{name: "eventCode not a string", body: tampered(one, `"eventCode":"AUTHORISATION"`, `"eventCode":1`), now: now, wantErr: ErrBadRequest},
		{name: "no notificationItems", body: `{"live":"false"}`, now: now, wantErr: ErrBadRequest, wantMsg: "notificationItems"},
		{name: "empty notificationItems", body: `{"live":"false","notificationItems":[]}`, now: now, wantErr: ErrBadRequest},
		{name: "item without NotificationRequestItem", body: `{"notificationItems":[{"x":{}}]}`, now: now, wantErr: ErrBadRequest},
		{name: "not JSON", body: "eventCode=AUTHORISATION", now: now, wantErr: ErrBadRequest, wantMsg: "not the JSON"},
		{name: "too many items", body: adyenBody(strings.Split(strings.Repeat(one+"\x00", adyenMaxItems+1), "\x00")[:adyenMaxItems+1]...), now: now,
			wantErr: ErrBadRequest, wantMsg: "more than 100"},
	})
}

func TestAdyenReplyAndConfiguration(t *testing.T) {
	p := mustProvider(t, ProviderConfig{Name: "adyen", Scheme: SchemeAdyen, Secrets: []string{adyenKey}})
	in := Input{Header: headers("Content-Type", "application/json"), Body: []byte(adyenBody(adyenVectorItem))}
	first, err := p.Check(in, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	again, err := p.Check(in, time.Now())
	if err != nil || string(again.Reply) != "[accepted]" || again.AnswerType != "text/plain; charset=utf-8" || again.ID != first.ID ||
		string(first.Reply) != "[accepted]" || first.Handshake != nil {
		t.Fatalf("first %+v, again %+v, %v", first, again, err)
	}
	if !p.IDSigned() || p.CanResign() || ResignSupport(SchemeAdyen) != ResignNotNeeded || p.Accepts("GET") {
		t.Errorf("IDSigned %v, CanResign %v, Accepts(GET) %v", p.IDSigned(), p.CanResign(), p.Accepts("GET"))
	}
	// The signatures are in the body: nothing to refuse before reading it.
	if err := p.Precheck(headers(), "", "POST", time.Now()); err != nil {
		t.Errorf("Precheck: %v", err)
	}
	for _, bad := range []string{adyenKey[:63], adyenKey + "00", strings.Replace(adyenKey, "D", "G", 1), "whsec_" + adyenKey[6:]} {
		_, err := NewProvider(ProviderConfig{Name: "adyen", Scheme: SchemeAdyen, Secrets: []string{adyenKey, bad}})
		fes := FieldErrors(err)
		if len(fes) != 1 || fes[0].Field != FieldSecrets || fes[0].Index != 1 || !strings.Contains(err.Error(), "64 hexadecimal") {
			t.Errorf("key %q: %v", bad, err)
		}
		if strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), adyenKey) {
			t.Errorf("the error quotes a key: %v", err)
		}
	}
}
