package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/whguard/whguard/verify"
)

// envPrefix prefixes every configuration variable.
const envPrefix = "WHGUARD_"

// config is the whole configuration, parsed once from WHGUARD_* variables.
type config struct {
	Listen          string        `env:"LISTEN" envDefault:":8080"`
	AdminListen     string        `env:"ADMIN_LISTEN" envDefault:"127.0.0.1:9090"`
	AdminToken      string        `env:"ADMIN_TOKEN"`
	AdminURL        string        `env:"ADMIN_URL"` // read by `whguard events` only
	DatabaseURL     string        `env:"DATABASE_URL"`
	BackendURL      string        `env:"BACKEND_URL"`
	Providers       []string      `env:"PROVIDERS"`
	MaxBodyBytes    int64         `env:"MAX_BODY_BYTES" envDefault:"1048576"`
	LogLevel        string        `env:"LOG_LEVEL" envDefault:"info"`
	LogFormat       string        `env:"LOG_FORMAT" envDefault:"json"`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"15s"`

	ForwardTimeout     time.Duration `env:"FORWARD_TIMEOUT" envDefault:"10s"`
	ForwardConcurrency int           `env:"FORWARD_CONCURRENCY" envDefault:"8"`
	RetryBaseDelay     time.Duration `env:"RETRY_BASE_DELAY" envDefault:"5s"`
	RetryMaxDelay      time.Duration `env:"RETRY_MAX_DELAY" envDefault:"1h"`
	RetryMaxAttempts   int           `env:"RETRY_MAX_ATTEMPTS" envDefault:"25"`
	DedupRetention     time.Duration `env:"DEDUP_RETENTION" envDefault:"840h"`
	PayloadRetention   time.Duration `env:"PAYLOAD_RETENTION" envDefault:"168h"`

	providers []providerConfig
}

// providerEnv is one provider's variables, WHGUARD_<NAME>_*.
type providerEnv struct {
	Scheme         string        `env:"SCHEME"`
	Secret         string        `env:"SECRET"`
	SecretPrevious string        `env:"SECRET_PREVIOUS"`
	SecretFile     string        `env:"SECRET_FILE"`
	Path           string        `env:"PATH"`
	Tolerance      time.Duration `env:"TOLERANCE"`
	IDHeader       string        `env:"ID_HEADER"`
	MaxBodyBytes   int64         `env:"MAX_BODY_BYTES"`
	BackendURL     string        `env:"BACKEND_URL"`
	ForwardPath    string        `env:"FORWARD_PATH"`

	PublicKey         string `env:"PUBLIC_KEY"`
	PublicURL         string `env:"PUBLIC_URL"`
	HMACAlgorithm     string `env:"HMAC_ALGORITHM"`
	SignatureHeader   string `env:"SIGNATURE_HEADER"`
	SignatureEncoding string `env:"SIGNATURE_ENCODING"`
	SignaturePrefix   string `env:"SIGNATURE_PREFIX"`
	TimestampHeader   string `env:"TIMESTAMP_HEADER"`
	SignedContent     string `env:"SIGNED_CONTENT"`
}

// providerConfig is a parsed, validated provider.
type providerConfig struct {
	name   string // lower case, as in WHGUARD_PROVIDERS
	prefix string // WHGUARD_<NAME>_
	env    providerEnv
	// provider is built during validation so a bad secret fails start-up.
	provider *verify.Provider
}

// configError is an invalid value; main exits 2 with its message.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

func configErrorf(format string, a ...any) error {
	return &configError{msg: fmt.Sprintf(format, a...)}
}

var providerNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// loadConfig parses the environment (as os.Environ gives it) and validates
// it. Warnings (unknown variables, unsigned providers) are returned apart so
// the caller can log them once a logger exists.
func loadConfig(environ []string) (*config, []string, error) {
	vars := env.ToMap(environ)
	var c config
	if err := parseEnv(&c, envPrefix, vars); err != nil {
		return nil, nil, err
	}
	known := knownKeys(&config{}, envPrefix)
	var warnings []string
	seen := map[string]bool{}
	for _, raw := range c.Providers {
		name := strings.ToLower(strings.TrimSpace(raw))
		if name == "" {
			continue
		}
		if !providerNameRE.MatchString(name) {
			return nil, nil, configErrorf("WHGUARD_PROVIDERS: %q is not a valid provider name (letters, digits, _; starting with a letter)", raw)
		}
		if seen[name] {
			return nil, nil, configErrorf("WHGUARD_PROVIDERS: %q is listed twice", name)
		}
		seen[name] = true
		pc := providerConfig{name: name, prefix: envPrefix + strings.ToUpper(name) + "_"}
		if err := parseEnv(&pc.env, pc.prefix, vars); err != nil {
			return nil, nil, err
		}
		for k := range knownKeys(&providerEnv{}, pc.prefix) {
			known[k] = true
		}
		c.providers = append(c.providers, pc)
	}
	for k := range vars {
		if strings.HasPrefix(k, envPrefix) && !known[k] && !ignoredKeys[k] {
			warnings = append(warnings, fmt.Sprintf("unknown variable %s ignored (a typo, or a provider missing from WHGUARD_PROVIDERS?)", k))
		}
	}
	sort.Strings(warnings)
	w, err := c.validate()
	if err != nil {
		return nil, nil, err
	}
	return &c, append(warnings, w...), nil
}

// ignoredKeys are WHGUARD_ variables read by tooling, not by whguard.
var ignoredKeys = map[string]bool{}

func (c *config) validate() (warnings []string, err error) {
	if len(c.providers) == 0 {
		return nil, configErrorf("WHGUARD_PROVIDERS: no provider configured (e.g. WHGUARD_PROVIDERS=stripe)")
	}
	if c.MaxBodyBytes <= 0 {
		return nil, configErrorf("WHGUARD_MAX_BODY_BYTES: must be positive, got %d", c.MaxBodyBytes)
	}
	if c.ShutdownTimeout <= 0 {
		return nil, configErrorf("WHGUARD_SHUTDOWN_TIMEOUT: must be positive, got %s", c.ShutdownTimeout)
	}
	switch c.LogFormat {
	case "json", "console":
	default:
		return nil, configErrorf("WHGUARD_LOG_FORMAT: %q is not json or console", c.LogFormat)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return nil, configErrorf("WHGUARD_LOG_LEVEL: %q is not debug, info, warn or error", c.LogLevel)
	}
	if c.DatabaseURL == "" {
		c.DatabaseURL = "sqlite:whguard.db"
	}
	switch {
	case strings.HasPrefix(c.DatabaseURL, "postgres://"), strings.HasPrefix(c.DatabaseURL, "postgresql://"):
	case strings.HasPrefix(c.DatabaseURL, "sqlite:"):
		if strings.TrimPrefix(c.DatabaseURL, "sqlite:") == "" {
			return nil, configErrorf("WHGUARD_DATABASE_URL: sqlite: needs a file path, e.g. sqlite:/var/lib/whguard/whguard.db")
		}
	default:
		return nil, configErrorf("WHGUARD_DATABASE_URL: must start with postgres:// or sqlite: (the URL is not shown: it may hold a password)")
	}
	if c.BackendURL != "" {
		if err := checkURL(c.BackendURL); err != nil {
			return nil, configErrorf("WHGUARD_BACKEND_URL: %v", err)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"WHGUARD_FORWARD_TIMEOUT", c.ForwardTimeout},
		{"WHGUARD_RETRY_BASE_DELAY", c.RetryBaseDelay},
		{"WHGUARD_RETRY_MAX_DELAY", c.RetryMaxDelay},
	} {
		if d.v <= 0 {
			return nil, configErrorf("%s: must be positive, got %s", d.name, d.v)
		}
	}
	if c.DedupRetention < time.Hour {
		return nil, configErrorf("WHGUARD_DEDUP_RETENTION: %s is too short: keys must outlive the senders' redelivery horizon (default 840h, 35 days)", c.DedupRetention)
	}
	if c.PayloadRetention <= 0 || c.PayloadRetention > c.DedupRetention {
		return nil, configErrorf("WHGUARD_PAYLOAD_RETENTION: must be positive and at most WHGUARD_DEDUP_RETENTION (%s), got %s", c.DedupRetention, c.PayloadRetention)
	}
	if c.RetryMaxDelay < c.RetryBaseDelay {
		return nil, configErrorf("WHGUARD_RETRY_MAX_DELAY: %s is shorter than WHGUARD_RETRY_BASE_DELAY (%s)", c.RetryMaxDelay, c.RetryBaseDelay)
	}
	if c.RetryMaxAttempts < 1 {
		return nil, configErrorf("WHGUARD_RETRY_MAX_ATTEMPTS: must be at least 1, got %d", c.RetryMaxAttempts)
	}
	if c.ForwardConcurrency < 1 || c.ForwardConcurrency > 1000 {
		return nil, configErrorf("WHGUARD_FORWARD_CONCURRENCY: must be from 1 to 1000, got %d", c.ForwardConcurrency)
	}
	paths := map[string]string{}
	for i := range c.providers {
		p := &c.providers[i]
		if p.env.Path == "" {
			p.env.Path = "/webhooks/" + p.name
		}
		if !strings.HasPrefix(p.env.Path, "/") {
			return nil, configErrorf("%sPATH: %q must start with /", p.prefix, p.env.Path)
		}
		if other, dup := paths[p.env.Path]; dup {
			return nil, configErrorf("%sPATH: %q is already the path of provider %s", p.prefix, p.env.Path, other)
		}
		paths[p.env.Path] = p.name
		if p.env.MaxBodyBytes < 0 {
			return nil, configErrorf("%sMAX_BODY_BYTES: must be positive, got %d", p.prefix, p.env.MaxBodyBytes)
		}
		if p.env.MaxBodyBytes == 0 {
			p.env.MaxBodyBytes = c.MaxBodyBytes
		}
		switch {
		case p.env.BackendURL != "":
			if err := checkURL(p.env.BackendURL); err != nil {
				return nil, configErrorf("%sBACKEND_URL: %v", p.prefix, err)
			}
		case c.BackendURL != "":
			p.env.BackendURL = c.BackendURL
		default:
			return nil, configErrorf("WHGUARD_BACKEND_URL: not set (nor %sBACKEND_URL): where should %s events be forwarded?", p.prefix, p.name)
		}
		if p.env.ForwardPath != "" && !strings.HasPrefix(p.env.ForwardPath, "/") {
			return nil, configErrorf("%sFORWARD_PATH: %q must start with /", p.prefix, p.env.ForwardPath)
		}
		if p.env.Tolerance < 0 {
			return nil, configErrorf("%sTOLERANCE: must not be negative, got %s", p.prefix, p.env.Tolerance)
		}
		if p.env.Scheme == "" {
			return nil, configErrorf("%sSCHEME: not set; one of %s", p.prefix, strings.Join(verify.KnownSchemes(), ", "))
		}
		known := false
		for _, s := range verify.KnownSchemes() {
			known = known || s == p.env.Scheme
		}
		if !known {
			return nil, configErrorf("%sSCHEME: unknown scheme %q; one of %s", p.prefix, p.env.Scheme, strings.Join(verify.KnownSchemes(), ", "))
		}
		secrets, err := p.secrets()
		if err != nil {
			return nil, err
		}
		if err := p.checkSchemeSettings(len(secrets)); err != nil {
			return nil, err
		}
		if p.env.Scheme == verify.SchemeNone {
			warnings = append(warnings, fmt.Sprintf("provider %s uses scheme none: requests are NOT verified; only use it on a trusted network", p.name))
		}
		p.provider, err = verify.NewProvider(verify.ProviderConfig{
			Name: p.name, Scheme: p.env.Scheme, Secrets: secrets,
			Tolerance: p.env.Tolerance, IDHeader: p.env.IDHeader,
			PublicKey: p.env.PublicKey, PublicURL: p.env.PublicURL,
			HMAC: verify.HMACConfig{
				Algorithm: p.env.HMACAlgorithm, SignatureHeader: p.env.SignatureHeader,
				Encoding: p.env.SignatureEncoding, Prefix: p.env.SignaturePrefix,
				TimestampHeader: p.env.TimestampHeader, SignedContent: p.env.SignedContent,
			},
		})
		if err != nil {
			// verify's errors never contain the secret or key itself.
			return nil, configErrorf("%s%s: %v", p.prefix, p.blame(err), err)
		}
	}
	return warnings, nil
}

// Schemes that verify with a public key, and those that sign the URL.
var (
	publicKeySchemes = map[string]bool{verify.SchemeSendGrid: true, verify.SchemeDiscord: true}
	publicURLSchemes = map[string]bool{verify.SchemeTwilio: true, verify.SchemeSquare: true}
)

// checkSchemeSettings checks, before the provider is built, the settings a
// scheme needs, so each error names its own variable.
func (p *providerConfig) checkSchemeSettings(nSecrets int) error {
	scheme := p.env.Scheme
	switch {
	case scheme == verify.SchemeNone:
	case publicKeySchemes[scheme]:
		if p.env.PublicKey == "" {
			return configErrorf("%sPUBLIC_KEY: not set; scheme %s verifies with the sender's public key", p.prefix, scheme)
		}
	case nSecrets == 0:
		return configErrorf("%sSECRET: not set (nor %sSECRET_FILE); scheme %s needs a secret", p.prefix, p.prefix, scheme)
	}
	if publicURLSchemes[scheme] {
		if p.env.PublicURL == "" {
			return configErrorf("%sPUBLIC_URL: not set; scheme %s signs the URL the sender posts to", p.prefix, scheme)
		}
		if u, err := url.Parse(p.env.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
			return configErrorf("%sPUBLIC_URL: %q must be an absolute http(s) URL without query", p.prefix, p.env.PublicURL)
		}
	}
	if scheme != verify.SchemeHMAC {
		return nil
	}
	switch p.env.HMACAlgorithm {
	case "", "sha256", "sha512", "sha1":
	default:
		return configErrorf("%sHMAC_ALGORITHM: %q is not sha256, sha512 or sha1", p.prefix, p.env.HMACAlgorithm)
	}
	switch p.env.SignatureEncoding {
	case "", "hex", "base64":
	default:
		return configErrorf("%sSIGNATURE_ENCODING: %q is not hex or base64", p.prefix, p.env.SignatureEncoding)
	}
	if p.env.SignatureHeader == "" {
		return configErrorf("%sSIGNATURE_HEADER: not set; scheme hmac needs the name of the header carrying the signature", p.prefix)
	}
	tmpl := p.env.SignedContent
	rest := strings.NewReplacer("{id}", "", "{timestamp}", "", "{body}", "").Replace(tmpl)
	if strings.ContainsAny(rest, "{}") {
		return configErrorf("%sSIGNED_CONTENT: %q uses a placeholder other than {id}, {timestamp}, {body}", p.prefix, tmpl)
	}
	if strings.Contains(tmpl, "{timestamp}") && p.env.TimestampHeader == "" {
		return configErrorf("%sSIGNED_CONTENT: uses {timestamp} but %sTIMESTAMP_HEADER is not set", p.prefix, p.prefix)
	}
	if strings.Contains(tmpl, "{id}") && p.env.IDHeader == "" {
		return configErrorf("%sSIGNED_CONTENT: uses {id} but %sID_HEADER is not set", p.prefix, p.prefix)
	}
	return nil
}

// blame names the variable a provider construction error is about.
func (p *providerConfig) blame(err error) string {
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "id header"):
		return "ID_HEADER"
	case strings.Contains(msg, "tolerance"):
		return "TOLERANCE"
	case publicKeySchemes[p.env.Scheme]:
		return "PUBLIC_KEY"
	case strings.Contains(msg, "url"):
		return "PUBLIC_URL"
	case p.env.Scheme == verify.SchemeHMAC && !strings.Contains(msg, "secret"):
		return "SIGNED_CONTENT"
	}
	return "SECRET"
}

// secrets gathers the provider's secrets, current first: SECRET, then each
// line of SECRET_FILE, then SECRET_PREVIOUS. SECRET is taken verbatim
// (spaces included); file lines lose only their line ending.
func (p *providerConfig) secrets() ([]string, error) {
	var out []string
	if p.env.Secret != "" {
		out = append(out, p.env.Secret)
	}
	if p.env.SecretFile != "" {
		b, err := os.ReadFile(p.env.SecretFile)
		if err != nil {
			return nil, configErrorf("%sSECRET_FILE: cannot read the file: %v", p.prefix, errors.Unwrap(err))
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if line := strings.TrimSuffix(sc.Text(), "\r"); line != "" {
				out = append(out, line)
			}
		}
		if len(out) == 0 && p.env.Secret == "" {
			return nil, configErrorf("%sSECRET_FILE: the file holds no secret", p.prefix)
		}
	}
	if p.env.SecretPrevious != "" {
		out = append(out, p.env.SecretPrevious)
	}
	return out, nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", s)
	}
	return nil
}

// parseEnv parses v from vars with the prefix and turns env's errors into
// configErrors that name the variable, not the Go field.
func parseEnv(v any, prefix string, vars map[string]string) error {
	err := env.ParseWithOptions(v, env.Options{Prefix: prefix, Environment: vars})
	if err == nil {
		return nil
	}
	var agg env.AggregateError
	if errors.As(err, &agg) && len(agg.Errors) > 0 {
		var pe env.ParseError
		if errors.As(agg.Errors[0], &pe) {
			key := prefix + fieldKey(v, pe.Name)
			return configErrorf("%s: invalid value %q (%v)", key, vars[key], pe.Err)
		}
	}
	return configErrorf("configuration: %v", err)
}

// fieldKey is the env tag of the named struct field.
func fieldKey(v any, field string) string {
	t := reflect.TypeOf(v).Elem()
	if f, ok := t.FieldByName(field); ok {
		return f.Tag.Get("env")
	}
	return field
}

// knownKeys lists the full variable names a struct reads.
func knownKeys(v any, prefix string) map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeOf(v).Elem()
	for i := range t.NumField() {
		if tag := t.Field(i).Tag.Get("env"); tag != "" {
			out[prefix+tag] = true
		}
	}
	return out
}
