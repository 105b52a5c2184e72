package verify

import "crypto/sha256"

// SchemeAtlassian verifies Jira Cloud admin webhooks registered with a
// secret.
const SchemeAtlassian = "atlassian"

// atlassianIdentifierHeader identifies one webhook delivery, unique per
// site and kept on its retries (alongside X-Atlassian-Webhook-Retry); the
// signature does not cover it.
const atlassianIdentifierHeader = "X-Atlassian-Webhook-Identifier"

// atlassianSpec: "X-Hub-Signature: sha256=" + hex of HMAC-SHA256(secret,
// body), WebSub's method=signature, for the admin webhooks a Jira admin
// registers with a secret (UI or /rest/webhooks/1.0/webhook); no timestamp
// (https://developer.atlassian.com/cloud/jira/platform/webhooks/, "Secure
// admin webhooks"; details partly read through secondary copies). Connect
// and OAuth-app webhooks are signed otherwise (a JWT) and are not
// accepted. The id is X-Atlassian-Webhook-Identifier, the type the body's
// webhookEvent ("jira:issue_updated").
var atlassianSpec = bodyHMACSpec{
	header:  "X-Hub-Signature",
	prefix:  "sha256=",
	newHash: sha256.New,
	event: func(in Input) (string, string, error) {
		_, typ, _ := bodyFields("", "webhookEvent")(in)
		return in.Header.Get(atlassianIdentifierHeader), typ, nil
	},
}
