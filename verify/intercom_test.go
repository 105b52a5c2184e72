package verify

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

const (
	intercomSecret      = "intercom-client-secret-0123456789abcdef"
	intercomOtherSecret = "intercom-client-secret-previous-fedcba98"
	intercomBody        = `{"type":"notification_event","app_id":"abc123","data":{"type":"notification_event_data","item":{"type":"conversation","id":"147"}},"links":{},"id":"notif_ccd8a4d0-f965-11e3-a367-c779cae3e1b3","topic":"conversation.user.created","delivery_status":"pending","delivery_attempts":1,"delivered_at":0,"first_sent_at":1700000000,"created_at":1700000000,"self":null}`
)

// signIntercom returns an X-Hub-Signature value (Intercom docs: "sha1=" +
// hex HMAC-SHA1 of the body with the client secret).
func signIntercom(secret, body string) string {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(body))
	return "sha1=" + hex.EncodeToString(m.Sum(nil))
}

func TestIntercomCheck(t *testing.T) {
	now := time.Unix(1700000000, 0)
	good := signIntercom(intercomSecret, intercomBody)
	ih := func(sig string) http.Header { return headers("X-Hub-Signature", sig) }
	base := ProviderConfig{Name: "intercom", Scheme: SchemeIntercom, Secrets: []string{intercomSecret}}
	const wantID = "notif_ccd8a4d0-f965-11e3-a367-c779cae3e1b3"
	noID := `{"topic":"ping","delivery_attempts":1}`
	notJSON := "ping"
	runCheckCases(t, base, []checkCase{
		{name: "valid", header: ih(good), body: intercomBody, now: now, wantID: wantID},
		{name: "uppercase hex", header: ih("sha1=" + strings.ToUpper(good[5:])), body: intercomBody, now: now, wantID: wantID},
		{name: "no timestamp: any clock", header: ih(good), body: intercomBody, now: time.Unix(0, 0), wantID: wantID},
		{name: "wrong secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{intercomOtherSecret} },
			header: ih(good), body: intercomBody, now: now, wantErr: ErrUnauthorized, wantMsg: "no signature matches"},
		{name: "tampered body", header: ih(good), body: strings.Replace(intercomBody, `"147"`, `"148"`, 1), now: now, wantErr: ErrUnauthorized},
		{name: "rotated: second secret signs", cfg: func(c *ProviderConfig) { c.Secrets = []string{intercomOtherSecret, intercomSecret} },
			header: ih(good), body: intercomBody, now: now, wantID: wantID},
		{name: "missing header", header: headers("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64)), body: intercomBody, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing X-Hub-Signature header"},
		{name: "sha256 prefix", header: ih("sha256=" + good[5:]), body: intercomBody, now: now, wantErr: ErrUnauthorized, wantMsg: "prefix"},
		{name: "no prefix", header: ih(good[5:]), body: intercomBody, now: now, wantErr: ErrUnauthorized},
		{name: "sha256-length hex", header: ih("sha1=" + strings.Repeat("ab", 32)), body: intercomBody, now: now, wantErr: ErrUnauthorized, wantMsg: "40 hex"},
		{name: "bad hex", header: ih("sha1=" + strings.Repeat("zz", 20)), body: intercomBody, now: now, wantErr: ErrUnauthorized},
		{name: "short", header: ih(good[:len(good)-1]), body: intercomBody, now: now, wantErr: ErrUnauthorized},
		{name: "two signatures", header: ih(good + "," + good), body: intercomBody, now: now, wantErr: ErrUnauthorized},
		{name: "too long", header: ih(good + strings.Repeat("0", maxSignatureHeaderLen)), body: intercomBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "longer than"},
		{name: "no id: full body digest", header: ih(signIntercom(intercomSecret, noID)), body: noID, now: now,
			wantID: sha256Hex(`{"delivery_attempts":1,"topic":"ping"}`)},
		{name: "not JSON: raw digest", header: ih(signIntercom(intercomSecret, notJSON)), body: notJSON, now: now, wantID: sha256Hex(notJSON)},
	})

	p := mustProvider(t, base)
	ev, err := p.Check(Input{Header: ih(good), Body: []byte(intercomBody)}, now)
	if err != nil || ev.Type != "conversation.user.created" {
		t.Errorf("event = %+v, %v; want type conversation.user.created", ev, err)
	}
}

// TestIntercomResend: a redelivered notification (same id, new
// delivery_attempts and first_sent_at) is a duplicate; changed data is a
// conflict.
func TestIntercomResend(t *testing.T) {
	p := mustProvider(t, ProviderConfig{Name: "intercom", Scheme: SchemeIntercom, Secrets: []string{intercomSecret}})
	if !reflect.DeepEqual(p.volatile, []string{"delivery_attempts", "first_sent_at"}) {
		t.Fatalf("volatile = %q", p.volatile)
	}
	check := func(body string) Event {
		t.Helper()
		ev, err := p.Check(Input{Header: headers("X-Hub-Signature", signIntercom(intercomSecret, body)), Body: []byte(body)}, time.Time{})
		if err != nil {
			t.Fatalf("Check(%s): %v", body, err)
		}
		return ev
	}
	first := check(intercomBody)
	resend := check(strings.NewReplacer(`"delivery_attempts":1`, `"delivery_attempts":2`, `"first_sent_at":1700000000`, `"first_sent_at":1700000060`).Replace(intercomBody))
	changed := check(strings.Replace(intercomBody, `"147"`, `"148"`, 1))
	if first.ID != resend.ID || first.ID != changed.ID {
		t.Fatalf("ids differ: %q %q %q", first.ID, resend.ID, changed.ID)
	}
	if resend.ContentHash != first.ContentHash {
		t.Errorf("resend changed the content hash")
	}
	if changed.ContentHash == first.ContentHash {
		t.Errorf("changed data kept the content hash")
	}
}
