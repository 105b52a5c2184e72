package verify

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

const (
	mgSecret      = "secretClientValue"
	mgOtherSecret = "previousClientValue"
	// mgItem is the change notification of Microsoft's example
	// (https://learn.microsoft.com/graph/change-notifications-delivery-webhooks,
	// "Change notification example"); %s is its clientState.
	mgItem = `{"id":"lsgTZMr9KwAAA","subscriptionId":"{subscription_guid}","subscriptionExpirationDateTime":"2016-03-19T22:11:09.952Z",` +
		`"clientState":"%s","changeType":"created","resource":"users/{user_guid}@{tenant_guid}/messages/{long_id_string}",` +
		`"tenantId":"84bd8158-6d4d-4958-8b9f-9d6445542f95","resourceData":{"@odata.type":"#Microsoft.Graph.Message","id":"{long_id_string}"}}`
	// mgLifecycle is a lifecycle notification
	// (https://learn.microsoft.com/graph/change-notifications-lifecycle-events).
	mgLifecycle = `{"subscriptionId":"{subscription_guid}","subscriptionExpirationDateTime":"2019-03-20T11:00:00.0000000Z",` +
		`"tenantId":"{tenant_guid}","clientState":"%s","lifecycleEvent":"reauthorizationRequired"}`
	// mgToken is the shape of a real validation token.
	mgToken = "Validation: Testing client application reachability for subscription Request-Id: 9f1bcdf3-977e-489f-a553-d04d0623069d"
)

// mgBody is a changeNotificationCollection of items.
func mgBody(items ...string) string { return `{"value":[` + strings.Join(items, ",") + `]}` }

func TestMSGraphCheck(t *testing.T) {
	now := time.Unix(1700000000, 0)
	item := func(cs string) string { return fmt.Sprintf(mgItem, cs) }
	ct := headers("Content-Type", "application/json")
	base := ProviderConfig{Name: "graph", Scheme: SchemeMSGraph, Secrets: []string{mgSecret}}
	many := make([]string, msGraphMaxItems+1)
	for i := range many {
		many[i] = `{"clientState":"` + mgSecret + `","changeType":"updated"}`
	}
	runCasesB(t, base, []caseB{
		{name: "valid: digest id, changeType", header: ct, body: mgBody(item(mgSecret)), now: now, wantID: "digest", wantType: "created"},
		{name: "lifecycle notification", header: ct, body: mgBody(fmt.Sprintf(mgLifecycle, mgSecret)), now: now,
			wantID: "digest", wantType: "reauthorizationRequired"},
		{name: "batch: every item matches", header: ct, body: mgBody(item(mgSecret), fmt.Sprintf(mgLifecycle, mgSecret)), now: now,
			wantID: "digest", wantType: "created"},
		{name: "rotated: subscriptions of both values in one batch", cfg: func(c *ProviderConfig) { c.Secrets = []string{mgSecret, mgOtherSecret} },
			header: ct, body: mgBody(item(mgOtherSecret), item(mgSecret)), now: now, wantID: "digest", wantType: "created"},
		{name: "no timestamp: any clock", header: ct, body: mgBody(item(mgSecret)), now: time.Unix(0, 0), wantID: "digest", wantType: "created"},
		{name: "a query that is not validationToken", header: ct, query: "tenant=contoso", body: mgBody(item(mgSecret)), now: now,
			wantID: "digest", wantType: "created"},
		{name: "wrong clientState", header: ct, body: mgBody(item(mgOtherSecret)), now: now,
			wantErr: ErrUnauthorized, wantMsg: "clientState does not match"},
		{name: "one item of a batch wrong", header: ct, body: mgBody(item(mgSecret), item(mgOtherSecret)), now: now, wantErr: ErrUnauthorized},
		{name: "first item wrong", header: ct, body: mgBody(item("x"), item(mgSecret)), now: now, wantErr: ErrUnauthorized},
		{name: "item without clientState", header: ct, body: mgBody(item(mgSecret), `{"changeType":"updated"}`), now: now, wantErr: ErrUnauthorized},
		{name: "clientState not a string", header: ct, body: mgBody(`{"clientState":1,"changeType":"updated"}`), now: now, wantErr: ErrUnauthorized},
		{name: "clientState prefix", header: ct, body: mgBody(item(mgSecret[:5])), now: now, wantErr: ErrUnauthorized},
		{name: "item not an object", header: ct, body: mgBody(`"` + mgSecret + `"`), now: now, wantErr: ErrUnauthorized},
		{name: "empty value", header: ct, body: `{"value":[]}`, now: now, wantErr: ErrBadRequest, wantMsg: `no "value" array`},
		{name: "value not an array", header: ct, body: `{"value":{"clientState":"` + mgSecret + `"}}`, now: now, wantErr: ErrBadRequest},
		{name: "empty body", header: ct, body: "", now: now, wantErr: ErrBadRequest, wantMsg: "not the JSON"},
		{name: "empty validationToken: an ordinary POST", header: ct, query: "validationToken=", body: "", now: now, wantErr: ErrBadRequest},
		{name: "too many items", header: ct, body: mgBody(many...), now: now, wantErr: ErrBadRequest, wantMsg: "more than 1000"},
	})
}

