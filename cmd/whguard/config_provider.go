package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/whguard/whguard/internal/catchup"
	"github.com/whguard/whguard/proxy"
	"github.com/whguard/whguard/verify"
)

// providerEnv is one provider's variables, WHGUARD_<NAME>_*.
type providerEnv struct {
	Scheme         string `env:"SCHEME"`
	Secret         string `env:"SECRET"`
	SecretPrevious string `env:"SECRET_PREVIOUS"`
	SecretFile     string `env:"SECRET_FILE"`
	// BackendSecret, or the first non-blank line of BackendSecretFile, is
	// the secret deliveries are re-signed with instead of the sender's
	// (see backendSecret).
	BackendSecret     string        `env:"BACKEND_SECRET"`
	BackendSecretFile string        `env:"BACKEND_SECRET_FILE"`
	Path              string        `env:"PATH"`
	Tolerance         time.Duration `env:"TOLERANCE"`
	IDHeader          string        `env:"ID_HEADER"`
	MaxBodyBytes      int64         `env:"MAX_BODY_BYTES"`
	BackendURL        string        `env:"BACKEND_URL"`
	ForwardPath       string        `env:"FORWARD_PATH"`
	// Resign is nil when unset: then on exactly when the scheme can
	// re-sign (providerConfig.resign holds the outcome).
	Resign *bool `env:"RESIGN"`
	// BodyGuard is nil when unset: then on exactly when the provider's
	// event id is not signed (providerConfig.bodyGuard holds the outcome).
	BodyGuard    *bool `env:"BODY_GUARD"`
	PreserveHost bool  `env:"PRESERVE_HOST"`
	// RateLimit and RateBurst limit this provider's deliveries, on top of
	// the backend's limit.
	RateLimit string `env:"RATE_LIMIT"`
	RateBurst *int   `env:"RATE_BURST"`
	// EventTypes is the event-type filter: a comma list of types, *
	// wildcards allowed; "" forwards every type.
	EventTypes string `env:"EVENT_TYPES"`
	// Mode is async (the default) or sync: the sender gets the backend's
	// answer to the first attempt when it comes within SyncTimeout.
	Mode string `env:"MODE"`
	// SyncTimeout is nil when unset (defaultSyncTimeout), so that an
	// explicit 0 is refused rather than taken as the default.
	SyncTimeout *time.Duration `env:"SYNC_TIMEOUT"`
	// OrderKey and OrderOnDead: per-key delivery order (proxy.OrderKey).
	OrderKey    string `env:"ORDER_KEY"`
	OrderOnDead string `env:"ORDER_ON_DEAD"`

	// Catch-up from the provider's API (internal/catchup): off or on,
	// and its credential, API, hook or endpoint, interval and window.
	Catchup          string `env:"CATCHUP"`
	CatchupToken     string `env:"CATCHUP_TOKEN"`
	CatchupTokenFile string `env:"CATCHUP_TOKEN_FILE"`
	CatchupAPIURL    string `env:"CATCHUP_API_URL"`
	CatchupHook      string `env:"CATCHUP_HOOK"`
	CatchupEndpoint  string `env:"CATCHUP_ENDPOINT"`
	// CatchupInterval and CatchupWindow are nil when unset (the
	// defaults), so that an explicit 0 is refused.
	CatchupInterval *time.Duration `env:"CATCHUP_INTERVAL"`
	CatchupWindow   *time.Duration `env:"CATCHUP_WINDOW"`

	PublicKey         string `env:"PUBLIC_KEY"`
	PublicKeyFile     string `env:"PUBLIC_KEY_FILE"`
	PublicURL         string `env:"PUBLIC_URL"`
	HMACAlgorithm     string `env:"HMAC_ALGORITHM"`
	SignatureHeader   string `env:"SIGNATURE_HEADER"`
	SignatureEncoding string `env:"SIGNATURE_ENCODING"`
	SignaturePrefix   string `env:"SIGNATURE_PREFIX"`
	TimestampHeader   string `env:"TIMESTAMP_HEADER"`
	SignedContent     string `env:"SIGNED_CONTENT"`
	// Second-ring settings: a GET handshake's token (meta), a basic-auth
	// credential (postmark), where keys may be fetched from and which CAs
	// to trust for them (sns, pubsub), and the audience of a pubsub token.
	VerifyToken string   `env:"VERIFY_TOKEN"`
	BasicAuth   string   `env:"BASIC_AUTH"`
	KeyHosts    []string `env:"KEY_HOSTS"`
	CAFile      string   `env:"CA_FILE"`
	Audience    string   `env:"AUDIENCE"`
	// TopicARNs and ServiceAccounts name the only senders accepted by sns
	// and pubsub (anyone can subscribe an endpoint otherwise).
	TopicARNs       []string `env:"TOPIC_ARNS"`
	ServiceAccounts []string `env:"SERVICE_ACCOUNTS"`
	// RotationOverlap is how long the values a watched file
	// (SECRET_FILE, PUBLIC_KEY_FILE, BACKEND_SECRET_FILE) held before it
	// changed stay accepted; nil when unset (defaultRotationOverlap).
	RotationOverlap *time.Duration `env:"ROTATION_OVERLAP"`
}

