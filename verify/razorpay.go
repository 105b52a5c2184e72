package verify

import "crypto/sha256"

// SchemeRazorpay verifies Razorpay webhooks.
const SchemeRazorpay = "razorpay"

// razorpayEventIDHeader identifies one event and is kept on its retries
// (Razorpay: "Validate and Test Webhooks", idempotency); the signature does
// not cover it.
const razorpayEventIDHeader = "X-Razorpay-Event-Id"

// razorpaySpec: "X-Razorpay-Signature: " + hex of HMAC-SHA256(webhook
// secret, body), no prefix, no timestamp
// (https://razorpay.com/docs/webhooks/validate-test/; razorpay-go
// utils.VerifyWebhookSignature). The secret is the one set with the webhook
// in the Dashboard, not the API key secret. After a secret change, retries
// of older events still carry the old secret's signature: keep it as a
// previous secret meanwhile. The id is X-Razorpay-Event-Id (unsigned; ""
// when absent, so Check uses the body digest), the type the body's event
// ("payment.authorized").
var razorpaySpec = bodyHMACSpec{
	header:  "X-Razorpay-Signature",
	newHash: sha256.New,
	event: func(in Input) (string, string, error) {
		_, typ, _ := bodyFields("", "event")(in)
		return in.Header.Get(razorpayEventIDHeader), typ, nil
	},
}
