package verify

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
)

// discordTestKey is a fixed ed25519 key pair for the tests; discordOtherKey
// a second one, for forged signatures.
var (
	discordTestKey  = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	discordOtherKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize))
)

func discordPublicHex(k ed25519.PrivateKey) string {
	return hex.EncodeToString(k.Public().(ed25519.PublicKey))
}

// signDiscord signs "{ts}{body}" as Discord does.
func signDiscord(k ed25519.PrivateKey, ts, body string) string {
	return hex.EncodeToString(ed25519.Sign(k, []byte(ts+body)))
}

const (
	discordTS        = int64(1700000000)
	discordPingBody  = `{"application_id":"1100000000000000000","id":"1180000000000000001","token":"aW50ZXJhY3Rpb24","type":1,"user":{"id":"53908232506183680","username":"mason"},"version":1}`
	discordCmdBody   = `{"application_id":"1100000000000000000","channel_id":"1170000000000000000","data":{"id":"1150000000000000000","name":"deploy","type":1},"id":"1180000000000000002","token":"aW50ZXJhY3Rpb24","type":2,"version":1}`
	discordCompBody  = `{"application_id":"1100000000000000000","data":{"custom_id":"approve","component_type":2},"id":"1180000000000000003","message":{"id":"1160000000000000000"},"token":"aW50ZXJhY3Rpb24","type":3,"version":1}`
	discordAutoBody  = `{"application_id":"1100000000000000000","data":{"id":"1150000000000000000","name":"deploy","options":[{"focused":true,"name":"env","type":3,"value":"pr"}]},"id":"1180000000000000004","token":"aW50ZXJhY3Rpb24","type":4,"version":1}`
	discordModalBody = `{"application_id":"1100000000000000000","data":{"custom_id":"feedback","components":[]},"id":"1180000000000000005","token":"aW50ZXJhY3Rpb24","type":5,"version":1}`
)

