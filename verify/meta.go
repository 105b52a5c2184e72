package verify

import (
	"crypto/sha256"
	"net/http"
)

// SchemeMeta verifies Meta (Facebook, Instagram, WhatsApp Business) Graph
// API webhooks.
const SchemeMeta = "meta"

// metaSpec: "X-Hub-Signature-256: sha256=" + hex of HMAC-SHA256(App Secret,
// body), the body exactly as sent (Meta escapes non-ASCII as \uXXXX in
// it); no timestamp
// (https://developers.facebook.com/docs/graph-api/webhooks/getting-started/,
// "Event Notifications"). The legacy SHA-1 X-Hub-Signature is not
// accepted: a request carrying only it is refused as missing the header.
// Meta sends no delivery id (its entries carry id and time, and a batch
// may hold several), so the id is the body digest.
var metaSpec = bodyHMACSpec{
	header:  "X-Hub-Signature-256",
	prefix:  "sha256=",
	newHash: sha256.New,
	event: func(in Input) (string, string, error) {
		v, ok := jsonObject(in.Body)
		if !ok {
			return "", "", nil
		}
		return "", metaEventType(v), nil
	},
}

// metaChallengeMaxLen bounds hub.challenge: Meta documents it as "an int
// you must pass back" (sample 1158201444), so digits only, and far fewer
// than 32 of them (an int64 has 19).
const metaChallengeMaxLen = 32

// metaChallenges is Meta's verification request
// (https://developers.facebook.com/docs/graph-api/webhooks/getting-started/,
// "Verification Requests"): GET
// ?hub.mode=subscribe&hub.challenge=N&hub.verify_token=T, unsigned, proven
// by T alone (equal to VerifyToken, compared in constant time, else 403);
// answered 200 with N as text/plain.
var metaChallenges = []challenge{{
	method:   http.MethodGet,
	param:    "hub.challenge",
	maxLen:   metaChallengeMaxLen,
	alphabet: "0123456789",
	proof:    proofVerifyToken,
	answer:   answerEcho,
	doc:      "GET `?hub.mode=subscribe&hub.challenge=N&hub.verify_token=T`: T equal to `VERIFY_TOKEN` → N (text/plain), else 403",
}}

// metaEventType is the body's object ("page", "whatsapp_business_account",
// …), followed by "." and the field of its entries' changes when every
// change names the same one ("page.feed"); the object alone when they
// differ or there are none (Messenger's entries carry messaging instead).
// The walk is bounded by the body, which Check bounds.
func metaEventType(v jsonValue) string {
	object, _ := v.stringField("object")
	if object == "" {
		return ""
	}
	field := ""
	entries, _ := v.field("entry")
	for _, e := range entries.elems {
		changes, _ := e.field("changes")
		for _, c := range changes.elems {
			f, ok := c.stringField("field")
			if !ok || f == "" || (field != "" && f != field) {
				return object
			}
			field = f
		}
	}
	if field == "" {
		return object
	}
	return object + "." + field
}
