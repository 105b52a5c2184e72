package main

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/alert"
	"github.com/whguard/whguard/internal/governor"
	"github.com/whguard/whguard/internal/tracing"
	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/proxy"
	"github.com/whguard/whguard/verify"
)

// envPrefix prefixes every configuration variable.
const envPrefix = "WHGUARD_"

// Defaults of whguard's own settings; the components' come from their
// WithDefaults (see defaultConfig).
const (
	defaultListen          = ":8080"
	defaultAdminListen     = "127.0.0.1:9090"
	defaultDatabaseURL     = "sqlite:whguard.db"
	defaultLogLevel        = "info"
	defaultLogFormat       = "json"
	defaultShutdownTimeout = 15 * time.Second
)

// defaultConfig is the configuration before the environment is read: an
// unset (or empty) variable keeps its default, an explicit value (even a
// zero one) is parsed and checked. The components' settings default to
// what their own WithDefaults gives, so each default is written once.
func defaultConfig() config {
	fc := forwarder.Config{}.WithDefaults()
	ic := proxy.IngressConfig{}.WithDefaults()
	bc := governor.BreakerConfig{}.WithDefaults()
	ac := alert.Config{}.WithDefaults()
	return config{
		Listen:           defaultListen,
		AdminListen:      defaultAdminListen,
		DatabaseURL:      defaultDatabaseURL,
		MaxBodyBytes:     ic.MaxBodyBytes,
		MaxBufferedBytes: ic.MaxBufferedBytes,
		LogLevel:         defaultLogLevel,
		LogFormat:        defaultLogFormat,
		ShutdownTimeout:  defaultShutdownTimeout,

		ForwardTimeout:     fc.Timeout,
		ForwardConcurrency: fc.Concurrency,
		RetryBaseDelay:     fc.Policy.BaseDelay,
		RetryMaxDelay:      fc.Policy.MaxDelay,
		RetryMaxAttempts:   fc.Policy.MaxAttempts,
		DedupRetention:     fc.KeyRetention,
		PayloadRetention:   fc.PayloadRetention,

		Breaker:             "on",
		BreakerWindow:       bc.Window,
		BreakerMinAttempts:  bc.MinAttempts,
		BreakerFailureRatio: bc.FailureRatio,
		BreakerCooldown:     bc.Cooldown,

		AlertFormat:     ac.Format,
		AlertRepeat:     ac.Repeat,
		AlertBacklogAge: ac.BacklogAge,
	}
}