// providerConfig is a parsed, validated provider.
type providerConfig struct {
	name   string // lower case, as in WHGUARD_PROVIDERS
	prefix string // WHGUARD_<NAME>_
	env    providerEnv
	// provider is built during validation so a bad secret fails start-up.
	provider *verify.Provider
	// verifyCfg is what provider was built from (its secrets included):
	// `whguard trigger` signs as the sender with it.
	verifyCfg verify.ProviderConfig
	// resign: forward with the signature made afresh (RESIGN, defaulting
	// to provider.CanResign()).
	resign bool
	// bodyGuard: the same signed body under a fresh event id is taken as
	// a replay, not a new event (BODY_GUARD, defaulting to
	// !provider.IDSigned()).
	bodyGuard bool
	// order is OrderKey and OrderOnDead, parsed.
	order proxy.OrderKey
	// eventTypes is EventTypes, parsed (nil: no filter).
	eventTypes []string
	// sync is MODE=sync; syncTimeout is how long a sync-mode sender
	// waits for the backend's answer (SYNC_TIMEOUT, else the default); 0
	// in async mode.
	sync        bool
	syncTimeout time.Duration
	// catchup is the provider's catch-up, nil when CATCHUP is off.
	catchup *catchup.Config
	// keys are the credentials the provider was built with: the secrets
	// of SECRET, SECRET_FILE and SECRET_PREVIOUS (secretsByVar, in that
	// order), the public keys and the backend secret; the watched files
	// replace their part of them (watchedFiles). overlap is
	// ROTATION_OVERLAP or its default.
	keys         verify.Keys
	secretsByVar [3][]string
	overlap      time.Duration
}

// validateMode reads MODE and SYNC_TIMEOUT into p.sync and p.syncTimeout.
func (p *providerConfig) validateMode(forwardTimeout time.Duration, ps *problems) (warnings []string) {
	switch p.env.Mode {
	case "", "async":
		if p.env.SyncTimeout != nil {
			warnings = append(warnings, fmt.Sprintf("%sSYNC_TIMEOUT has no effect unless %sMODE=sync", p.prefix, p.prefix))
		}
		return warnings
	case "sync":
		if ps.failed(p.prefix + "SYNC_TIMEOUT") {
			return warnings // not a duration: already reported
		}
	default:
		ps.addf(p.prefix+"MODE", "%q is not a mode; expected async (the default) or sync", p.env.Mode)
		return warnings
	}
	if p.env.Scheme == verify.SchemeDiscord {
		// whguard itself answers Discord interactions (a deferred
		// response), within Discord's 3 s.
		ps.addf(p.prefix+"MODE", "sync does not apply to scheme discord: whguard answers its interactions itself; leave it unset")
		return warnings
	}
	p.sync, p.syncTimeout = true, proxy.DefaultSyncTimeout
	if p.env.SyncTimeout != nil {
		p.syncTimeout = *p.env.SyncTimeout // checked with the route
	}
	if forwardTimeout > 0 && p.syncTimeout > forwardTimeout {
		warnings = append(warnings, fmt.Sprintf("%sSYNC_TIMEOUT (%s) is longer than WHGUARD_FORWARD_TIMEOUT (%s): the first attempt is cut at the latter",
			p.prefix, p.syncTimeout, forwardTimeout))
	}
	return warnings
}

