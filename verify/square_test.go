package verify

import (
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The square-go-sdk test vector.
const (
	squareKey  = "Ibxx_5AKakO-3qeNVR61Dw"
	squareURL  = "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9"
	squareBody = `{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}`
	squareSig  = "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4="

	squareOtherKey = "Zq8m_2PbNrT-5xWcY41KaA"
)

// signSquare computes Square's signature independently of the package.
func signSquare(key, notificationURL, body string) string {
	return base64.StdEncoding.EncodeToString(hmacSHA256([]byte(key), notificationURL, body))
}

func TestSquarePublishedVector(t *testing.T) {
	if got := signSquare(squareKey, squareURL, squareBody); got != squareSig {
		t.Fatalf("test signer gives %s, square-go-sdk %s", got, squareSig)
	}
	p := mustProvider(t, ProviderConfig{Name: "sq", Scheme: SchemeSquare, Secrets: []string{squareKey}, PublicURL: squareURL})
	ev, err := p.Check(Input{Header: headers("x-square-hmacsha256-signature", squareSig), Body: []byte(squareBody)}, time.Now())
	if err != nil {
		t.Fatalf("published vector refused: %v", err)
	}
	hash, err := ContentDigest(nil, []byte(squareBody), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Event{ID: "ac3ac95b-f97d-458c-a6e6-18981597e05f", Type: "webhooks.test_notification", ContentHash: hash}
	if !reflect.DeepEqual(ev, want) {
		t.Errorf("event = %+v, want %+v", ev, want)
	}
	// The vector's signature holds '/': its URL-safe spelling is refused.
	urlSafe := strings.NewReplacer("+", "-", "/", "_").Replace(squareSig)
	if _, err := p.Check(Input{Header: headers("x-square-hmacsha256-signature", urlSafe), Body: []byte(squareBody)}, time.Now()); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("URL-safe base64: err = %v, want ErrUnauthorized", err)
	}
}

func TestSquareCheck(t *testing.T) {
	const (
		pubURL = "https://hooks.example.com/webhooks/square"
		query  = "tenant=7&b=2"
		body   = `{"merchant_id":"M1","type":"payment.updated","event_id":"6a8f5f28-54a1-4eb0-a98a-3111513fd4fc","data":{"type":"payment","id":"P1"}}`
		wantID = "6a8f5f28-54a1-4eb0-a98a-3111513fd4fc"
	)
	now := time.Unix(1700000000, 0)
	good := signSquare(squareKey, pubURL, body)
	withQuery := signSquare(squareKey, pubURL+"?"+query, body)
	h := func(sig string) []string { return []string{"X-Square-HmacSha256-Signature", sig} }
	base := ProviderConfig{Name: "sq", Scheme: SchemeSquare, Secrets: []string{squareKey}, PublicURL: pubURL}
	runCasesB(t, base, []caseB{
		{name: "valid", header: headers(h(good)...), body: body, now: now, wantID: wantID, wantType: "payment.updated"},
		{name: "no timestamp: any clock", header: headers(h(good)...), body: body, now: time.Unix(0, 0), wantID: wantID, wantType: "payment.updated"},
		{name: "received query appended", header: headers(h(withQuery)...), body: body, query: query, now: now, wantID: wantID, wantType: "payment.updated"},
		{name: "signed with query, received without", header: headers(h(withQuery)...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "signed without query, received with", header: headers(h(good)...), body: body, query: query, now: now, wantErr: ErrUnauthorized},
		{name: "query reordered", header: headers(h(withQuery)...), body: body, query: "b=2&tenant=7", now: now, wantErr: ErrUnauthorized},
		{name: "URL differs by a trailing slash", cfg: func(c *ProviderConfig) { c.PublicURL = pubURL + "/" },
			header: headers(h(good)...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "wrong key", cfg: func(c *ProviderConfig) { c.Secrets = []string{squareOtherKey} },
			header: headers(h(good)...), body: body, now: now, wantErr: ErrUnauthorized, wantMsg: "no signature matches"},
		{name: "key taken verbatim, not base64-decoded", cfg: func(c *ProviderConfig) { c.Secrets = []string{squareKey + " "} },
			header: headers(h(good)...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "tampered body", header: headers(h(good)...), body: strings.Replace(body, "P1", "P2", 1), now: now, wantErr: ErrUnauthorized},
		{name: "rotated: second key matches", cfg: func(c *ProviderConfig) { c.Secrets = []string{squareOtherKey, squareKey} },
			header: headers(h(good)...), body: body, now: now, wantID: wantID, wantType: "payment.updated"},
		{name: "missing header", header: headers("X-Square-Signature", good), body: body, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing X-Square-Hmacsha256-Signature header"},
		{name: "not base64", header: headers(h(strings.Repeat("!", 44))...), body: body, now: now, wantErr: ErrUnauthorized, wantMsg: "base64"},
		{name: "unpadded", header: headers(h(strings.TrimRight(good, "="))...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "hex instead of base64", header: headers(h(strings.Repeat("ab", 32))...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "truncated", header: headers(h(good[:40])...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "two signatures", header: headers(h(good + "," + good)...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "surrounding space", header: headers(h(" " + good)...), body: body, now: now, wantErr: ErrUnauthorized},
		{name: "too long", header: headers(h(good + strings.Repeat("A", maxSignatureHeaderLen))...), body: body, now: now,
			wantErr: ErrUnauthorized, wantMsg: "longer than"},
		{name: "no event_id: content digest", header: headers(h(signSquare(squareKey, pubURL, `{"type":"x"}`))...), body: `{"type":"x"}`, now: now,
			wantID: "digest", wantType: "x"},
		{name: "body not JSON: raw digest", header: headers(h(signSquare(squareKey, pubURL, "hello"))...), body: "hello", now: now, wantID: "digest"},
		{name: "id header overrides", cfg: func(c *ProviderConfig) { c.IDHeader = "X-Request-Id" },
			header: headers(append(h(good), "X-Request-Id", "r-1")...), body: body, now: now, wantID: "r-1", wantType: "payment.updated"},
	})
}

func TestSquareConstructorErrors(t *testing.T) {
	for _, tc := range []struct {
		name, url, want string
	}{
		{"missing", "", "public URL (the Square notification URL) is required"},
		{"relative", "/webhooks/square", "absolute http or https URL"},
		{"other scheme", "ftp://example.com/hook", "absolute http or https URL"},
		{"no host", "https:///hook", "must name a host"},
		{"opaque", "https:example.com", "must name a host"},
		{"query", "https://example.com/hook?secret=abc", "must not have a query"},
		{"empty query", "https://example.com/hook?", "must not have a query"},
		{"fragment", "https://example.com/hook#frag", "must not have a fragment"},
		{"unparseable", "https://exa mple.com/%zz", "not a valid URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewProvider(ProviderConfig{Name: "sq", Scheme: SchemeSquare, Secrets: []string{squareKey}, PublicURL: tc.url})
			if err == nil {
				t.Fatalf("accepted %q", tc.url)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if tc.url != "" && strings.Contains(err.Error(), tc.url) {
				t.Errorf("error %q echoes the URL", err)
			}
			if strings.Contains(err.Error(), squareKey) {
				t.Errorf("error %q contains the key", err)
			}
		})
	}
	if _, err := NewProvider(ProviderConfig{Name: "sq", Scheme: SchemeSquare, PublicURL: squareURL}); err == nil ||
		!strings.Contains(err.Error(), "no secret configured") {
		t.Errorf("no key: err = %v", err)
	}
	if _, err := NewProvider(ProviderConfig{Name: "sq", Scheme: SchemeSquare, Secrets: []string{squareKey}, PublicURL: "http://127.0.0.1:8080/hook"}); err != nil {
		t.Errorf("http URL with a port refused: %v", err)
	}
}