// TestMSGraphValidation: Microsoft's POST ?validationToken=T is answered
// 200 text/plain with T URL-decoded, without a clientState; a POST without
// the parameter is a notification and needs one.
func TestMSGraphValidation(t *testing.T) {
	p := mustProvider(t, ProviderConfig{Name: "graph", Scheme: SchemeMSGraph, Secrets: []string{mgSecret}})
	now := time.Unix(1700000000, 0)
	check := func(method, query, body string) (Event, error) {
		return p.Check(Input{Header: headers("Content-Type", "text/plain; charset=utf-8"), Method: method, RawQuery: query, Body: []byte(body)}, now)
	}
	for _, q := range []string{"validationToken=" + url.QueryEscape(mgToken), "validationToken=" + strings.ReplaceAll(url.QueryEscape(mgToken), "+", "%20"),
		"tenant=x&validationToken=" + url.QueryEscape(mgToken)} {
		for _, method := range []string{"", http.MethodPost} {
			ev, err := check(method, q, "")
			if err != nil || string(ev.Handshake) != mgToken || ev.AnswerType != "text/plain; charset=utf-8" || ev.ID != "" || ev.Reply != nil {
				t.Fatalf("%q %q: %+v, %v", method, q, ev, err)
			}
		}
	}
	for _, c := range []struct {
		name, query string
		wantMsg     string
	}{
		{"markup", "validationToken=" + url.QueryEscape("<script>alert(1)</script>"), "not shaped"},
		{"ampersand", "validationToken=" + url.QueryEscape("a&b"), "not shaped"},
		{"quote", "validationToken=" + url.QueryEscape(`a"b`), "not shaped"},
		{"control character", "validationToken=a%0Ab", "not shaped"},
		{"too long", "validationToken=" + strings.Repeat("t", msGraphMaxToken+1), "longer than 1024"},
	} {
		ev, err := check("", c.query, "")
		if !errors.Is(err, ErrBadRequest) || Reason(err) != ReasonChallengeRefused || !strings.Contains(err.Error(), c.wantMsg) || ev.Handshake != nil {
			t.Errorf("%s: %+v, %v", c.name, ev, err)
		}
	}
	// An ordinary notification, with or without other query parameters,
	// is not taken as a validation: it is verified and becomes an event.
	body := mgBody(fmt.Sprintf(mgItem, mgSecret))
	for _, q := range []string{"", "tenant=x", "validationtoken=lower-case-is-another-name"} {
		ev, err := check("", q, body)
		if err != nil || ev.Handshake != nil || ev.Type != "created" || !strings.HasPrefix(ev.ID, "sha256:") {
			t.Errorf("notification with query %q: %+v, %v", q, ev, err)
		}
		if _, err := check("", q, mgBody(fmt.Sprintf(mgItem, "forged"))); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("forged notification with query %q: %v", q, err)
		}
	}
	if p.Accepts(http.MethodGet) || !p.Accepts(http.MethodPost) {
		t.Error("msgraph takes POST only")
	}
	if ev, err := check(http.MethodGet, "validationToken=x", ""); err == nil || ev.Handshake != nil {
		t.Errorf("GET validation answered: %+v", ev)
	}
	// Nothing about a notification can be refused before its body is read.
	for _, q := range []string{"validationToken=x", ""} {
		if err := p.Precheck(headers(), q, http.MethodPost, now); err != nil {
			t.Errorf("Precheck %q: %v", q, err)
		}
	}
	if !p.IDSigned() || p.CanResign() {
		t.Errorf("IDSigned %v (the id is the digest), CanResign %v", p.IDSigned(), p.CanResign())
	}
}

func TestMSGraphClientStateShape(t *testing.T) {
	mustProvider(t, ProviderConfig{Name: "graph", Scheme: SchemeMSGraph, Secrets: []string{strings.Repeat("é", 128), "with space"}})
	for _, bad := range []string{strings.Repeat("x", 129), "new\nline", "\xff"} {
		_, err := NewProvider(ProviderConfig{Name: "graph", Scheme: SchemeMSGraph, Secrets: []string{mgSecret, bad}})
		fes := FieldErrors(err)
		if len(fes) != 1 || fes[0].Field != FieldSecrets || fes[0].Index != 1 || !strings.Contains(err.Error(), "128 characters") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
