package verify

import "crypto/sha256"

// SchemeTypeform verifies Typeform webhooks.
const SchemeTypeform = "typeform"

// typeformSpec: "Typeform-Signature: sha256=" + base64 of
// HMAC-SHA256(secret, body), the secret being the one set on the webhook
// (UI or Webhooks API), used as raw bytes; no timestamp is signed
// (https://www.typeform.com/developers/webhooks/secure-your-webhooks/). The
// id is the body's event_id and the type its event_type ("form_response"),
// both signed.
var typeformSpec = bodyHMACSpec{
	header:  "Typeform-Signature",
	prefix:  "sha256=",
	newHash: sha256.New,
	base64:  true,
	event:   bodyFields("event_id", "event_type"),
}
