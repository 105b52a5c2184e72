package verify

import (
	"slices"
	"strings"
	"time"
)

// schemeSpec is one scheme's entry in the registry: everything else that
// depends on the scheme's name (KnownSchemes, DefaultTolerance,
// RequiredFields, NewProvider) is derived from it.
type schemeSpec struct {
	name string
	// tolerance is the default timestamp tolerance (DefaultTolerance); 0
	// for schemes without a signed timestamp.
	tolerance time.Duration
	// needs lists the settings the scheme cannot do without, checked
	// before build is called.
	needs []requirement
	// build makes the scheme from a checked configuration; tolerance is
	// the configured one or the default. Its errors are FieldErrors.
	build func(cfg ProviderConfig, tolerance time.Duration) (Scheme, error)
	// resign says whether its signatures can be made afresh when
	// forwarding (ResignSupport); a scheme built from an entry saying
	// ResignYes implements resigner (hmac: with a timestamp header).
	resign string
	// eventType says where the scheme finds an event's type, as the
	// providers' reference (docs/providers.md) says it ("" when it has none: a type filter
	// would have nothing to match).
	eventType string
	// unsignedID: the event id comes from a header the signature does not
	// cover (IDSigned).
	unsignedID bool
	// challenges are the handshakes a sender makes on requests of their
	// own, answered from this data before the scheme sees the request
	// (challenge.go).
	challenges []challenge
	// handshake says, for the docs, which handshake the scheme answers
	// within its own Verify (a signed body: Slack's url_verification,
	// Twitch's webhook_callback_verification), or a fixed reply it gives.
	handshake string
}

// requirement is a setting a scheme needs; what says what to put there.
type requirement struct {
	field Field
	what  string
}

// needSecret is the requirement of every scheme that signs with a secret.
var needSecret = requirement{field: FieldSecrets}

// defaultTol is the usual default tolerance (see registry).
const defaultTol = 5 * time.Minute

