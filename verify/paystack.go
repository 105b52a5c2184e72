package verify

import "crypto/sha512"

// SchemePaystack verifies Paystack webhooks.
const SchemePaystack = "paystack"

// paystackSpec: "x-paystack-signature: " + hex of HMAC-SHA512(secret API
// key, body), no prefix, no timestamp (https://paystack.com/docs/payments/webhooks/;
// Paystack's own snippet, PaystackOSS/doc-code-snippets
// src/doc/payments/webhooks/verifying-transaction/index.js). The key is
// the secret API key itself (sk_live_…, sk_test_…), used as raw bytes.
//
// Paystack documents no event id. event + data.id would name an object,
// not an event: two updates of one invoice would share it and be taken for
// one event, so the id is left to the body digest (signed). The type is
// the body's event ("charge.success").
var paystackSpec = bodyHMACSpec{
	header:  "X-Paystack-Signature",
	newHash: sha512.New,
	event:   bodyFields("", "event"),
}
