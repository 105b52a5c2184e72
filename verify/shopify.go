package verify

import (
	"encoding/base64"
	"time"
)

// Shopify's webhook headers (Shopify dev docs, "Deliver webhooks through
// HTTPS": "Verify a webhook"; "Ignore duplicate webhooks").
const (
	shopifySignatureHeader = "X-Shopify-Hmac-SHA256"
	// shopifyWebhookIDHeader identifies one webhook delivery and is kept on
	// its retries, so it is the stable id: Shopify's earlier "best
	// practices" page told receivers to deduplicate on it.
	shopifyWebhookIDHeader = "X-Shopify-Webhook-Id"
	// shopifyEventIDHeader identifies the event behind a delivery; the
	// current "Ignore duplicate webhooks" page deduplicates on it. It is the
	// fallback only: preferring the per-delivery id can at worst pass a
	// duplicate on (delivery is at-least-once anyway), never merge two
	// distinct deliveries into one.
	shopifyEventIDHeader = "X-Shopify-Event-Id"
	shopifyTopicHeader   = "X-Shopify-Topic"
)

// shopifyScheme verifies Shopify: "X-Shopify-Hmac-SHA256: <base64>" where the
// base64 (standard alphabet, padded, no prefix) is HMAC-SHA256(app client
// secret, body), the secret used as raw bytes. After a secret rotation
// Shopify may keep signing with the old secret for up to an hour: configure
// both, every one is tried. Shopify signs no timestamp
// (X-Shopify-Triggered-At is not covered by the HMAC), so replays are
// bounded only by deduplication.
type shopifyScheme struct {
	keys [][]byte
}

var _ Scheme = (*shopifyScheme)(nil)

func newShopifyScheme(cfg ProviderConfig) (Scheme, error) {
	keys, err := secretKeys(cfg.Secrets, rawSecret)
	if err != nil {
		return nil, err
	}
	return &shopifyScheme{keys: keys}, nil
}

// Verify checks the signature; the event id is X-Shopify-Webhook-Id, else
// X-Shopify-Event-Id, else "" (Check then uses the body digest); the type is
// X-Shopify-Topic (e.g. "orders/create").
func (s *shopifyScheme) Verify(in Input, _ time.Time) (Verified, error) {
	header := in.Header.Get(shopifySignatureHeader)
	if header == "" {
		return Verified{}, missingHeader(shopifySignatureHeader)
	}
	if err := checkHeaderLen(shopifySignatureHeader, header); err != nil {
		return Verified{}, err
	}
	sig, ok := shopifyDecodeSignature(header)
	if !ok {
		return Verified{}, refusef(ReasonMalformedHeader, "%w: %s header: expected the base64 of 32 bytes", ErrUnauthorized, shopifySignatureHeader)
	}
	if !anyKeyMatches(s.keys, []signature{sig}, nil, in.Body) {
		return Verified{}, refusef(ReasonSignatureMismatch, "%w: no signature matches", ErrUnauthorized)
	}
	id := in.Header.Get(shopifyWebhookIDHeader)
	if id == "" {
		id = in.Header.Get(shopifyEventIDHeader)
	}
	return Verified{ID: id, Type: in.Header.Get(shopifyTopicHeader)}, nil
}

// shopifyDecodeSignature decodes a standard-alphabet, padded base64
// HMAC-SHA256 value (44 characters), refusing non-canonical encodings.
func shopifyDecodeSignature(value string) (signature, bool) {
	var sig signature
	if len(value) != base64.StdEncoding.EncodedLen(len(sig)) {
		return sig, false
	}
	// Decode needs room for DecodedLen (33) bytes.
	var buf [33]byte
	n, err := base64.StdEncoding.Strict().Decode(buf[:], []byte(value))
	if err != nil || n != len(sig) {
		return sig, false
	}
	copy(sig[:], buf[:len(sig)])
	return sig, true
}