// registry lists the schemes in the order KnownSchemes returns them.
// Default tolerances:
//   - 5 minutes: Standard Webhooks, Svix, stripe-go and Slack's documented
//     defaults; also Paddle (its SDK helpers use 5 s, too tight for real
//     clock skew: set WHGUARD_<NAME>_TOLERANCE=5s to match), Zoom, SendGrid,
//     Discord and generic hmac with a timestamp header, whose senders
//     document no bound;
//   - 1 minute: Linear (its SDK's bound on webhookTimestamp); pubsub, where
//     it is the clock skew allowed around the token's own iat and exp;
//   - 1 hour: sns, whose retries resend the same signed Timestamp for up
//     to an hour;
//   - Twitch 10 minutes (its docs), WorkOS 3 minutes (its SDKs), Calendly
//     3 minutes (its docs' sample), Zendesk and HubSpot 5 minutes, Mailgun
//     9 hours (its retries may carry their first signature for 8 hours):
//     see each scheme's constant.
var registry = []schemeSpec{
	{name: SchemeStandard, eventType: "body `type`", resign: ResignYes, tolerance: defaultTol, needs: []requirement{needSecret}, build: buildStandard},
	{name: SchemeSvix, eventType: "body `type`", resign: ResignYes, tolerance: defaultTol, needs: []requirement{needSecret}, build: buildStandard},
	{name: SchemeStripe, eventType: "body `type`", resign: ResignYes, tolerance: defaultTol, needs: []requirement{needSecret}, build: buildStripe},
	{name: SchemeGitHub, unsignedID: true, eventType: "header `X-GitHub-Event`", resign: ResignNotNeeded, needs: []requirement{needSecret}, build: buildGitHub},
	{name: SchemeSlack, handshake: "body `url_verification` (signed) → its `challenge`", eventType: "body `event.type`, else `type`", resign: ResignYes, tolerance: defaultTol, needs: []requirement{needSecret}, build: newSlackScheme},
	{name: SchemeShopify, unsignedID: true, eventType: "header `X-Shopify-Topic`", resign: ResignNotNeeded, needs: []requirement{needSecret}, build: withoutTolerance(newShopifyScheme)},
	{name: SchemeTwilio, unsignedID: true, resign: ResignNotNeeded, needs: []requirement{needSecret, {FieldPublicURL, "the webhook URL configured in Twilio"}},
		build: withoutTolerance(newTwilioScheme)},
	{name: SchemePaddle, eventType: "body `event_type`", resign: ResignYes, tolerance: defaultTol, needs: []requirement{needSecret}, build: newPaddleScheme},
	{name: SchemeLinear, unsignedID: true, eventType: "header `Linear-Event`, else body `type`", resign: ResignBodyTimestamp, tolerance: time.Minute, needs: []requirement{needSecret}, build: newLinearScheme},
	{name: SchemeIntercom, eventType: "body `topic`", resign: ResignNotNeeded, needs: []requirement{needSecret}, build: withoutTolerance(newIntercomScheme)},
	{name: SchemeZoom, handshake: "body `endpoint.url_validation` (signed) → `plainToken` and its HMAC", eventType: "body `event`", resign: ResignYes, tolerance: defaultTol, needs: []requirement{needSecret}, build: newZoomScheme},
	{name: SchemeSquare, eventType: "body `type`", resign: ResignNotNeeded, needs: []requirement{needSecret, {FieldPublicURL, "the Square notification URL"}},
		build: withoutTolerance(newSquareScheme)},
	{name: SchemeSendGrid, resign: ResignPublicKey, tolerance: defaultTol,
		needs: []requirement{{FieldPublicKey, "base64 DER of the SendGrid ECDSA P-256 verification key"}}, build: newSendGridScheme},
	{name: SchemePagerDuty, unsignedID: true, eventType: "body `event.event_type`", resign: ResignNotNeeded, needs: []requirement{needSecret}, build: withoutTolerance(newPagerDutyScheme)},
	{name: SchemeDiscord, handshake: "PING (signed) → PONG; interactions get a deferred response", eventType: "`interaction.` + body `type` (a number)", resign: ResignPublicKey, tolerance: defaultTol,
		needs: []requirement{{FieldPublicKey, "hex ed25519 key of the Discord application"}}, build: newDiscordScheme},
	{name: SchemeGitLab, unsignedID: true, eventType: "header `X-Gitlab-Event`", resign: ResignNotNeeded, needs: []requirement{needSecret}, build: withoutTolerance(newGitLabScheme)},
	// HMACs of the body, no timestamp:
	{name: SchemeTypeform, eventType: "body `event_type`", resign: ResignNotNeeded, needs: []requirement{needSecret}, build: typeformSpec.build},
	{name: SchemeRazorpay, unsignedID: true, eventType: "body `event`", resign: ResignNotNeeded, needs: []requirement{needSecret}, build: razorpaySpec.build},
	{name: SchemeVercel, eventType: "body `type`", resign: ResignNotNeeded, needs: []requirement{needSecret}, build: vercelSpec.build},
	{name: SchemeBitbucket, unsignedID: true, eventType: "header `X-Event-Key`", resign: ResignNotNeeded, needs: []requirement{needSecret}, build: bitbucketSpec.build},
	{name: SchemeAtlassian, unsignedID: true, eventType: "body `webhookEvent`", resign: ResignNotNeeded, needs: []requirement{needSecret}, build: atlassianSpec.build},
	{name: SchemeMeta, eventType: "body `object`, + `.` + `entry[].changes[].field` when they all agree", resign: ResignNotNeeded, challenges: metaChallenges,
		needs: []requirement{needSecret, {FieldVerifyToken, "the Verify Token chosen in the Meta app dashboard"}}, build: metaSpec.build},
	{name: SchemeSentry, unsignedID: true, eventType: "header `Sentry-Hook-Resource` + `.` + body `action`", resign: ResignNotNeeded, needs: []requirement{needSecret}, build: sentrySpec.build},
	{name: SchemePaystack, eventType: "body `event`", resign: ResignNotNeeded, needs: []requirement{needSecret}, build: paystackSpec.build},
	{name: SchemeTwitter, eventType: "the body's top-level `…_events` key", resign: ResignNotNeeded, challenges: twitterChallenges, needs: []requirement{needSecret}, build: twitterSpec.build},
	// Signed timestamps:
	{name: SchemeTwitch, handshake: "`Twitch-Eventsub-Message-Type: webhook_callback_verification` (signed) → its `challenge`, verbatim, as text/plain",
		eventType: "header `Twitch-Eventsub-Subscription-Type`", resign: ResignYes, tolerance: twitchTolerance, needs: []requirement{needSecret}, build: newTwitchScheme},
	{name: SchemeCalendly, eventType: "body `event`", resign: ResignYes, tolerance: calendlyTolerance, needs: []requirement{needSecret}, build: newCalendlyScheme},
	{name: SchemeZendesk, eventType: "body `type` (event subscriptions: `zen:event-type:…`)", resign: ResignYes, tolerance: defaultTol, needs: []requirement{needSecret},
		build: newZendeskScheme},
	{name: SchemeWorkOS, eventType: "body `event`", resign: ResignYes, tolerance: workosTolerance, needs: []requirement{needSecret}, build: newWorkOSScheme},
	{name: SchemeHubSpot, eventType: "the first event's `subscriptionType`", resign: ResignYes, tolerance: defaultTol,
		needs: []requirement{needSecret, {FieldPublicURL, "the target URL set in the HubSpot app, without query"}}, build: newHubSpotScheme},
	{name: SchemeMailgun, unsignedID: true, eventType: "body `event-data.event` (legacy form: `event`)", resign: ResignBodyTimestamp, tolerance: mailgunTolerance,
		needs: []requirement{needSecret}, build: newMailgunScheme},
	// Credentials that are not signatures, and Adyen's per-item HMAC:
	{name: SchemePostmark, unsignedID: true, eventType: "body `RecordType`", resign: ResignNotNeeded,
		needs: []requirement{{FieldBasicAuth, "the user:password written into the Postmark webhook URL"}}, build: withoutTolerance(newPostmarkScheme)},
	{name: SchemeTelegram, unsignedID: true, eventType: "the Update's one optional field present (`message`, `callback_query`, …)", resign: ResignNotNeeded,
		needs: []requirement{needSecret}, build: withoutTolerance(newTelegramScheme)},
	{name: SchemeOkta, unsignedID: true, eventType: "body `data.events[0].eventType`", resign: ResignNotNeeded, needs: []requirement{needSecret},
		challenges: []challenge{oktaChallenge}, build: withoutTolerance(newOktaScheme)},
	{name: SchemeMSGraph, eventType: "body `value[0].lifecycleEvent`, else `value[0].changeType`", resign: ResignNotNeeded, needs: []requirement{needSecret},
		challenges: []challenge{msGraphChallenge}, build: withoutTolerance(newMSGraphScheme)},
	{name: SchemeAdyen, eventType: "body `notificationItems[0].NotificationRequestItem.eventCode`", resign: ResignNotNeeded, needs: []requirement{needSecret},
		handshake: "none; every verified notification, duplicates included, is answered 200 `[accepted]` (`text/plain`)", build: withoutTolerance(newAdyenScheme)},
	// Keys fetched from the provider:
	{name: SchemeSNS, handshake: "`SubscriptionConfirmation` (signed): whguard fetches its `SubscribeURL` (allow-listed host, https), answers 200 `{}`; `UnsubscribeConfirmation` (signed): 200 `{}`",
		eventType: "body `TopicArn` (notifications)", resign: ResignPublicKey, tolerance: time.Hour, build: newSNSScheme},
	{name: SchemePubSub, unsignedID: true, eventType: "body `message.attributes.eventType` when the publisher sets one (Cloud Storage notifications), else none",
		resign: ResignPublicKey, tolerance: time.Minute, needs: []requirement{{FieldAudience, "the push subscription's audience; Google's default is the push endpoint URL"}}, build: newPubSubScheme},
	{name: SchemeHMAC, eventType: "body `type`", resign: ResignYes, tolerance: defaultTol,
		needs: []requirement{needSecret, {FieldSignatureHeader, "the name of the header carrying the signature"}}, build: newHMACScheme},
	{name: SchemeNone, eventType: "body `type`", resign: ResignNotNeeded, build: func(ProviderConfig, time.Duration) (Scheme, error) { return noneScheme{}, nil }},
}

