package verify

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

const (
	pmBasicAuth = "pm-hooks:s3cret-Pa55:with-colon"
	// pmBounceBody is Postmark's bounce webhook example
	// (https://postmarkapp.com/developer/webhooks/bounce-webhook), shortened;
	// its ID is above 2^53, so it must be taken as written.
	pmBounceBody = `{"RecordType":"Bounce","MessageStream":"outbound","ID":4323372036854775807,"Type":"HardBounce","TypeCode":1,` +
		`"Name":"Hard bounce","Tag":"Test","MessageID":"883953f4-6105-42a2-a16a-77a8eac79483","ServerID":23,` +
		`"Email":"john@example.com","From":"sender@example.com","BouncedAt":"2019-11-05T16:33:54.9070259Z","Inactive":true}`
	// pmSpamBody is the spam complaint example
	// (https://postmarkapp.com/developer/webhooks/spam-complaint-webhook), shortened.
	pmSpamBody = `{"RecordType":"SpamComplaint","MessageStream":"outbound","ID":42,"Type":"SpamComplaint","TypeCode":512,` +
		`"MessageID":"00000000-0000-0000-0000-000000000000","Email":"john@example.com","BouncedAt":"2019-11-05T16:33:54.9070259Z"}`
	// pmDeliveryBody: https://postmarkapp.com/developer/webhooks/delivery-webhook
	pmDeliveryBody = `{"RecordType":"Delivery","ServerID":23,"MessageStream":"outbound","MessageID":"00000000-0000-0000-0000-000000000000",` +
		`"Recipient":"john@example.com","Tag":"welcome-email","DeliveredAt":"2019-11-05T16:33:54.9070259Z","Details":"Test delivery webhook details"}`
	// pmOpenBody: https://postmarkapp.com/developer/webhooks/open-tracking-webhook
	pmOpenBody = `{"RecordType":"Open","MessageStream":"outbound","FirstOpen":false,"MessageID":"00000000-0000-0000-0000-000000000000",` +
		`"Recipient":"john@example.com","ReceivedAt":"2019-11-05T16:33:54.9070259Z","Platform":"WebMail","ReadSeconds":5}`
)

// pmAuth is the Authorization header a sender posting to
// https://user:password@host/… sends.
func pmAuth(cred string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(cred))
}