// validate reads one provider's variables and builds its verify.Provider
// (p.provider stays nil when it cannot be built), reporting every problem
// to ps and returning the warnings. Its route, target and limit are
// checked by their components (buildComponents).
func (p *providerConfig) validate(c *config, ps *problems) (warnings []string) {
	if p.env.Path == "" {
		p.env.Path = "/webhooks/" + p.name
	}
	p.eventTypes = p.parseEventTypes(ps)
	warnings = append(warnings, p.validateMode(c.ForwardTimeout, ps)...)
	p.order = p.validateOrder(ps)
	warnings = append(warnings, p.catchupSettings(ps)...)
	warnings = append(warnings, p.validateOverlap(ps)...)
	secrets, from, secretWarnings, ok := p.loadSecrets(ps)
	warnings = append(warnings, secretWarnings...)
	publicKeys, keysOK := p.loadPublicKeys(ps)
	ok = ok && keysOK
	for _, v := range []struct{ key, value string }{{"VERIFY_TOKEN", p.env.VerifyToken}, {"BASIC_AUTH", p.env.BasicAuth}} {
		if isPlaceholder(v.value) {
			ps.addf(p.prefix+v.key, "%s", placeholderProblem)
			ok = false
		}
	}
	if !ok {
		return warnings
	}
	backendSecret, backendVar, backendWarnings := p.backendSecret(ps)
	warnings = append(warnings, backendWarnings...)
	p.keys = verify.Keys{Secrets: secrets, PublicKeys: publicKeys}
	if backendSecret != "" {
		p.keys.BackendSecrets = []string{backendSecret}
	}
	for i, v := range from {
		k := slices.Index([]string{"SECRET", "SECRET_FILE", "SECRET_PREVIOUS"}, v)
		p.secretsByVar[k] = append(p.secretsByVar[k], secrets[i])
	}
	var (
		publicKey    string
		previousKeys []string
	)
	if len(publicKeys) > 0 {
		publicKey, previousKeys = publicKeys[0], publicKeys[1:]
	}
	p.verifyCfg = verify.ProviderConfig{
		Name: p.name, Scheme: p.env.Scheme, Secrets: secrets, BackendSecret: backendSecret,
		Tolerance: p.env.Tolerance, IDHeader: p.env.IDHeader,
		PublicKey: publicKey, PublicURL: p.env.PublicURL,
		HMAC: verify.HMACConfig{
			Algorithm: p.env.HMACAlgorithm, SignatureHeader: p.env.SignatureHeader,
			Encoding: p.env.SignatureEncoding, Prefix: p.env.SignaturePrefix,
			TimestampHeader: p.env.TimestampHeader, SignedContent: p.env.SignedContent,
		},
		VerifyToken: p.env.VerifyToken, BasicAuth: p.env.BasicAuth,
		KeyHosts: p.env.KeyHosts, CAFile: p.env.CAFile, Audience: p.env.Audience,
		TopicARNs: p.env.TopicARNs, ServiceAccounts: p.env.ServiceAccounts,
		PreviousPublicKeys: previousKeys,
	}
	prov, err := verify.NewProvider(p.verifyCfg)
	if err == nil {
		p.provider = prov
		p.resign = p.validateResign(ps, backendVar)
		p.bodyGuard = !prov.IDSigned()
		if p.env.BodyGuard != nil {
			p.bodyGuard = *p.env.BodyGuard
		}
		return warnings
	}
	// verify's errors name their field and never contain a secret or key.
	fes := verify.FieldErrors(err)
	if len(fes) == 0 {
		ps.addf(p.prefix+"SCHEME", "%v", err)
	}
	for _, fe := range fes {
		switch {
		case fe.Field == verify.FieldSecrets && len(secrets) == 0:
			ps.addf(p.prefix+"SECRET", "not set (nor %sSECRET_FILE); scheme %s needs a secret", p.prefix, p.env.Scheme)
		case fe.Field == verify.FieldSecrets && fe.Index < len(from):
			ps.addf(p.prefix+from[fe.Index], "%v", fe)
		case fe.Field == verify.FieldBackendSecret:
			ps.addf(p.prefix+backendVar, "%s", fe.Message(func(f string) string { return p.prefix + verifyVars[f] }))
		case fe.Field == verify.FieldPublicKey && p.env.PublicKeyFile != "":
			ps.addf(p.prefix+"PUBLIC_KEY_FILE", "%v", fe)
		default:
			ps.addf(p.prefix+verifyVars[fe.Field], "%v", fe)
		}
	}
	return warnings
}

// parseEventTypes reads EVENT_TYPES: a comma list of event types in which
// * stands for any run of characters (invoice.*, *.failed), each matched
// against the whole type, case-sensitively, as the API's type= filter
// does. Space around an item is dropped; the route checks each item
// (proxy.Route). A filter on a scheme that reports no event type is
// refused: it would silently let everything through.
func (p *providerConfig) parseEventTypes(ps *problems) []string {
	if strings.TrimSpace(p.env.EventTypes) == "" {
		return nil
	}
	key := p.prefix + "EVENT_TYPES"
	if p.env.Scheme != "" && verify.EventTypeSource(p.env.Scheme) == "" && slices.Contains(verify.KnownSchemes(), p.env.Scheme) {
		ps.addf(key, "scheme %s reports no event type, so there is nothing to filter on; leave it unset", p.env.Scheme)
		return nil
	}
	var out []string
	for _, item := range strings.Split(p.env.EventTypes, ",") {
		out = append(out, strings.TrimSpace(item)) // each checked with the route
	}
	return out
}

