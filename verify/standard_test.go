package verify

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The published Standard Webhooks vector (standard-webhooks repo,
// libraries/go/webhook_test.go; the same in every language).
const (
	swSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	swID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	swTimestamp = 1614265330
	swPayload   = `{"test": 2432232314}`
	swSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// otherSWSecret is a second valid secret (24 random bytes).
const otherSWSecret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"

func TestStandardPublishedVector(t *testing.T) {
	for _, scheme := range []string{SchemeStandard, SchemeSvix} {
		t.Run(scheme, func(t *testing.T) {
			p := mustProvider(t, ProviderConfig{Name: "sw", Scheme: scheme, Secrets: []string{swSecret}})
			in := Input{
				Header: headers("webhook-id", swID, "webhook-timestamp", strconv.Itoa(swTimestamp), "webhook-signature", swSignature),
				Body:   []byte(swPayload),
			}
			ev, err := p.Check(in, time.Unix(swTimestamp, 0))
			if err != nil {
				t.Fatalf("published vector refused: %v", err)
			}
			want := Event{ID: swID, Type: "", ContentHash: sha256Hex(`{"test":2432232314}`)}
			if !reflect.DeepEqual(ev, want) {
				t.Errorf("event = %+v, want %+v", ev, want)
			}
		})
	}
}

func TestStandardCheck(t *testing.T) {
	const (
		id   = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"
		ts   = int64(1700000000)
		body = `{"type":"invoice.paid","data":{"amount":1200}}`
	)
	now := time.Unix(ts, 0)
	good := signStandard(t, swSecret, id, ts, body)
	otherSig := signStandard(t, otherSWSecret, id, ts, body)
	tsStr := strconv.FormatInt(ts, 10)
	h := func(sig string) func(...string) []string {
		return func(extra ...string) []string {
			return append([]string{"webhook-id", id, "webhook-timestamp", tsStr, "webhook-signature", sig}, extra...)
		}
	}
	std := h(good)

	base := ProviderConfig{Name: "sw", Scheme: SchemeStandard, Secrets: []string{swSecret}}
	many := func(n int, last string) string {
		var parts []string
		for range n - 1 {
			parts = append(parts, otherSig)
		}
		return strings.Join(append(parts, last), " ")
	}
	cases := []checkCase{
		{name: "valid", header: headers(std()...), body: body, now: now, wantID: id},
		{name: "bare base64 secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{strings.TrimPrefix(swSecret, "whsec_")} },
			header: headers(std()...), body: body, now: now, wantID: id},
		{name: "wrong secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{otherSWSecret} },
			header: headers(std()...), body: body, now: now, wantErr: ErrUnauthorized, wantMsg: "no signature matches"},
		{name: "tampered body", header: headers(std()...), body: strings.Replace(body, "1200", "1201", 1), now: now, wantErr: ErrUnauthorized},
		{name: "tampered id", header: headers(h(good)("webhook-id", "msg_other")...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "second secret matches", cfg: func(c *ProviderConfig) { c.Secrets = []string{otherSWSecret, swSecret} },
			header: headers(std()...), body: body, now: now, wantID: id},
		{name: "rotation: second signature matches", header: headers(h(otherSig + " " + good)()...), body: body, now: now, wantID: id},
		{name: "rotation: extra spaces and v1a entry", header: headers(h("v1a,AAAA  " + good + " ")()...), body: body, now: now, wantID: id},
		{name: "signature in the 16th entry", header: headers(h(many(16, good))()...), body: body, now: now, wantID: id},
		{name: "signature past 16 entries", header: headers(h(many(17, good))()...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "only other versions", header: headers(h("v2," + strings.TrimPrefix(good, "v1,"))()...), body: body, now: now,
			wantErr: ErrUnauthorized, wantMsg: "no well-formed v1 signature"},
		{name: "bad base64", header: headers(h("v1,!!!!" + strings.TrimPrefix(good, "v1,")[4:])()...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "truncated signature", header: headers(h(good[:len(good)-4])()...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "no comma", header: headers(h("v1" + strings.TrimPrefix(good, "v1,"))()...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "empty list", header: headers(h("   ")()...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "header too long", header: headers(h(good + strings.Repeat(" ", maxSignatureHeaderLen))()...), body: body, now: now,
			wantErr: ErrUnauthorized, wantMsg: "longer than"},
		{name: "non-numeric timestamp", header: headers(std("webhook-timestamp", "yesterday")...), body: body, now: now,
			wantErr: ErrUnauthorized, wantMsg: "malformed webhook-timestamp"},
		{name: "signed timestamp", header: headers(std("webhook-timestamp", "+"+tsStr)...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "negative timestamp", header: headers(std("webhook-timestamp", "-"+tsStr)...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "huge timestamp", header: headers(std("webhook-timestamp", "99999999999999999999")...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "at the tolerance edge (past)", header: headers(std()...), body: body, now: now.Add(5 * time.Minute), wantID: id},
		{name: "stale timestamp", header: headers(std()...), body: body, now: now.Add(5*time.Minute + time.Second),
			wantErr: ErrUnauthorized, wantMsg: "timestamp older"},
		{name: "at the tolerance edge (future)", header: headers(std()...), body: body, now: now.Add(-5 * time.Minute), wantID: id},
		{name: "future timestamp", header: headers(std()...), body: body, now: now.Add(-5*time.Minute - time.Second),
			wantErr: ErrUnauthorized, wantMsg: "future"},
		{name: "custom tolerance", cfg: func(c *ProviderConfig) { c.Tolerance = time.Minute },
			header: headers(std()...), body: body, now: now.Add(61 * time.Second), wantErr: ErrUnauthorized},
		{name: "missing signature", header: headers("webhook-id", id, "webhook-timestamp", tsStr), body: body, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing webhook-signature header"},
		{name: "missing id", header: headers("webhook-timestamp", tsStr, "webhook-signature", good), body: body, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing webhook-id header"},
		{name: "missing timestamp", header: headers("webhook-id", id, "webhook-signature", good), body: body, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing webhook-timestamp header"},
		{name: "no headers at all", header: nil, body: body, now: now, wantErr: ErrBadRequest},
		{name: "svix names are not read", header: headers("svix-id", id, "svix-timestamp", tsStr, "svix-signature", good), body: body, now: now,
			wantErr: ErrBadRequest},
	}
	runCheckCases(t, base, cases)
}

func TestStandardEventType(t *testing.T) {
	const id, ts = "msg_1", int64(1700000000)
	for body, want := range map[string]string{
		`{"type":"invoice.paid","data":{}}`: "invoice.paid",
		`{"type":7}`:                        "",
		`[{"type":"x"}]`:                    "",
		`not json`:                          "",
		`{"data":{"type":"nested"}}`:        "",
	} {
		p := mustProvider(t, ProviderConfig{Name: "sw", Scheme: SchemeStandard, Secrets: []string{swSecret}})
		ev, err := p.Check(Input{
			Header: headers("webhook-id", id, "webhook-timestamp", strconv.FormatInt(ts, 10), "webhook-signature", signStandard(t, swSecret, id, ts, body)),
			Body:   []byte(body),
		}, time.Unix(ts, 0))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if ev.Type != want {
			t.Errorf("%s: Type = %q, want %q", body, ev.Type, want)
		}
	}
}

func TestSvixCheck(t *testing.T) {
	const (
		id   = "msg_svix"
		ts   = int64(1700000000)
		body = `{"type":"user.created"}`
	)
	now := time.Unix(ts, 0)
	tsStr := strconv.FormatInt(ts, 10)
	good := signStandard(t, swSecret, id, ts, body)
	base := ProviderConfig{Name: "clerk", Scheme: SchemeSvix, Secrets: []string{swSecret}}
	runCheckCases(t, base, []checkCase{
		{name: "svix headers", header: headers("svix-id", id, "svix-timestamp", tsStr, "svix-signature", good), body: body, now: now, wantID: id},
		{name: "webhook fallback", header: headers("webhook-id", id, "webhook-timestamp", tsStr, "webhook-signature", good), body: body, now: now, wantID: id},
		{name: "svix preferred over webhook", header: headers(
			"svix-id", id, "svix-timestamp", tsStr, "svix-signature", good,
			"webhook-id", "msg_other", "webhook-timestamp", tsStr, "webhook-signature", good), body: body, now: now, wantID: id},
		{name: "incomplete svix set falls back", header: headers(
			"svix-id", "msg_other",
			"webhook-id", id, "webhook-timestamp", tsStr, "webhook-signature", good), body: body, now: now, wantID: id},
		{name: "wrong secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{otherSWSecret} },
			header: headers("svix-id", id, "svix-timestamp", tsStr, "svix-signature", good), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "stale", header: headers("svix-id", id, "svix-timestamp", tsStr, "svix-signature", good), body: body,
			now: now.Add(6 * time.Minute), wantErr: ErrUnauthorized},
		{name: "future", header: headers("svix-id", id, "svix-timestamp", tsStr, "svix-signature", good), body: body,
			now: now.Add(-6 * time.Minute), wantErr: ErrUnauthorized},
		{name: "missing svix signature", header: headers("svix-id", id, "svix-timestamp", tsStr), body: body, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing svix-signature header"},
		{name: "nothing", header: headers(), body: body, now: now, wantErr: ErrBadRequest, wantMsg: "missing svix-signature header"},
		{name: "partial webhook set named", header: headers("webhook-id", id, "webhook-signature", good), body: body, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing webhook-timestamp header"},
	})
}

// TestStandardOfficialLibrary signs with the official Go library and checks
// that Check accepts it; and checks our test signer against the library's
// verifier, so the table tests above rest on an independent implementation.
func TestStandardOfficialLibrary(t *testing.T) {
	for _, secret := range []string{swSecret, otherSWSecret} {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		// The library's Verify uses the wall clock: sign at time.Now().
		now := time.Unix(time.Now().Unix(), 0)
		const id = "msg_official"
		body := []byte(`{"type":"ping","data":{"n":1}}`)
		sig, err := wh.Sign(id, now, body)
		if err != nil {
			t.Fatal(err)
		}
		for _, scheme := range []string{SchemeStandard, SchemeSvix} {
			p := mustProvider(t, ProviderConfig{Name: "sw", Scheme: scheme, Secrets: []string{swSecret, otherSWSecret}})
			h := headers("webhook-id", id, "webhook-timestamp", strconv.FormatInt(now.Unix(), 10), "webhook-signature", sig)
			ev, err := p.Check(Input{Header: h, Body: body}, now)
			if err != nil {
				t.Fatalf("%s: official signature refused: %v", scheme, err)
			}
			if ev.ID != id || ev.Type != "ping" {
				t.Errorf("%s: event = %+v", scheme, ev)
			}
			if _, err := p.Check(Input{Header: h, Body: append(body, ' ')}, now); !errors.Is(err, ErrUnauthorized) {
				t.Errorf("%s: tampered body: err = %v, want ErrUnauthorized", scheme, err)
			}
		}

		ours := headers("webhook-id", id, "webhook-timestamp", strconv.FormatInt(now.Unix(), 10),
			"webhook-signature", signStandard(t, secret, id, now.Unix(), string(body)))
		if err := wh.Verify(body, ours); err != nil {
			t.Errorf("official library refuses the test signer: %v", err)
		}
	}
}

func TestParseStandardSignatures(t *testing.T) {
	good := strings.TrimPrefix(swSignature, "v1,")
	sigs, err := parseStandardSignatures("v1a,xyz v1," + good + " v1,bad v1," + good)
	if err != nil {
		t.Fatal(err)
	}
	if len(sigs) != 2 {
		t.Fatalf("got %d signatures, want 2", len(sigs))
	}
	for _, h := range []string{"", " ", "v1,", "v1", ",", "v1a," + good, "v1," + good + "=", "v1," + good[:43] + "_",
		// 44 characters without padding decode to 33 bytes (found by
		// FuzzStandardSignatures: it used to overrun the buffer).
		"v1," + strings.Repeat("0", 44)} {
		if _, err := parseStandardSignatures(h); err == nil {
			t.Errorf("%q: no error", h)
		}
	}
}
