package verify

import (
	"strings"
	"testing"
	"time"
)

const (
	tgSecret      = "tg_Secret-Token-0123456789abcdefXYZ"
	tgOtherSecret = "previous_secret-token"
	// tgMessageBody is an Update with a message
	// (https://core.telegram.org/bots/api#update, #message).
	tgMessageBody = `{"update_id":10000,"message":{"message_id":1365,"from":{"id":1111111,"is_bot":false,"first_name":"Test"},` +
		`"chat":{"id":1111111,"type":"private","first_name":"Test"},"date":1441645532,"text":"/start"}}`
	tgCallbackBody = `{"update_id":10001,"callback_query":{"id":"4382bfdwdsb323b2d9","from":{"id":1111111,"is_bot":false,"first_name":"Test"},` +
		`"chat_instance":"-1","data":"Data from button callback"}}`
)

func TestTelegramCheck(t *testing.T) {
	now := time.Unix(1700000000, 0)
	h := func(token string) []string {
		return []string{"X-Telegram-Bot-Api-Secret-Token", token, "Content-Type", "application/json"}
	}
	base := ProviderConfig{Name: "tg", Scheme: SchemeTelegram, Secrets: []string{tgSecret}}
	runCasesB(t, base, []caseB{
		{name: "message", header: headers(h(tgSecret)...), body: tgMessageBody, now: now, wantID: "10000", wantType: "message"},
		{name: "callback query", header: headers(h(tgSecret)...), body: tgCallbackBody, now: now, wantID: "10001", wantType: "callback_query"},
		{name: "a later update kind", header: headers(h(tgSecret)...), body: `{"update_id":7,"purchased_paid_media":{"payload":"p"}}`, now: now,
			wantID: "7", wantType: "purchased_paid_media"},
		{name: "update_id above 2^53, as written", header: headers(h(tgSecret)...), body: `{"update_id":9007199254740993,"poll":{}}`, now: now,
			wantID: "9007199254740993", wantType: "poll"},
		{name: "no optional field: no type", header: headers(h(tgSecret)...), body: `{"update_id":5}`, now: now, wantID: "5"},
		{name: "two optional fields: no type", header: headers(h(tgSecret)...), body: `{"update_id":5,"message":{},"poll":{}}`, now: now, wantID: "5"},
		{name: "update_id not a number: digest", header: headers(h(tgSecret)...), body: `{"update_id":"5","message":{}}`, now: now,
			wantID: "digest", wantType: "message"},
		{name: "update_id with a fraction: digest", header: headers(h(tgSecret)...), body: `{"update_id":5.5,"message":{}}`, now: now,
			wantID: "digest", wantType: "message"},
		{name: "no timestamp: any clock", header: headers(h(tgSecret)...), body: tgMessageBody, now: time.Unix(0, 0), wantID: "10000", wantType: "message"},
		{name: "rotated: the previous token", cfg: func(c *ProviderConfig) { c.Secrets = []string{tgSecret, tgOtherSecret} },
			header: headers(h(tgOtherSecret)...), body: tgMessageBody, now: now, wantID: "10000", wantType: "message"},
		// Telegram signs nothing: the body is authenticated only by TLS.
		{name: "changed body still passes (nothing is signed)", header: headers(h(tgSecret)...), body: strings.Replace(tgMessageBody, "/start", "/stop", 1),
			now: now, wantID: "10000", wantType: "message"},
		{name: "wrong token", header: headers(h(tgOtherSecret)...), body: tgMessageBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "X-Telegram-Bot-Api-Secret-Token does not match"},
		{name: "token prefix", header: headers(h(tgSecret[:len(tgSecret)-1])...), body: tgMessageBody, now: now, wantErr: ErrUnauthorized},
		{name: "token case differs", header: headers(h(strings.ToUpper(tgSecret))...), body: tgMessageBody, now: now, wantErr: ErrUnauthorized},
		{name: "missing token", header: headers("Content-Type", "application/json"), body: tgMessageBody, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing X-Telegram-Bot-Api-Secret-Token header"},
		{name: "token too long", header: headers(h(strings.Repeat("a", maxSignatureHeaderLen+1))...), body: tgMessageBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "longer than"},
	})
}

func TestTelegramSecretShape(t *testing.T) {
	for _, ok := range []string{"a", strings.Repeat("Z", 256), "AZaz09_-"} {
		if _, err := NewProvider(ProviderConfig{Name: "tg", Scheme: SchemeTelegram, Secrets: []string{ok}}); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{strings.Repeat("Z", 257), "with space", "dot.ted", "ünï", "semi;colon", "new\nline"} {
		_, err := NewProvider(ProviderConfig{Name: "tg", Scheme: SchemeTelegram, Secrets: []string{tgSecret, bad}})
		fes := FieldErrors(err)
		if len(fes) != 1 || fes[0].Field != FieldSecrets || fes[0].Index != 1 || !strings.Contains(err.Error(), "1 to 256 characters") {
			t.Errorf("%q: %v", bad, err)
		}
		if err != nil && (strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), tgSecret)) {
			t.Errorf("the error quotes a secret: %v", err)
		}
	}
	p := mustProvider(t, ProviderConfig{Name: "tg", Scheme: SchemeTelegram, Secrets: []string{tgSecret}})
	if p.IDSigned() || p.CanResign() || DefaultTolerance(SchemeTelegram) != 0 {
		t.Errorf("IDSigned %v, CanResign %v", p.IDSigned(), p.CanResign())
	}
	if err := p.Precheck(headers(), "", "POST", time.Now()); Reason(err) != ReasonMissingHeader {
		t.Errorf("Precheck without the token: %v", err)
	}
}