// config is the whole configuration, parsed once from WHGUARD_* variables
// over defaultConfig.
type config struct {
	Listen      string `env:"LISTEN"`
	AdminListen string `env:"ADMIN_LISTEN"`
	AdminToken  string `env:"ADMIN_TOKEN"`
	AdminURL    string `env:"ADMIN_URL"` // read by `whguard events` only
	DatabaseURL string `env:"DATABASE_URL"`
	// DatabaseListenURL is a direct connection to the same PostgreSQL
	// database for what needs a session (LISTEN, session locks) when
	// DatabaseURL goes through a transaction pooler such as PgBouncer.
	DatabaseListenURL string `env:"DATABASE_LISTEN_URL"`
	// JournalReplication is how the PostgreSQL journal is replicated:
	// empty (by PostgreSQL: its synchronous standbys are watched, and none
	// is warned about) or "storage" (a service replicating below
	// PostgreSQL, such as Aurora or AlloyDB).
	JournalReplication string   `env:"JOURNAL_REPLICATION"`
	BackendURL         string   `env:"BACKEND_URL"`
	Providers          []string `env:"PROVIDERS"`
	MaxBodyBytes       int64    `env:"MAX_BODY_BYTES"`
	// MaxBufferedBytes bounds the request bodies being read at once.
	MaxBufferedBytes int64 `env:"MAX_BUFFERED_BYTES"`
	// MetricsListen, when set, serves /metrics, /healthz and /readyz on a
	// listener of their own, for scrapers and probes.
	MetricsListen string `env:"METRICS_LISTEN"`
	// AdminHosts are Host names the admin listener answers besides the
	// loopback ones.
	AdminHosts []string `env:"ADMIN_HOSTS"`
	// RedactHeaders are headers, besides the credential ones, whose values
	// no read surface shows.
	RedactHeaders []string `env:"REDACT_HEADERS"`
	// PassThrough serves the requests that are no provider's webhook by
	// passing them to WHGUARD_BACKEND_URL unchanged (whguard in front of
	// all of the app's traffic).
	PassThrough     bool          `env:"PASS_THROUGH"`
	LogLevel        string        `env:"LOG_LEVEL"`
	LogFormat       string        `env:"LOG_FORMAT"`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT"`

	ForwardTimeout     time.Duration `env:"FORWARD_TIMEOUT"`
	ForwardConcurrency int           `env:"FORWARD_CONCURRENCY"`
	RetryBaseDelay     time.Duration `env:"RETRY_BASE_DELAY"`
	RetryMaxDelay      time.Duration `env:"RETRY_MAX_DELAY"`
	RetryMaxAttempts   int           `env:"RETRY_MAX_ATTEMPTS"`
	DedupRetention     time.Duration `env:"DEDUP_RETENTION"`
	PayloadRetention   time.Duration `env:"PAYLOAD_RETENTION"`

	// RedisURL, when set, holds the backend protection's state shared by
	// every replica; unset, it is kept in process.
	RedisURL string `env:"REDIS_URL"`
	// RedisNamespace names this deployment in Redis keys; empty derives
	// it from the journal's identity.
	RedisNamespace string `env:"REDIS_NAMESPACE"`
	// BackendRateLimit is N/s, N/m or N/h per backend (parsed into
	// backendLimit); BackendRateBurst nil takes the default.
	BackendRateLimit   string        `env:"BACKEND_RATE_LIMIT"`
	BackendRateBurst   *int          `env:"BACKEND_RATE_BURST"`
	BackendMaxInFlight int           `env:"BACKEND_MAX_IN_FLIGHT"`
	Breaker            string        `env:"BREAKER"`
	BreakerWindow      time.Duration `env:"BREAKER_WINDOW"`
	BreakerMinAttempts int           `env:"BREAKER_MIN_ATTEMPTS"`
	// BreakerFailureRatio is the share of transient failures, 0 to 1.
	BreakerFailureRatio float64       `env:"BREAKER_FAILURE_RATIO"`
	BreakerCooldown     time.Duration `env:"BREAKER_COOLDOWN"`

	// AlertURL, when set, receives alerts (internal/alert) in AlertFormat,
	// signed with AlertSecret (a Standard Webhooks secret) when set.
	AlertURL        string        `env:"ALERT_URL"`
	AlertFormat     string        `env:"ALERT_FORMAT"`
	AlertSecret     string        `env:"ALERT_SECRET"`
	AlertRepeat     time.Duration `env:"ALERT_REPEAT"`
	AlertBacklogAge time.Duration `env:"ALERT_BACKLOG_AGE"`

	// alertSign signs JSON alerts (from AlertSecret), nil when unsigned.
	alertSign func(h http.Header, body []byte, at time.Time)

	// The components' configurations, built from the variables above and
	// checked by the components' own rules (components.go). The parts
	// (journal, logger, …) are added when whguard is wired.
	forward forwarder.Config
	ingress proxy.IngressConfig
	gov     governor.Config
	alerts  alert.Config
	// tracing is what the OTEL_* variables ask of traces (traces.go).
	tracing tracing.Config

	providers []providerConfig
}

// configError is one invalid setting; main exits 2 printing each.
type configError struct {
	key string // the variable that holds the bad value, WHGUARD_…
	msg string // what is wrong, and what would be valid
}

func (e *configError) Error() string { return e.key + ": " + e.msg }

// problems collects every configuration error, so that one run reports
// them all.
type problems struct {
	errs []error
	bad  map[string]bool // variables already reported
}

// addf reports that the variable key holds a bad value.
func (ps *problems) addf(key, format string, a ...any) {
	if ps.bad == nil {
		ps.bad = map[string]bool{}
	}
	ps.bad[key] = true
	ps.errs = append(ps.errs, &configError{key: key, msg: fmt.Sprintf(format, a...)})
}

// merge adds the configErrors joined in err (as parseEnv returns them).
func (ps *problems) merge(err error) {
	if err == nil {
		return
	}
	for _, e := range configErrors(err) {
		var ce *configError
		if errors.As(e, &ce) {
			ps.addf(ce.key, "%s", ce.msg)
		} else {
			ps.errs = append(ps.errs, e)
		}
	}
}

// addOnce reports msg about key unless it was reported already (two
// components may check one variable: the in-flight bound is both the
// forwarder's and the governor's).
func (ps *problems) addOnce(key, msg string) {
	for _, e := range ps.errs {
		if ce, ok := e.(*configError); ok && ce.key == key && ce.msg == msg {
			return
		}
	}
	ps.addf(key, "%s", msg)
}

// failed tells whether key was reported already: checks that compare it
// with other values are skipped, so one bad value gives one error.
func (ps *problems) failed(key string) bool { return ps.bad[key] }

// err joins the errors, nil when there are none.
func (ps *problems) err() error { return errors.Join(ps.errs...) }

// configErrors splits the error of loadConfig into one error per problem.
func configErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

var providerNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// loadConfig parses the environment (as os.Environ gives it) and validates
// it. The error joins one configError per bad variable. Warnings (unknown
// variables, unsigned providers) are returned apart so the caller can log
// them once a logger exists; with an error, the warnings are the unknown
// variables alone, to be printed beside the errors (a typo is often their
// cause).
func loadConfig(environ []string) (*config, []string, error) {
	vars := env.ToMap(environ)
	var ps problems
	c := defaultConfig()
	ps.merge(parseEnv(&c, envPrefix, vars))
	c.loadTracing(vars, &ps)
	known := knownKeys(&config{}, envPrefix)
	readBy := map[string]string{} // variable → who reads it
	for k := range known {
		readBy[k] = "a global setting"
	}
	seen := map[string]bool{}
	for _, raw := range c.Providers {
		name := strings.ToLower(strings.TrimSpace(raw))
		if name == "" {
			continue
		}
		if !providerNameRE.MatchString(name) {
			ps.addf("WHGUARD_PROVIDERS", "%q is not a valid provider name (letters, digits, _; starting with a letter)", raw)
			continue
		}
		if seen[name] {
			ps.addf("WHGUARD_PROVIDERS", "%q is listed twice; list each provider once", name)
			continue
		}
		seen[name] = true
		pc := providerConfig{name: name, prefix: envPrefix + strings.ToUpper(name) + "_"}
		// Two providers must not read one variable (x's FORWARD_PATH is
		// x_forward's PATH), nor a provider a global one (a provider named
		// admin would read WHGUARD_ADMIN_TOKEN as its TOKEN).
		clash := ""
		for k := range knownKeys(&providerEnv{}, pc.prefix) {
			if owner, ok := readBy[k]; ok {
				clash = fmt.Sprintf("its %s is also %s", k, owner)
				break
			}
		}
		if clash != "" {
			ps.addf("WHGUARD_PROVIDERS", "provider %q clashes with another setting: %s; rename the provider", name, clash)
			continue
		}
		ps.merge(parseEnv(&pc.env, pc.prefix, vars))
		for k := range knownKeys(&providerEnv{}, pc.prefix) {
			known[k] = true
			readBy[k] = "a setting of provider " + name
		}
		c.providers = append(c.providers, pc)
	}
	unknown := unknownVariables(vars, known, c.providers)
	w := c.validate(&ps)
	if err := ps.err(); err != nil {
		return nil, unknown, err
	}
	return &c, append(unknown, w...), nil
}

// ignoredKeys are WHGUARD_ variables read by tooling, not by whguard.
var ignoredKeys = map[string]bool{}