// lookupScheme returns the registry entry of name.
func lookupScheme(name string) (*schemeSpec, bool) {
	i := slices.IndexFunc(registry, func(s schemeSpec) bool { return s.name == name })
	if i < 0 {
		return nil, false
	}
	return &registry[i], true
}

// EventTypeSource says where a scheme finds an event's type: a body field
// or a header, e.g. "body `type`" or "header `X-GitHub-Event`"; "" for a
// scheme that has none (twilio, sendgrid) and for unknown names.
func EventTypeSource(scheme string) string {
	if s, ok := lookupScheme(scheme); ok {
		return s.eventType
	}
	return ""
}

// KnownSchemes returns the scheme names NewProvider accepts, in a new slice.
func KnownSchemes() []string {
	names := make([]string, len(registry))
	for i, s := range registry {
		names[i] = s.name
	}
	return names
}

// DefaultTolerance returns the timestamp tolerance a scheme uses when its
// ProviderConfig leaves Tolerance zero: 5 minutes for most schemes that
// sign a timestamp (the senders' documented bound, or none documented), the
// sender's own bound where it documents another (Linear 1 minute, Twitch 10,
// WorkOS and Calendly 3), 9 hours for Mailgun (its retries); 0 for schemes
// without a signed timestamp and for unknown names.
func DefaultTolerance(scheme string) time.Duration {
	if s, ok := lookupScheme(scheme); ok {
		return s.tolerance
	}
	return 0
}

