package verify

import "crypto/sha256"

// SchemeBitbucket verifies Bitbucket webhooks (Cloud, and Data Center,
// which signs the same way).
const SchemeBitbucket = "bitbucket"

// Bitbucket's delivery headers (https://support.atlassian.com/bitbucket-cloud/docs/event-payloads/).
// None is covered by the signature.
const (
	bitbucketEventKeyHeader = "X-Event-Key" // "repo:push", "pullrequest:created"
	// bitbucketRequestUUIDHeader identifies one delivery on Cloud (kept on
	// its retries: unconfirmed); Data Center names it X-Request-Id.
	bitbucketRequestUUIDHeader = "X-Request-UUID"
	bitbucketRequestIDHeader   = "X-Request-Id"
)

// bitbucketSpec: "X-Hub-Signature: sha256=" + hex of HMAC-SHA256(secret,
// body), sent only when a secret is set on the webhook; no timestamp
// (https://bitbucket.org/blog/enhanced-webhook-security; Data Center:
// https://confluence.atlassian.com/bitbucketserver/event-payload-938025882.html).
// The id is X-Request-UUID, else X-Request-Id, the type X-Event-Key.
var bitbucketSpec = bodyHMACSpec{
	header:  "X-Hub-Signature",
	prefix:  "sha256=",
	newHash: sha256.New,
	event: func(in Input) (string, string, error) {
		return firstHeader(in.Header, bitbucketRequestUUIDHeader, bitbucketRequestIDHeader), in.Header.Get(bitbucketEventKeyHeader), nil
	},
}
