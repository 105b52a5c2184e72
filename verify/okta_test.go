package verify

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

const (
	oktaSecret      = "okta-hook-shared-secret-2026"
	oktaOtherSecret = "okta-hook-shared-secret-2025"
	// oktaBody is Okta's sample event delivery
	// (https://developer.okta.com/docs/concepts/event-hooks/, "Sample Event
	// Delivery Payload"), shortened.
	oktaBody = `{"eventType":"com.okta.event_hook","eventTypeVersion":"1.0","cloudEventsVersion":"0.1","contentType":"application/json",` +
		`"eventId":"b5a188b9-5ece-4636-b041-482ffda96311","eventTime":"2019-03-27T16:59:53.032Z",` +
		`"source":"https://example.okta.com/api/v1/eventHooks/whoql0HfiLGPWc8Jx0g3","data":{"events":[` +
		`{"uuid":"f790999f-fe87-467a-9880-6982a583986c","published":"2018-03-28T22:23:07.777Z","eventType":"user.session.start",` +
		`"displayMessage":"User login to Okta","outcome":{"result":"SUCCESS"}},` +
		`{"uuid":"a790999f-fe87-467a-9880-6982a583986d","eventType":"user.lifecycle.create"}]}}`
)

func TestOktaCheck(t *testing.T) {
	now := time.Unix(1700000000, 0)
	h := func(auth string) []string { return []string{"Authorization", auth, "Content-Type", "application/json"} }
	const id, typ = "b5a188b9-5ece-4636-b041-482ffda96311", "user.session.start"
	base := ProviderConfig{Name: "okta", Scheme: SchemeOkta, Secrets: []string{oktaSecret}}
	runCasesB(t, base, []caseB{
		{name: "valid: eventId, first event's type", header: headers(h(oktaSecret)...), body: oktaBody, now: now, wantID: id, wantType: typ},
		{name: "no events: no type", header: headers(h(oktaSecret)...), body: `{"eventId":"e-1","data":{"events":[]}}`, now: now, wantID: "e-1"},
		{name: "no eventId: digest", header: headers(h(oktaSecret)...), body: `{"data":{"events":[{"eventType":"x"}]}}`, now: now,
			wantID: "digest", wantType: "x"},
		{name: "no timestamp: any clock", header: headers(h(oktaSecret)...), body: oktaBody, now: time.Unix(0, 0), wantID: id, wantType: typ},
		{name: "rotated: the previous value", cfg: func(c *ProviderConfig) { c.Secrets = []string{oktaSecret, oktaOtherSecret} },
			header: headers(h(oktaOtherSecret)...), body: oktaBody, now: now, wantID: id, wantType: typ},
		{name: "a verification header on a POST is an event", header: headers(append(h(oktaSecret), "X-Okta-Verification-Challenge", "v")...),
			body: oktaBody, now: now, wantID: id, wantType: typ},
		// Okta signs nothing: the body is authenticated only by TLS.
		{name: "changed body still passes (nothing is signed)", header: headers(h(oktaSecret)...), body: strings.Replace(oktaBody, "login", "logout", 1),
			now: now, wantID: id, wantType: typ},
		{name: "wrong value", header: headers(h(oktaOtherSecret)...), body: oktaBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "Authorization does not match"},
		{name: "value with a Bearer prefix", header: headers(h("Bearer " + oktaSecret)...), body: oktaBody, now: now, wantErr: ErrUnauthorized},
		{name: "missing Authorization", header: headers("Content-Type", "application/json"), body: oktaBody, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing Authorization header"},
		{name: "too long", header: headers(h(strings.Repeat("a", maxSignatureHeaderLen+1))...), body: oktaBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "longer than"},
	})
}

// TestOktaVerification: Okta's one-time GET is answered
// {"verification": V} as JSON, only with the hook's Authorization value.
func TestOktaVerification(t *testing.T) {
	p := mustProvider(t, ProviderConfig{Name: "okta", Scheme: SchemeOkta, Secrets: []string{oktaOtherSecret, oktaSecret}})
	now := time.Unix(1700000000, 0)
	get := func(h ...string) (Event, error) {
		return p.Check(Input{Header: headers(h...), Method: http.MethodGet}, now)
	}
	const v = "Hdm6CaKd8pcWJUiNdHvQxUPsKXy2wJ1kqWI4ooYK"
	ev, err := get("X-Okta-Verification-Challenge", v, "Authorization", oktaSecret)
	if err != nil || string(ev.Handshake) != `{"verification":"`+v+`"}` || ev.AnswerType != "" || ev.ID != "" || ev.Reply != nil {
		t.Fatalf("verification: %+v, %v", ev, err)
	}
	// A value with a quote is answered as JSON, escaped.
	if ev, err := get("X-Okta-Verification-Challenge", `a"b`, "Authorization", oktaSecret); err != nil || string(ev.Handshake) != `{"verification":"a\"b"}` {
		t.Errorf("quoted value: %s, %v", ev.Handshake, err)
	}
	for _, c := range []struct {
		name    string
		h       []string
		want    error
		wantMsg string
	}{
		{"no Authorization", []string{"X-Okta-Verification-Challenge", v}, ErrBadRequest, "missing Authorization"},
		{"wrong Authorization", []string{"X-Okta-Verification-Challenge", v, "Authorization", "guess"}, ErrUnauthorized, "does not match"},
		{"no challenge: not a handshake", []string{"Authorization", oktaSecret}, ErrBadRequest, "GET carries no handshake"},
		{"challenge too long", []string{"X-Okta-Verification-Challenge", strings.Repeat("v", 513), "Authorization", oktaSecret}, ErrBadRequest, "longer than 512"},
		{"control character", []string{"X-Okta-Verification-Challenge", "a\x01b", "Authorization", oktaSecret}, ErrBadRequest, "not shaped"},
	} {
		ev, err := get(c.h...)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.wantMsg) || ev.Handshake != nil {
			t.Errorf("%s: %+v, %v", c.name, ev, err)
		}
		if err != nil && strings.Contains(err.Error(), oktaSecret) {
			t.Errorf("%s: the error quotes the secret", c.name)
		}
	}
	if !p.Accepts(http.MethodGet) || p.Accepts(http.MethodPut) {
		t.Error("okta must accept GET (its verification) and not PUT")
	}
	if err := p.Precheck(headers("X-Okta-Verification-Challenge", v), "", http.MethodGet, now); err != nil {
		t.Errorf("Precheck of the verification: %v", err)
	}
	if p.IDSigned() || p.CanResign() {
		t.Errorf("IDSigned %v, CanResign %v", p.IDSigned(), p.CanResign())
	}
}

func TestOktaSecretShape(t *testing.T) {
	for _, bad := range []string{" leading", "trailing\t", "new\nline", "del\x7f"} {
		_, err := NewProvider(ProviderConfig{Name: "okta", Scheme: SchemeOkta, Secrets: []string{oktaSecret, bad}})
		fes := FieldErrors(err)
		if len(fes) != 1 || fes[0].Field != FieldSecrets || fes[0].Index != 1 || !strings.Contains(err.Error(), "header value") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	mustProvider(t, ProviderConfig{Name: "okta", Scheme: SchemeOkta, Secrets: []string{"Basic dXNlcjpwYXNz", "inner space\tand tab"}})
}