// RequiredFields returns the settings a scheme cannot do without (nil for
// an unknown name), in a new slice: FieldSecrets for the HMAC and token
// schemes, FieldPublicKey for the public-key ones, FieldPublicURL for those
// that sign the URL, FieldSignatureHeader for hmac.
func RequiredFields(scheme string) []Field {
	s, ok := lookupScheme(scheme)
	if !ok {
		return nil
	}
	fields := make([]Field, len(s.needs))
	for i, r := range s.needs {
		fields[i] = r.field
	}
	return fields
}

// missing reports each required setting cfg leaves empty (blank for the
// ones that are not secrets: a blank key, URL or header name is never
// meant).
func (s *schemeSpec) missing(cfg ProviderConfig) []error {
	var errs []error
	for _, r := range s.needs {
		var value string
		switch r.field {
		case FieldSecrets:
			if len(cfg.Secrets) == 0 {
				errs = append(errs, fieldErrorf(FieldSecrets, "no secret configured"))
			}
			continue
		case FieldPublicKey:
			value = cfg.PublicKey
		case FieldPublicURL:
			value = cfg.PublicURL
		case FieldSignatureHeader:
			value = cfg.HMAC.SignatureHeader
		case FieldVerifyToken:
			value = cfg.VerifyToken
		case FieldBasicAuth:
			value = cfg.BasicAuth
		case FieldAudience:
			value = cfg.Audience
		}
		if strings.TrimSpace(value) == "" {
			errs = append(errs, fieldErrorf(r.field, "%s (%s) is required", fieldLabels[r.field], r.what))
		}
	}
	return errs
}

// fieldLabels names the settings in messages.
var fieldLabels = map[Field]string{
	FieldPublicKey:       "public key",
	FieldPublicURL:       "public URL",
	FieldSignatureHeader: "HMAC signature header",
	FieldVerifyToken:     "verify token",
	FieldBasicAuth:       "basic auth",
	FieldAudience:        "audience",
}

// withoutTolerance adapts the constructor of a scheme that signs no
// timestamp.
func withoutTolerance(build func(ProviderConfig) (Scheme, error)) func(ProviderConfig, time.Duration) (Scheme, error) {
	return func(cfg ProviderConfig, _ time.Duration) (Scheme, error) { return build(cfg) }
}

func buildStandard(cfg ProviderConfig, tolerance time.Duration) (Scheme, error) {
	keys, err := secretKeys(cfg.Secrets, decodeStandardSecret)
	if err != nil {
		return nil, err
	}
	return newStandardScheme(keys, tolerance, cfg.Scheme == SchemeSvix), nil
}

func buildStripe(cfg ProviderConfig, tolerance time.Duration) (Scheme, error) {
	keys, err := secretKeys(cfg.Secrets, decodeStripeSecret)
	if err != nil {
		return nil, err
	}
	return &stripeScheme{keys: keys, tolerance: tolerance}, nil
}

func buildGitHub(cfg ProviderConfig, _ time.Duration) (Scheme, error) {
	keys, err := secretKeys(cfg.Secrets, rawSecret)
	if err != nil {
		return nil, err
	}
	return &githubScheme{keys: keys}, nil
}