// validate checks c, applies the defaults that depend on other settings,
// and builds each provider, reporting every problem to ps.
func (c *config) validate(ps *problems) (warnings []string) {
	if len(c.providers) == 0 && !ps.failed("WHGUARD_PROVIDERS") {
		ps.addf("WHGUARD_PROVIDERS", "no provider configured (e.g. WHGUARD_PROVIDERS=stripe)")
	}
	if c.ShutdownTimeout <= 0 && !ps.failed("WHGUARD_SHUTDOWN_TIMEOUT") {
		ps.addf("WHGUARD_SHUTDOWN_TIMEOUT", "must be positive, got %s", c.ShutdownTimeout)
	}
	switch c.LogFormat {
	case "json", "console":
	default:
		ps.addf("WHGUARD_LOG_FORMAT", "%q is not json or console", c.LogFormat)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		ps.addf("WHGUARD_LOG_LEVEL", "%q is not debug, info, warn or error", c.LogLevel)
	}
	switch {
	case strings.HasPrefix(c.DatabaseURL, "postgres://"), strings.HasPrefix(c.DatabaseURL, "postgresql://"):
	case strings.HasPrefix(c.DatabaseURL, "sqlite:"):
		if strings.TrimPrefix(c.DatabaseURL, "sqlite:") == "" {
			ps.addf("WHGUARD_DATABASE_URL", "sqlite: needs a file path, e.g. sqlite:/var/lib/whguard/whguard.db")
		}
	default:
		ps.addf("WHGUARD_DATABASE_URL", "must start with postgres:// or sqlite: (the URL is not shown: it may hold a password)")
	}
	if c.DatabaseListenURL != "" && !strings.HasPrefix(c.DatabaseListenURL, "postgres://") && !strings.HasPrefix(c.DatabaseListenURL, "postgresql://") {
		ps.addf("WHGUARD_DATABASE_LISTEN_URL", "must start with postgres:// (a direct connection to the journal's database; the URL is not shown: it may hold a password)")
	} else if c.DatabaseListenURL != "" && strings.HasPrefix(c.DatabaseURL, "sqlite:") {
		ps.addf("WHGUARD_DATABASE_LISTEN_URL", "is for a PostgreSQL journal; WHGUARD_DATABASE_URL is an embedded one")
	}
	if c.JournalReplication != "" && c.JournalReplication != journal.ReplicatedStorage {
		ps.addf("WHGUARD_JOURNAL_REPLICATION", "%q is not %q (unset: PostgreSQL's own replication)", c.JournalReplication, journal.ReplicatedStorage)
	}
	if isPlaceholder(c.AdminToken) {
		ps.addf("WHGUARD_ADMIN_TOKEN", "%s", placeholderProblem)
	}
	if c.PassThrough && c.BackendURL == "" && !ps.failed("WHGUARD_PASS_THROUGH") {
		ps.addf("WHGUARD_PASS_THROUGH", "needs WHGUARD_BACKEND_URL, the app the other requests go to")
	}
	c.validateProtection(ps)
	c.validateAlerts(ps)
	for i := range c.providers {
		p := &c.providers[i]
		warnings = append(warnings, p.validate(c, ps)...)
		if p.provider == nil {
			continue
		}
		switch {
		case p.env.Scheme == verify.SchemeNone:
			warnings = append(warnings, fmt.Sprintf("provider %s uses scheme none: requests are NOT verified; only use it on a trusted network", p.name))
		case p.env.Scheme == verify.SchemeSNS && len(p.env.TopicARNs) == 0:
			warnings = append(warnings, fmt.Sprintf("provider %s: scheme sns without %sTOPIC_ARNS accepts, and confirms subscriptions of, any AWS account's topic: list your topics", p.name, p.prefix))
		case p.env.Scheme == verify.SchemePubSub && len(p.env.ServiceAccounts) == 0:
			warnings = append(warnings, fmt.Sprintf("provider %s: scheme pubsub without %sSERVICE_ACCOUNTS accepts a token of any Google account for the audience: list the push subscriptions' service accounts", p.name, p.prefix))
		}
		switch support := verify.ResignSupport(p.env.Scheme); {
		case strings.HasPrefix(support, "cannot"):
			// The signed timestamp ages while an event waits (a backlog, a
			// backend outage) and whguard cannot sign it afresh.
			warnings = append(warnings, fmt.Sprintf("provider %s: scheme %s signs a timestamp that whguard cannot renew when forwarding (%s): "+
				"its backend must not enforce the signature's age (or should skip verification and trust whguard), "+
				"or it will refuse events delivered late", p.name, p.env.Scheme, support))
		}
	}
	c.gov = c.governorConfig(ps)
	c.buildComponents(ps)
	return warnings
}

// validateAlerts builds the alerts' signer from WHGUARD_ALERT_SECRET.
func (c *config) validateAlerts(ps *problems) {
	if c.AlertSecret == "" {
		return
	}
	if isPlaceholder(c.AlertSecret) {
		ps.addf("WHGUARD_ALERT_SECRET", "%s", placeholderProblem)
		return
	}
	p, err := verify.NewProvider(verify.ProviderConfig{Name: "alerts", Scheme: verify.SchemeStandard, Secrets: []string{c.AlertSecret}})
	if err != nil {
		// The verify error names its field, never the secret's value.
		ps.addf("WHGUARD_ALERT_SECRET", "not a Standard Webhooks secret (whsec_ followed by base64): %v", err)
		return
	}
	c.alertSign = p.Resign
}

// parseEnv parses v from vars with the prefix. Its error joins one
// configError per value that does not parse, naming the variable, not the
// Go field.
func parseEnv(v any, prefix string, vars map[string]string) error {
	err := env.ParseWithOptions(v, env.Options{Prefix: prefix, Environment: vars})
	if err == nil {
		return nil
	}
	var ps problems
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		agg.Errors = []error{err}
	}
	for _, e := range agg.Errors {
		var pe env.ParseError
		if !errors.As(e, &pe) {
			ps.addf(strings.TrimSuffix(prefix, "_"), "%v", e)
			continue
		}
		key := prefix + fieldKey(v, pe.Name)
		ps.addf(key, "invalid value %q (%v); expected %s", vars[key], pe.Err, typeHint(pe.Type))
	}
	return ps.err()
}

// typeHint says what a value of type t looks like.
func typeHint(t reflect.Type) string {
	switch {
	case t == reflect.TypeOf(time.Duration(0)), t == reflect.TypeOf(new(time.Duration)):
		return "a Go duration such as 30s, 5m or 1h"
	case t.Kind() == reflect.Bool || t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64, t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Int:
		return "a whole number"
	}
	return "a " + t.String()
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