// validateOrder parses ORDER_KEY and ORDER_ON_DEAD.
func (p *providerConfig) validateOrder(ps *problems) proxy.OrderKey {
	k, err := proxy.ParseOrderKey(p.env.OrderKey)
	if err != nil {
		ps.addf(p.prefix+"ORDER_KEY", "%v", err)
	}
	switch p.env.OrderOnDead {
	case "", "skip":
	case "block":
		k.Block = true
	default:
		ps.addf(p.prefix+"ORDER_ON_DEAD", "%q: expected skip (a dead event releases its key) or block (its key waits until it is replayed or skipped)", p.env.OrderOnDead)
	}
	if p.env.OrderOnDead != "" && !k.On() && err == nil {
		ps.addf(p.prefix+"ORDER_ON_DEAD", "set without %sORDER_KEY: there is no key to hold", p.prefix)
	}
	return k
}

// secrets gathers the provider's secrets, current first: SECRET, then each
// non-blank line of SECRET_FILE, then SECRET_PREVIOUS, each without
// surrounding whitespace (see loadSecrets).
func (p *providerConfig) secrets() ([]string, error) {
	var ps problems
	out, _, _, _ := p.loadSecrets(&ps)
	return out, ps.err()
}

// loadSecrets returns the secrets (see secrets), for each the variable it
// came from (after the prefix), and a warning per variable whose secret
// had surrounding whitespace; ok is false when a problem was reported.
//
// Whitespace is removed, not kept: a secret that starts or ends with a
// space, tab or newline is almost never meant. It comes from a file that
// ends with a newline (`echo secret > file`, then `kubectl create secret
// --from-file` exposed as an environment variable), a line with trailing
// spaces, or a copy-paste, and would make every signature fail. The
// warning names the variable, never the value.
func (p *providerConfig) loadSecrets(ps *problems) (out, from, warnings []string, ok bool) {
	trimmed := func(key, value string) string {
		t := strings.TrimSpace(value)
		if t != value && t != "" {
			warnings = append(warnings, fmt.Sprintf("%s%s: whitespace around the secret removed (a trailing newline from a file or a copy-paste?)", p.prefix, key))
		}
		return t
	}
	if p.env.Secret != "" {
		secret := trimmed("SECRET", p.env.Secret)
		if secret == "" {
			ps.addf(p.prefix+"SECRET", "holds only whitespace; expected the signing secret")
			return nil, nil, warnings, false
		}
		if isPlaceholder(secret) {
			ps.addf(p.prefix+"SECRET", "%s", placeholderProblem)
			return nil, nil, warnings, false
		}
		out, from = append(out, secret), append(from, "SECRET")
	}
	if p.env.SecretFile != "" {
		b, err := os.ReadFile(p.env.SecretFile)
		if err != nil {
			ps.addf(p.prefix+"SECRET_FILE", "cannot read the file: %v; expected a readable file with one secret per line", errors.Unwrap(err))
			return nil, nil, warnings, false
		}
		n := len(out)
		values, spaced := fileValues(b)
		for _, secret := range values {
			if isPlaceholder(secret) {
				ps.addf(p.prefix+"SECRET_FILE", "the file %s", placeholderProblem)
				return nil, nil, warnings, false
			}
			out, from = append(out, secret), append(from, "SECRET_FILE")
		}
		if spaced {
			warnings = append(warnings, fmt.Sprintf("%sSECRET_FILE: whitespace around a secret removed", p.prefix))
		}
		if len(out) == n && p.env.Secret == "" {
			ps.addf(p.prefix+"SECRET_FILE", "the file holds no secret; expected one secret per line, current first")
			return nil, nil, warnings, false
		}
	}
	if p.env.SecretPrevious != "" {
		secret := trimmed("SECRET_PREVIOUS", p.env.SecretPrevious)
		if secret == "" {
			ps.addf(p.prefix+"SECRET_PREVIOUS", "holds only whitespace; expected the previous signing secret")
			return nil, nil, warnings, false
		}
		if isPlaceholder(secret) {
			ps.addf(p.prefix+"SECRET_PREVIOUS", "%s", placeholderProblem)
			return nil, nil, warnings, false
		}
		out, from = append(out, secret), append(from, "SECRET_PREVIOUS")
	}
	return out, from, warnings, true
}
