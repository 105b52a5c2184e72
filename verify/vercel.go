package verify

import "crypto/sha1" // HMAC-SHA1, Vercel's choice, is not broken as a MAC

// SchemeVercel verifies Vercel webhooks.
const SchemeVercel = "vercel"

// vercelSpec: "x-vercel-signature: " + hex of HMAC-SHA1(secret, body), no
// prefix, no timestamp (https://vercel.com/docs/webhooks, "Securing
// webhooks"; read through secondary copies). The secret is the account
// webhook's secret, shown once when it is created, or for an integration's
// webhooks the integration's client secret, used as raw bytes. The id is
// the body's id and the type its type ("deployment.created"), both signed.
var vercelSpec = bodyHMACSpec{
	header:  "X-Vercel-Signature",
	newHash: sha1.New,
	event:   bodyFields("id", "type"),
}