func TestDiscordCheck(t *testing.T) {
	tsStr := strconv.FormatInt(discordTS, 10)
	now := time.Unix(discordTS, 0)
	h := func(sig, ts string) http.Header {
		return headers("X-Signature-Ed25519", sig, "X-Signature-Timestamp", ts)
	}
	signed := func(body string) http.Header { return h(signDiscord(discordTestKey, tsStr, body), tsStr) }
	forged := func(body string) http.Header { return h(signDiscord(discordOtherKey, tsStr, body), tsStr) }
	cmdSig := signDiscord(discordTestKey, tsStr, discordCmdBody)

	base := ProviderConfig{Name: "discord", Scheme: SchemeDiscord, PublicKey: discordPublicHex(discordTestKey)}
	runCasesB(t, base, []caseB{
		{name: "PING answered with PONG", header: signed(discordPingBody), body: discordPingBody, now: now, wantHandshake: `{"type":1}`},
		{name: "forged PING", header: forged(discordPingBody), body: discordPingBody, now: now, wantErr: ErrUnauthorized, wantMsg: "does not verify"},
		{name: "unsigned PING", header: headers("X-Signature-Timestamp", tsStr), body: discordPingBody, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing X-Signature-Ed25519 header"},
		{name: "stale PING", header: signed(discordPingBody), body: discordPingBody, now: now.Add(6 * time.Minute), wantErr: ErrUnauthorized},
		{name: "command: deferred channel message", header: signed(discordCmdBody), body: discordCmdBody, now: now,
			wantID: "1180000000000000002", wantType: "interaction.2", wantReply: `{"type":5}`},
		{name: "modal submit: deferred channel message", header: signed(discordModalBody), body: discordModalBody, now: now,
			wantID: "1180000000000000005", wantType: "interaction.5", wantReply: `{"type":5}`},
		{name: "component: deferred update", header: signed(discordCompBody), body: discordCompBody, now: now,
			wantID: "1180000000000000003", wantType: "interaction.3", wantReply: `{"type":6}`},
		{name: "autocomplete refused", header: signed(discordAutoBody), body: discordAutoBody, now: now,
			wantErr: ErrBadRequest, wantMsg: "autocomplete interactions need a synchronous answer"},
		{name: "forged autocomplete is unauthorized first", header: forged(discordAutoBody), body: discordAutoBody, now: now, wantErr: ErrUnauthorized},
		{name: "unknown type", header: signed(`{"id":"1","type":42}`), body: `{"id":"1","type":42}`, now: now,
			wantErr: ErrBadRequest, wantMsg: "unknown interaction type"},
		{name: "type as a string", header: signed(`{"id":"1","type":"1"}`), body: `{"id":"1","type":"1"}`, now: now,
			wantErr: ErrBadRequest, wantMsg: "numeric"},
		{name: "no type", header: signed(`{"id":"1"}`), body: `{"id":"1"}`, now: now, wantErr: ErrBadRequest},
		{name: "type 1.0 is a PING", header: signed(`{"id":"1","type":1.0}`), body: `{"id":"1","type":1.0}`, now: now, wantHandshake: `{"type":1}`},
		{name: "body not JSON", header: signed("type=1"), body: "type=1", now: now, wantErr: ErrBadRequest, wantMsg: "unparseable"},
		{name: "body an array", header: signed(`[{"type":1}]`), body: `[{"type":1}]`, now: now, wantErr: ErrBadRequest},
		{name: "command without id: content digest", header: signed(`{"type":2}`), body: `{"type":2}`, now: now,
			wantID: "digest", wantType: "interaction.2", wantReply: `{"type":5}`},
		{name: "secrets ignored", cfg: func(c *ProviderConfig) { c.Secrets = []string{"unused"} },
			header: signed(discordCmdBody), body: discordCmdBody, now: now, wantID: "1180000000000000002", wantType: "interaction.2", wantReply: `{"type":5}`},
		{name: "uppercase hex signature", header: h(strings.ToUpper(cmdSig), tsStr), body: discordCmdBody, now: now,
			wantID: "1180000000000000002", wantType: "interaction.2", wantReply: `{"type":5}`},
		{name: "uppercase hex key", cfg: func(c *ProviderConfig) { c.PublicKey = strings.ToUpper(c.PublicKey) },
			header: signed(discordCmdBody), body: discordCmdBody, now: now, wantID: "1180000000000000002", wantType: "interaction.2", wantReply: `{"type":5}`},
		{name: "wrong public key", cfg: func(c *ProviderConfig) { c.PublicKey = discordPublicHex(discordOtherKey) },
			header: signed(discordCmdBody), body: discordCmdBody, now: now, wantErr: ErrUnauthorized},
		{name: "tampered body", header: signed(discordCmdBody), body: strings.Replace(discordCmdBody, "deploy", "destroy", 1), now: now, wantErr: ErrUnauthorized},
		{name: "tampered timestamp", header: h(cmdSig, strconv.FormatInt(discordTS+1, 10)), body: discordCmdBody, now: now, wantErr: ErrUnauthorized},
		{name: "within tolerance", header: signed(discordCmdBody), body: discordCmdBody, now: now.Add(-4 * time.Minute),
			wantID: "1180000000000000002", wantType: "interaction.2", wantReply: `{"type":5}`},
		{name: "stale", header: signed(discordCmdBody), body: discordCmdBody, now: now.Add(5*time.Minute + time.Second), wantErr: ErrUnauthorized, wantMsg: "older"},
		{name: "future", header: signed(discordCmdBody), body: discordCmdBody, now: now.Add(-5*time.Minute - time.Second), wantErr: ErrUnauthorized, wantMsg: "future"},
		{name: "missing timestamp", header: headers("X-Signature-Ed25519", cmdSig), body: discordCmdBody, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing X-Signature-Timestamp header"},
		{name: "malformed timestamp", header: h(signDiscord(discordTestKey, "now", discordCmdBody), "now"), body: discordCmdBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "malformed X-Signature-Timestamp"},
		{name: "short signature", header: h(cmdSig[:126], tsStr), body: discordCmdBody, now: now, wantErr: ErrUnauthorized, wantMsg: "128 hex digits"},
		{name: "non-hex signature", header: h("zz"+cmdSig[2:], tsStr), body: discordCmdBody, now: now, wantErr: ErrUnauthorized},
		{name: "base64 signature", header: h("AAAA"+cmdSig[4:], tsStr), body: discordCmdBody, now: now, wantErr: ErrUnauthorized},
		{name: "signature too long", header: h(cmdSig+strings.Repeat("0", maxSignatureHeaderLen), tsStr), body: discordCmdBody, now: now,
			wantErr: ErrUnauthorized, wantMsg: "longer than"},
	})
}

// TestDiscordDuplicateReply: a resent command gets the same id and reply.
func TestDiscordDuplicateReply(t *testing.T) {
	p := mustProvider(t, ProviderConfig{Name: "discord", Scheme: SchemeDiscord, PublicKey: discordPublicHex(discordTestKey)})
	var evs []Event
	for _, ts := range []int64{discordTS, discordTS + 2} {
		tsStr := strconv.FormatInt(ts, 10)
		ev, err := p.Check(Input{
			Header: headers("X-Signature-Ed25519", signDiscord(discordTestKey, tsStr, discordCmdBody), "X-Signature-Timestamp", tsStr),
			Body:   []byte(discordCmdBody),
		}, time.Unix(ts, 0))
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if evs[0].ID != evs[1].ID || evs[0].ContentHash != evs[1].ContentHash || string(evs[0].Reply) != string(evs[1].Reply) {
		t.Errorf("resend differs: %+v vs %+v", evs[0], evs[1])
	}
	// The reply is a fresh slice each time: a caller changing it changes
	// nothing else.
	evs[0].Reply[0] = 'X'
	if string(evs[1].Reply) != `{"type":5}` {
		t.Errorf("replies share memory")
	}
}

// TestDiscordSDK: discordgo.VerifyInteraction and our scheme agree on the
// signature verdict of requests signed here.
func TestDiscordSDK(t *testing.T) {
	pub := discordTestKey.Public().(ed25519.PublicKey)
	tsStr := strconv.FormatInt(discordTS, 10)
	good := signDiscord(discordTestKey, tsStr, discordCmdBody)
	for _, tc := range []struct {
		name, sig, ts, body string
		want                bool
	}{
		{"command", good, tsStr, discordCmdBody, true},
		{"PING", signDiscord(discordTestKey, tsStr, discordPingBody), tsStr, discordPingBody, true},
		{"component", signDiscord(discordTestKey, tsStr, discordCompBody), tsStr, discordCompBody, true},
		{"uppercase hex", strings.ToUpper(good), tsStr, discordCmdBody, true},
		{"other key", signDiscord(discordOtherKey, tsStr, discordCmdBody), tsStr, discordCmdBody, false},
		{"tampered body", good, tsStr, discordCmdBody + " ", false},
		{"other timestamp", good, strconv.FormatInt(discordTS-1, 10), discordCmdBody, false},
		{"truncated signature", good[:len(good)-2], tsStr, discordCmdBody, false},
		{"odd hex", good[:len(good)-1], tsStr, discordCmdBody, false},
		{"non-hex", "g" + good[1:], tsStr, discordCmdBody, false},
		{"longer signature", good + "00", tsStr, discordCmdBody, false},
		{"no signature", "", tsStr, discordCmdBody, false},
		{"no timestamp", good, "", discordCmdBody, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := http.NewRequest(http.MethodPost, "https://whguard.example/webhooks/discord", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.sig != "" {
				r.Header.Set("X-Signature-Ed25519", tc.sig)
			}
			if tc.ts != "" {
				r.Header.Set("X-Signature-Timestamp", tc.ts)
			}
			sdk := discordgo.VerifyInteraction(r, pub)
			if sdk != tc.want {
				t.Fatalf("discordgo says %v, the test expects %v", sdk, tc.want)
			}
			p := mustProvider(t, ProviderConfig{Name: "discord", Scheme: SchemeDiscord, PublicKey: hex.EncodeToString(pub)})
			_, err = p.Check(Input{Header: r.Header, Body: []byte(tc.body)}, time.Unix(discordTS, 0))
			if (err == nil) != sdk {
				t.Errorf("discordgo says %v, Check says %v", sdk, err)
			}
			if err != nil {
				checkSchemeError(t, err)
				if (tc.sig == "" || tc.ts == "") != errors.Is(err, ErrBadRequest) {
					t.Errorf("err = %v: only a missing header is a bad request", err)
				}
			}
		})
	}
}

func TestDiscordConstructorErrors(t *testing.T) {
	pubHex := discordPublicHex(discordTestKey)
	for _, tc := range []struct{ name, key, want string }{
		{"missing", "", "public key (hex ed25519 key of the Discord application) is required"},
		{"short", pubHex[:62], "public key is not a hex ed25519 key: expected 64 hex digits"},
		{"long", pubHex + "00", "expected 64 hex digits"},
		{"not hex", "zz" + pubHex[2:], "public key is not a hex ed25519 key: not hex"},
		{"base64", "B4Sm5X5tQz3c2D2n4k7U6GZt0bJvN1i1lC6vB6mV9b0=", "expected 64 hex digits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewProvider(ProviderConfig{Name: "discord", Scheme: SchemeDiscord, PublicKey: tc.key})
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `provider "discord"`) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if tc.key != "" && strings.Contains(err.Error(), tc.key) {
				t.Errorf("error %q echoes the key", err)
			}
		})
	}
}
