package verify

import (
	"cmp"
	"time"
)

// SchemeDoc is what the providers' reference (docs/providers.md, generated
// from the registry) says of a scheme, in people's words.
type SchemeDoc struct {
	// Set is what to configure besides WHGUARD_<NAME>_SCHEME.
	Set string
	// Signature is what is checked, and what a handshake is answered.
	Signature string
	// EventID is where the event id comes from.
	EventID string
	// Tolerance, when set, replaces the default tolerance's own words.
	Tolerance string
	// Resign, when set, replaces ResignSupport's words.
	Resign string
}

// schemeDocs holds every registered scheme's SchemeDoc (a test checks
// that none is missing).
var schemeDocs = map[string]SchemeDoc{
	SchemeStandard: {Set: "`SECRET` (`whsec_`+base64)", Signature: "`webhook-signature` `v1,` base64 HMAC-SHA256 of `id.ts.body`", EventID: "`webhook-id`"},
	SchemeSvix:     {Set: "`SECRET` (`whsec_`+base64)", Signature: "`svix-*` headers (falling back to `webhook-*`), as `standard`", EventID: "`svix-id`"},
	SchemeStripe:   {Set: "`SECRET` (whole `whsec_…` string)", Signature: "`Stripe-Signature: t=…,v1=…` hex HMAC-SHA256 of `t.body`", EventID: "body `id`"},
	SchemeGitHub: {Set: "`SECRET`", Signature: "`X-Hub-Signature-256: sha256=` hex HMAC-SHA256 of the body", EventID: "`X-GitHub-Delivery`",
		Tolerance: "none (unsigned time)"},
	SchemeSlack: {Set: "`SECRET` (signing secret)", Signature: "`X-Slack-Signature: v0=` over `v0:ts:body`, `X-Slack-Request-Timestamp`; answers `url_verification`",
		EventID: "body `event_id`, else digest (slash commands)"},
	SchemeShopify: {Set: "`SECRET` (app client secret; keep the old one in `SECRET_PREVIOUS` for the hour after a rotation)",
		Signature: "`X-Shopify-Hmac-SHA256` base64 HMAC-SHA256 of the body", EventID: "`X-Shopify-Webhook-Id`, else `X-Shopify-Event-Id`"},
	SchemeTwilio: {Set: "`SECRET` (auth token), `PUBLIC_URL`",
		Signature: "`X-Twilio-Signature` base64 HMAC-SHA1 of URL + sorted form params, or of the URL with `bodySHA256` for JSON; default port tried with and without",
		EventID:   "`I-Twilio-Idempotency-Token`, else digest"},
	SchemePaddle: {Set: "`SECRET` (`pdl_ntfset_…`)", Signature: "`Paddle-Signature: ts=…;h1=…` hex HMAC-SHA256 of `ts:body`", EventID: "body `event_id`",
		Tolerance: "5m (Paddle's SDK uses 5s: set `TOLERANCE=5s` to match)"},
	SchemeLinear:   {Set: "`SECRET`", Signature: "`Linear-Signature` hex HMAC-SHA256 of the body; body `webhookTimestamp` (ms)", EventID: "`Linear-Delivery`"},
	SchemeIntercom: {Set: "`SECRET` (client secret)", Signature: "`X-Hub-Signature: sha1=` hex HMAC-SHA1 of the body", EventID: "body `id`"},
	SchemeZoom: {Set: "`SECRET` (secret token)", Signature: "`x-zm-signature: v0=` over `v0:ts:body`, `x-zm-request-timestamp`; answers `endpoint.url_validation`",
		EventID: "digest (none documented)"},
	SchemeSquare: {Set: "`SECRET` (signature key), `PUBLIC_URL`", Signature: "`x-square-hmacsha256-signature` base64 HMAC-SHA256 of URL + body", EventID: "body `event_id`"},
	SchemeSendGrid: {Set: "`PUBLIC_KEY` (base64 DER, P-256)", Signature: "`X-Twilio-Email-Event-Webhook-Signature` ECDSA over `ts+body`, `…-Timestamp`",
		EventID: "digest: a batch of events is one journal event"},
	SchemePagerDuty: {Set: "`SECRET`", Signature: "`X-PagerDuty-Signature: v1=…[,v1=…]` hex HMAC-SHA256 of the body", EventID: "`X-Webhook-Id`"},
	SchemeDiscord: {Set: "`PUBLIC_KEY` (hex ed25519)", Signature: "`X-Signature-Ed25519` over `ts+body`, `X-Signature-Timestamp`; answers PING; replies to interactions",
		EventID: "body `id`"},
	SchemeGitLab: {Set: "`SECRET` (the webhook's secret token)", Signature: "`X-Gitlab-Token` compared in constant time (it signs nothing: use HTTPS)",
		EventID: "`Idempotency-Key` (GitLab 17.4+), else `X-Gitlab-Event-UUID`"},
	// second ring A
	//
	// second ring B
	//
	// second ring C
	//
	// second ring D
	//
	SchemeSNS: {Set: "nothing (AWS signs with its own key); optionally `KEY_HOSTS` (default: AWS's `sns.<region>.amazonaws.com[.cn]`) and `CA_FILE`",
		Signature: "body `Signature`, RSA with SHA1 (`SignatureVersion` 1) or SHA256 (2) over the documented fields, by the certificate at `SigningCertURL` " +
			"(https, allow-listed host, `.pem` path; fetched once a day per URL); confirms `SubscriptionConfirmation` by fetching its `SubscribeURL`; " +
			"raw message delivery refused (400: it carries no signature)",
		EventID:   "body `MessageId` (signed; the same on SNS's retries)",
		Tolerance: "1h on the body's signed `Timestamp` (SNS resends the same signed message for up to an hour)",
		Resign:    "cannot (AWS's key): forwarded as received; a backend that verifies it must not enforce the `Timestamp`'s age (AWS's validators do not)"},
	SchemePubSub: {Set: "`AUDIENCE` (the push subscription's audience); optionally `KEY_HOSTS` (the host serving `/oauth2/v3/certs` instead of `www.googleapis.com`) and `CA_FILE`",
		Signature: "`Authorization: Bearer` Google-signed RS256 token, key by `kid` from Google's JWKS (cached per `max-age`): `iss` accounts.google.com, `aud`, `exp`, `iat`; " +
			"the body is NOT signed (the body guard applies); the service account's `email` is not checked",
		EventID:   "body `message.messageId` (not signed; unique within a topic)",
		Tolerance: "the token's `exp` (at most 1h after `iat`; tokens are reused), with 1m clock skew",
		Resign:    "cannot (Google's key): forwarded as received; a backend that checks the token must not enforce its `exp` (a delivery after a backlog carries an expired one)"},
	SchemeHMAC: {Set: "`SECRET`, `SIGNATURE_HEADER`, optionally `HMAC_ALGORITHM` (`sha256`, `sha512`, `sha1`), `SIGNATURE_ENCODING` (`hex`, `base64`), `SIGNATURE_PREFIX`, `TIMESTAMP_HEADER`, `SIGNED_CONTENT` (template over `{id}`, `{timestamp}`, `{body}`), `ID_HEADER`",
		Signature: "your in-house sender's HMAC", EventID: "`ID_HEADER`, else digest",
		Tolerance: "5m when a timestamp header is set", Resign: "yes when `TIMESTAMP_HEADER` is set (else not needed)"},
	SchemeNone: {Set: "nothing", Signature: "no verification: trusted networks only (warned at start-up)", EventID: "digest", Tolerance: "—"},
}

// SchemeReference is one row of the providers' reference table.
type SchemeReference struct {
	Name string
	SchemeDoc
	// ToleranceText and ResignText are the row's tolerance and re-signing
	// cells; EventType where its type comes from ("none" when it has none).
	ToleranceText, ResignText, EventType string
}

// Reference returns the providers' reference, one row per scheme in the
// registry's order, and the schemes that have no SchemeDoc.
func Reference() (rows []SchemeReference, undocumented []string) {
	for _, s := range registry {
		d, ok := schemeDocs[s.name]
		if !ok {
			undocumented = append(undocumented, s.name)
			continue
		}
		tol := "none"
		if s.tolerance > 0 {
			tol = durationText(s.tolerance)
		}
		rows = append(rows, SchemeReference{Name: s.name, SchemeDoc: d,
			ToleranceText: cmp.Or(d.Tolerance, tol), ResignText: cmp.Or(d.Resign, s.resign), EventType: cmp.Or(s.eventType, "none")})
	}
	return rows, undocumented
}

// durationText writes d as people write it: 5m, 1m, 90s.
func durationText(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return d.String()[:len(d.String())-4]
	case d%time.Minute == 0:
		return d.String()[:len(d.String())-2]
	}
	return d.String()
}
