package verify

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"
)

const (
	shopifySecret      = "shpss_0123456789abcdef0123456789abcdef"
	shopifyOtherSecret = "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"
	shopifyBody        = `{"id":820982911946154508,"email":"jon@example.com","total_price":"403.00","line_items":[{"id":866550311766439020,"quantity":1}]}`
	shopifyWebhookID   = "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"
	shopifyEventID     = "98880550-7158-44d4-b7cd-2c97c8a091b5"
)

// signShopify returns an X-Shopify-Hmac-SHA256 value (Shopify docs: base64
// of HMAC-SHA256(client secret, raw body)).
func signShopify(secret, body string) string {
	return base64.StdEncoding.EncodeToString(hmacSHA256([]byte(secret), body))
}

func TestShopifyCheck(t *testing.T) {
	now := time.Unix(1700000000, 0)
	good := signShopify(shopifySecret, shopifyBody)
	sh := func(sig string, kv ...string) http.Header {
		return headers(append([]string{"X-Shopify-Hmac-Sha256", sig, "X-Shopify-Topic", "orders/create"}, kv...)...)
	}
	base := ProviderConfig{Name: "shop", Scheme: SchemeShopify, Secrets: []string{shopifySecret}}
	canonical, err := Canonicalize([]byte(shopifyBody))
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256Hex(string(canonical))
	raw, _ := base64.StdEncoding.DecodeString(good)
	runCheckCases(t, base, []checkCase{
		{name: "valid", header: sh(good, "X-Shopify-Webhook-Id", shopifyWebhookID, "X-Shopify-Event-Id", shopifyEventID),
			body: shopifyBody, now: now, wantID: shopifyWebhookID},
		{name: "event id fallback", header: sh(good, "X-Shopify-Event-Id", shopifyEventID), body: shopifyBody, now: now, wantID: shopifyEventID},
		{name: "no id headers: body digest", header: sh(good), body: shopifyBody, now: now, wantID: digest},
		{name: "no timestamp: any clock", header: sh(good), body: shopifyBody, now: time.Unix(0, 0), wantID: digest},
		{name: "header name as documented", header: headers("X-Shopify-Hmac-SHA256", good), body: shopifyBody, now: now},
		{name: "wrong secret", cfg: func(c *ProviderConfig) { c.Secrets = []string{shopifyOtherSecret} },
			header: sh(good), body: shopifyBody, now: now, wantErr: ErrUnauthorized, wantMsg: "no signature matches"},
		{name: "tampered body", header: sh(good), body: strings.Replace(shopifyBody, "403.00", "4.00", 1), now: now, wantErr: ErrUnauthorized},
		{name: "rotated: old secret still signs", cfg: func(c *ProviderConfig) { c.Secrets = []string{shopifyOtherSecret, shopifySecret} },
			header: sh(good, "X-Shopify-Webhook-Id", shopifyWebhookID), body: shopifyBody, now: now, wantID: shopifyWebhookID},
		{name: "rotated: new secret signs", cfg: func(c *ProviderConfig) { c.Secrets = []string{shopifySecret, shopifyOtherSecret} },
			header: sh(good), body: shopifyBody, now: now},
		{name: "missing header", header: headers("X-Shopify-Topic", "orders/create"), body: shopifyBody, now: now,
			wantErr: ErrBadRequest, wantMsg: "missing X-Shopify-Hmac-SHA256 header"},
		{name: "hex instead of base64", header: sh(hex.EncodeToString(raw)), body: shopifyBody, now: now, wantErr: ErrUnauthorized, wantMsg: "base64"},
		{name: "unpadded", header: sh(strings.TrimRight(good, "=")), body: shopifyBody, now: now, wantErr: ErrUnauthorized},
		{name: "url-safe alphabet", header: sh(base64.URLEncoding.EncodeToString(append([]byte{0xfb, 0xff}, raw[2:]...))), body: shopifyBody, now: now,
			wantErr: ErrUnauthorized},
		{name: "sha256= prefix", header: sh("sha256=" + good), body: shopifyBody, now: now, wantErr: ErrUnauthorized},
		{name: "two signatures", header: sh(good + "," + good), body: shopifyBody, now: now, wantErr: ErrUnauthorized},
		{name: "too long", header: sh(strings.Repeat(good, 100)), body: shopifyBody, now: now, wantErr: ErrUnauthorized, wantMsg: "longer than"},
	})

	p := mustProvider(t, base)
	ev, err := p.Check(Input{Header: sh(good), Body: []byte(shopifyBody)}, now)
	if err != nil || ev.Type != "orders/create" {
		t.Errorf("event = %+v, %v; want type orders/create", ev, err)
	}
}

// TestShopifyNonCanonicalBase64: a signature whose last character carries
// non-zero padding bits decodes to the same bytes under lenient base64; it
// is refused, so one signature has one spelling.
func TestShopifyNonCanonicalBase64(t *testing.T) {
	good := signShopify(shopifySecret, shopifyBody)
	// 32 bytes → 43 data characters + '='; the last data character holds 2
	// padding bits.
	last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", good[42])
	alt := good[:42] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[last|1]) + "="
	if alt == good {
		alt = good[:42] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[last|2]) + "="
	}
	if _, ok := shopifyDecodeSignature(good); !ok {
		t.Fatalf("canonical signature refused")
	}
	if _, ok := shopifyDecodeSignature(alt); ok {
		t.Errorf("non-canonical spelling %q of %q accepted", alt, good)
	}
}
