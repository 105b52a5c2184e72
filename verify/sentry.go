package verify

import "crypto/sha256"

// SchemeSentry verifies Sentry integration-platform webhooks.
const SchemeSentry = "sentry"

// Sentry's webhook headers
// (https://docs.sentry.io/integrations/integration-platform/webhooks/).
// Sentry-Hook-Timestamp is deliberately not read: the signature does not
// cover it, so it proves nothing about freshness.
const (
	sentryResourceHeader = "Sentry-Hook-Resource" // "issue", "installation", …
	// sentryRequestIDHeader identifies one request (kept on retries:
	// unconfirmed); the signature does not cover it.
	sentryRequestIDHeader = "Request-ID"
)

// sentrySpec: "Sentry-Hook-Signature: " + hex of HMAC-SHA256(client
// secret, body), no prefix, the integration's Client Secret used as raw
// bytes. The id is Request-ID, the type Sentry-Hook-Resource joined with
// the body's action ("issue.created"; either alone when the other is
// absent). installation created/deleted are ordinary events.
var sentrySpec = bodyHMACSpec{
	header:  "Sentry-Hook-Signature",
	newHash: sha256.New,
	event: func(in Input) (string, string, error) {
		_, action, _ := bodyFields("", "action")(in)
		typ := in.Header.Get(sentryResourceHeader)
		switch {
		case typ == "":
			typ = action
		case action != "":
			typ += "." + action
		}
		return in.Header.Get(sentryRequestIDHeader), typ, nil
	},
}
