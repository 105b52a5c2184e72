package verify

import (
	"cmp"
	"strings"
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
	SchemeTypeform: {Set: "`SECRET` (the webhook's secret)", Signature: "`Typeform-Signature: sha256=` base64 HMAC-SHA256 of the body", EventID: "body `event_id`",
		Tolerance: "none (unsigned time)"},
	SchemeRazorpay: {Set: "`SECRET` (the webhook secret, not the API key secret; keep the old one in `SECRET_PREVIOUS` while older events retry)",
		Signature: "`X-Razorpay-Signature` hex HMAC-SHA256 of the body", EventID: "`X-Razorpay-Event-Id`, else digest", Tolerance: "none (unsigned time)"},
	SchemeVercel: {Set: "`SECRET` (the webhook's secret, or the integration's client secret)", Signature: "`x-vercel-signature` hex HMAC-SHA1 of the body",
		EventID: "body `id`", Tolerance: "none (unsigned time)"},
	SchemeBitbucket: {Set: "`SECRET` (the webhook's secret)", Signature: "`X-Hub-Signature: sha256=` hex HMAC-SHA256 of the body",
		EventID: "`X-Request-UUID` (Data Center: `X-Request-Id`), else digest", Tolerance: "none (unsigned time)"},
	SchemeAtlassian: {Set: "`SECRET` (the Jira admin webhook's secret)", Signature: "`X-Hub-Signature: sha256=` hex HMAC-SHA256 of the body",
		EventID: "`X-Atlassian-Webhook-Identifier`, else digest", Tolerance: "none (unsigned time)"},
	SchemeMeta: {Set: "`SECRET` (App Secret), `VERIFY_TOKEN`",
		Signature: "`X-Hub-Signature-256: sha256=` hex HMAC-SHA256 of the body (legacy sha1 refused); answers the GET `hub.challenge` when `hub.verify_token` matches, else 403",
		EventID:   "digest (none sent)", Tolerance: "none (unsigned time)"},
	SchemeSentry: {Set: "`SECRET` (the integration's client secret)", Signature: "`Sentry-Hook-Signature` hex HMAC-SHA256 of the body (`Sentry-Hook-Timestamp` is not signed: ignored)",
		EventID: "`Request-ID`, else digest", Tolerance: "none (unsigned time)"},
	SchemePaystack: {Set: "`SECRET` (the secret API key, `sk_…`)", Signature: "`x-paystack-signature` hex HMAC-SHA512 of the body",
		EventID: "digest (none documented)", Tolerance: "none (unsigned time)"},
	SchemeTwitter: {Set: "`SECRET` (the app's consumer secret)",
		Signature: "`x-twitter-webhooks-signature: sha256=` base64 HMAC-SHA256 of a JSON object body; answers the GET `crc_token` (`A-Za-z0-9-_=+/`, ≤ 128 bytes)",
		EventID:   "digest (none sent)", Tolerance: "none (unsigned time)"},
	//
	SchemeTwitch: {Set: "`SECRET` (the subscription's 10–100 character secret; keep the old one in `SECRET_PREVIOUS` while its subscriptions live)",
		Signature: "`Twitch-Eventsub-Message-Signature: sha256=` hex HMAC-SHA256 of `id+timestamp+body` (RFC 3339 timestamp); answers `webhook_callback_verification`",
		EventID:   "`Twitch-Eventsub-Message-Id`"},
	SchemeCalendly: {Set: "`SECRET` (the webhook signing key)", Signature: "`Calendly-Webhook-Signature: t=…,v1=…` hex HMAC-SHA256 of `t.body`",
		EventID: "digest (Calendly sends no delivery id)", Tolerance: "3m (Calendly's sample verifier)"},
	SchemeZendesk: {Set: "`SECRET` (the webhook's signing secret, verbatim)",
		Signature: "`X-Zendesk-Webhook-Signature` base64 HMAC-SHA256 of `timestamp+body`, `X-Zendesk-Webhook-Signature-Timestamp` (RFC 3339); POST webhooks only",
		EventID:   "body `id` (event subscriptions), else digest (trigger and automation webhooks)"},
	SchemeWorkOS: {Set: "`SECRET` (the endpoint's secret)", Signature: "`WorkOS-Signature: t=…, v1=…` hex HMAC-SHA256 of `t.body`, `t` in milliseconds",
		EventID: "body `id`", Tolerance: "3m (WorkOS's SDKs)"},
	SchemeHubSpot: {Set: "`SECRET` (the app's client secret), `PUBLIC_URL` (the target URL, without query)",
		Signature: "`X-HubSpot-Signature-v3` base64 HMAC-SHA256 of `METHOD+URL+body+timestamp` (the URL's listed escapes decoded), `X-HubSpot-Request-Timestamp` (ms); v1 and v2 are never accepted",
		EventID:   "digest: a batch of up to 100 events is one journal event (a retry, its `attemptNumber` raised, is another)",
		Resign:    "yes, over `POST` + `PUBLIC_URL` (no query): the backend must validate against `PUBLIC_URL`, not its own URL"},
	SchemeMailgun: {Set: "`SECRET` (the HTTP webhook signing key; the primary account's also accepts `parent-signature`)",
		Signature: "body `signature.signature` hex HMAC-SHA256 of `timestamp+token` (legacy: form fields): the event data is NOT signed",
		EventID:   "body `event-data.id` (not signed); legacy forms: digest",
		Tolerance: "9h (Mailgun retries for 8 hours and may resend the first signature)"},
	SchemePostmark: {Set: "`BASIC_AUTH` (the `user:password` written into the webhook URL as `https://user:password@host/…`; no `SECRET`)",
		Signature: "`Authorization: Basic …` compared whole, in constant time (Postmark signs nothing: use HTTPS)",
		EventID:   "`Bounce`/`SpamComplaint`: `RecordType:ID`; `Delivery`: `Delivery:MessageID:Recipient`; else digest (opens and clicks repeat per message)"},
	SchemeTelegram: {Set: "`SECRET` (the `secret_token` given to `setWebhook`: 1–256 of `A-Z a-z 0-9 _ -`)",
		Signature: "`X-Telegram-Bot-Api-Secret-Token` compared in constant time (Telegram signs nothing: use HTTPS)", EventID: "body `update_id` (not signed)"},
	SchemeOkta: {Set: "`SECRET` (the hook's `Authorization` header value; the hook must use the header `Authorization`)",
		Signature: "`Authorization` compared in constant time (Okta signs nothing: use HTTPS); answers the verification GET (`X-Okta-Verification-Challenge` → `{\"verification\":…}`) after the same check",
		EventID:   "body `eventId` (not signed)"},
	SchemeMSGraph: {Set: "`SECRET` (the subscription's `clientState`, at most 128 characters)",
		Signature: "every `value[].clientState` compared in constant time (rich notifications' `validationTokens` are not checked); answers `POST ?validationToken=` with the token as `text/plain`",
		EventID:   "digest (notifications carry no delivery id)"},
	SchemeAdyen: {Set: "`SECRET` (the webhook's HMAC key, 64 hex characters; the previous one in `SECRET_PREVIOUS` while retries drain)",
		Signature: "each `NotificationRequestItem`'s `additionalData.hmacSignature`: base64 HMAC-SHA256 (hex-decoded key) of `pspReference:originalReference:merchantAccountCode:merchantReference:value:currency:eventCode:success`; every item must verify; answers `[accepted]`",
		EventID:   "`pspReference:eventCode` of a single item; digest for a batch of several"},
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
	// cells; EventType where its type comes from ("none" when it has none);
	// Handshake what the scheme answers itself ("—" when nothing): its
	// declared challenges, then what its own Verify answers.
	ToleranceText, ResignText, EventType, Handshake string
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
		var hs []string
		for _, ch := range s.challenges {
			hs = append(hs, ch.doc)
		}
		if s.handshake != "" {
			hs = append(hs, s.handshake)
		}
		rows = append(rows, SchemeReference{Name: s.name, SchemeDoc: d,
			ToleranceText: cmp.Or(d.Tolerance, tol), ResignText: cmp.Or(d.Resign, s.resign), EventType: cmp.Or(s.eventType, "none"),
			Handshake: cmp.Or(strings.Join(hs, "; "), "—")})
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