func TestPostmarkCheck(t *testing.T) {
	now := time.Unix(1700000000, 0)
	good := headers("Authorization", pmAuth(pmBasicAuth), "Content-Type", "application/json")
	base := ProviderConfig{Name: "pm", Scheme: SchemePostmark, BasicAuth: pmBasicAuth}
	runCasesB(t, base, []caseB{
		{name: "bounce: RecordType and bounce ID", header: good, body: pmBounceBody, now: now,
			wantID: "Bounce:4323372036854775807", wantType: "Bounce"},
		{name: "spam complaint: its ID", header: good, body: pmSpamBody, now: now, wantID: "SpamComplaint:42", wantType: "SpamComplaint"},
		{name: "delivery: message and recipient", header: good, body: pmDeliveryBody, now: now,
			wantID: "Delivery:00000000-0000-0000-0000-000000000000:john@example.com", wantType: "Delivery"},
		{name: "open: repeats per message, digest", header: good, body: pmOpenBody, now: now, wantID: "digest", wantType: "Open"},
		{name: "bounce without ID: digest", header: good, body: `{"RecordType":"Bounce","Email":"a@b.c"}`, now: now, wantID: "digest", wantType: "Bounce"},
		{name: "not JSON: raw digest", header: good, body: "RecordType=Bounce", now: now, wantID: "digest"},
		{name: "no timestamp: any clock", header: good, body: pmSpamBody, now: time.Unix(0, 0), wantID: "SpamComplaint:42", wantType: "SpamComplaint"},
		// Postmark signs nothing: the body is authenticated only by TLS.
		{name: "changed body still passes (nothing is signed)", header: good, body: strings.Replace(pmSpamBody, "john", "eve", 1), now: now,
			wantID: "SpamComplaint:42", wantType: "SpamComplaint"},
		{name: "wrong password", header: headers("Authorization", pmAuth("pm-hooks:wrong")), body: pmSpamBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "Authorization does not match"},
		{name: "wrong user", header: headers("Authorization", pmAuth("other:s3cret-Pa55:with-colon")), body: pmSpamBody, now: now, wantErr: ErrUnauthorized},
		{name: "credential prefix", header: headers("Authorization", pmAuth(pmBasicAuth[:len(pmBasicAuth)-1])), body: pmSpamBody, now: now, wantErr: ErrUnauthorized},
		{name: "lower-case scheme is compared whole", header: headers("Authorization", "basic "+pmAuth(pmBasicAuth)[6:]), body: pmSpamBody, now: now,
			wantErr: ErrUnauthorized},
		{name: "unencoded credential", header: headers("Authorization", "Basic "+pmBasicAuth), body: pmSpamBody, now: now, wantErr: ErrUnauthorized},
		{name: "bearer", header: headers("Authorization", "Bearer "+pmBasicAuth), body: pmSpamBody, now: now, wantErr: ErrUnauthorized},
		{name: "missing Authorization", header: headers("Content-Type", "application/json"), body: pmSpamBody, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing Authorization header"},
		{name: "too long", header: headers("Authorization", "Basic "+strings.Repeat("A", maxSignatureHeaderLen)), body: pmSpamBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "longer than"},
		{name: "secrets are not used", cfg: func(c *ProviderConfig) { c.Secrets = []string{pmBasicAuth} },
			header: headers("Authorization", pmAuth(pmBasicAuth)), body: pmSpamBody, now: now, wantID: "SpamComplaint:42", wantType: "SpamComplaint"},
		{name: "id header overrides", cfg: func(c *ProviderConfig) { c.IDHeader = "X-Delivery" },
			header: headers("Authorization", pmAuth(pmBasicAuth), "X-Delivery", "d-1"), body: pmSpamBody, now: now, wantID: "d-1", wantType: "SpamComplaint"},
	})
}

func TestPostmarkConfiguration(t *testing.T) {
	// No SECRET: BASIC_AUTH alone configures it.
	p := mustProvider(t, ProviderConfig{Name: "pm", Scheme: SchemePostmark, BasicAuth: ":only-a-password"})
	if _, err := p.Check(Input{Header: headers("Authorization", pmAuth(":only-a-password")), Body: []byte(pmOpenBody)}, time.Now()); err != nil {
		t.Fatalf("empty user: %v", err)
	}
	if p.IDSigned() || p.CanResign() || ResignSupport(SchemePostmark) != ResignNotNeeded || DefaultTolerance(SchemePostmark) != 0 {
		t.Errorf("IDSigned %v, CanResign %v, resign %q", p.IDSigned(), p.CanResign(), ResignSupport(SchemePostmark))
	}
	for _, c := range []struct{ cred, want string }{
		{"", "basic auth"},
		{"   ", "basic auth"},
		{"no-colon-here", "user:password"},
		{"user:pass\nword", "control character"},
	} {
		_, err := NewProvider(ProviderConfig{Name: "pm", Scheme: SchemePostmark, BasicAuth: c.cred})
		fes := FieldErrors(err)
		if len(fes) != 1 || fes[0].Field != FieldBasicAuth || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v", c.cred, err)
		}
		if strings.TrimSpace(c.cred) != "" && strings.Contains(err.Error(), c.cred) {
			t.Errorf("%q: the error quotes the credential", c.cred)
		}
	}
	// A missing header is refused before the body is read.
	if err := p.Precheck(headers("Content-Type", "application/json"), "", "POST", time.Now()); Reason(err) != ReasonMissingHeader {
		t.Errorf("Precheck without Authorization: %v", err)
	}
}
