package verify

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// The GitHub docs vector ("Validating webhook deliveries").
const (
	ghSecret    = "It's a Secret to Everybody"
	ghPayload   = "Hello, World!"
	ghSignature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
)

func TestGitHubPublishedVector(t *testing.T) {
	if got := signGitHub(ghSecret, ghPayload); got != ghSignature {
		t.Fatalf("test signer gives %s, GitHub docs %s", got, ghSignature)
	}
	p := mustProvider(t, ProviderConfig{Name: "gh", Scheme: SchemeGitHub, Secrets: []string{ghSecret}})
	ev, err := p.Check(Input{
		Header: headers("X-Hub-Signature-256", ghSignature, "X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958", "X-GitHub-Event", "push"),
		Body:   []byte(ghPayload),
	}, time.Now())
	if err != nil {
		t.Fatalf("published vector refused: %v", err)
	}
	want := Event{ID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Type: "push", ContentHash: sha256Hex(ghPayload)}
	if !reflect.DeepEqual(ev, want) {
		t.Errorf("event = %+v, want %+v", ev, want)
	}
}

func TestGitHubCheck(t *testing.T) {
	const body = `{"action":"opened","number":7}`
	good := signGitHub(ghSecret, body)
	now := time.Unix(1700000000, 0)
	base := ProviderConfig{Name: "gh", Scheme: SchemeGitHub, Secrets: []string{ghSecret}}
	const delivery = "d2f9c0a0-1111-11ef-8000-000000000000"
	runCheckCases(t, base, []checkCase{
		{name: "valid", header: headers("X-Hub-Signature-256", good, "X-GitHub-Delivery", delivery), body: body, now: now, wantID: delivery},
		{name: "no delivery header: body digest", header: headers("X-Hub-Signature-256", good), body: body, now: now,
			wantID: sha256Hex(`{"action":"opened","number":7}`)},
		{name: "no timestamp: any clock", header: headers("X-Hub-Signature-256", good), body: body, now: time.Unix(0, 0)},
		{name: "wrong secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{"It's a secret to everybody"} },
			header: headers("X-Hub-Signature-256", good), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "secret taken verbatim (trailing space)", cfg: func(c *ProviderConfig) { c.Secrets = []string{ghSecret + " "} },
			header: headers("X-Hub-Signature-256", good), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "tampered body", header: headers("X-Hub-Signature-256", good), body: body + "\n", now: now, wantErr: ErrUnauthorized},
		{name: "second secret matches", cfg: func(c *ProviderConfig) { c.Secrets = []string{"new secret", ghSecret} },
			header: headers("X-Hub-Signature-256", good, "X-GitHub-Delivery", delivery), body: body, now: now, wantID: delivery},
		{name: "uppercase hex", header: headers("X-Hub-Signature-256", "sha256="+strings.ToUpper(strings.TrimPrefix(good, "sha256="))),
			body: body, now: now},
		{name: "sha1 prefix", header: headers("X-Hub-Signature-256", "sha1="+strings.TrimPrefix(good, "sha256=")), body: body, now: now,
			wantErr: ErrUnauthorized, wantMsg: "prefix"},
		{name: "no prefix", header: headers("X-Hub-Signature-256", strings.TrimPrefix(good, "sha256=")), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "bad hex", header: headers("X-Hub-Signature-256", "sha256="+strings.Repeat("zz", 32)), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "short", header: headers("X-Hub-Signature-256", good[:len(good)-2]), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "two signatures", header: headers("X-Hub-Signature-256", good+","+good), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "too long", header: headers("X-Hub-Signature-256", good+strings.Repeat("0", maxSignatureHeaderLen)), body: body, now: now,
			wantErr: ErrUnauthorized, wantMsg: "longer than"},
		{name: "missing header", header: headers("X-GitHub-Delivery", delivery), body: body, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing X-Hub-Signature-256 header"},
		{name: "legacy sha1 header only", header: headers("X-Hub-Signature", "sha1=0000"), body: body, now: now, wantErr: ErrBadRequest},
		{name: "form body", header: headers("X-Hub-Signature-256", signGitHub(ghSecret, "b=2&a=1"), "Content-Type", "application/x-www-form-urlencoded"),
			body: "b=2&a=1", now: now, wantID: sha256Hex("a=1&b=2")},
	})
}

func TestParseGitHubSignature(t *testing.T) {
	sig, err := parseGitHubSignature(ghSignature)
	if err != nil || sig[0] != 0x75 || sig[31] != 0x17 {
		t.Fatalf("got %x, %v", sig, err)
	}
	for _, h := range []string{"", "sha256=", "sha256", "SHA256=" + ghSignature[7:], ghSignature + "0", " " + ghSignature} {
		if _, err := parseGitHubSignature(h); err == nil {
			t.Errorf("%q: no error", h)
		}
	}
}
