package main

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/alert"
	"github.com/whguard/whguard/internal/governor"
	"github.com/whguard/whguard/proxy"
	"github.com/whguard/whguard/verify"
)

// Regression: with scheme hmac a bad WHGUARD_<NAME>_SIGNATURE_HEADER was
// reported as WHGUARD_<NAME>_ID_HEADER, because the variable was guessed
// from the words of verify's message ("header").
func TestBadSignatureHeaderNamesItsVariable(t *testing.T) {
	t.Parallel()
	code, _, stderr := runCmd([]string{"serve"},
		"WHGUARD_DATABASE_URL="+dbURL, "WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=x",
		"WHGUARD_X_SCHEME=hmac", "WHGUARD_X_SECRET=s", "WHGUARD_X_SIGNATURE_HEADER=bad header")
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr: %s", code, stderr)
	}
	if !strings.Contains(stderr, "WHGUARD_X_SIGNATURE_HEADER: ") || strings.Contains(stderr, "WHGUARD_X_ID_HEADER") {
		t.Fatalf("stderr does not blame WHGUARD_X_SIGNATURE_HEADER alone: %s", stderr)
	}
}

// Every variable that can hold a bad value is reported under its own name,
// alone, with a hint of what is valid.
func TestEveryBadVariableNamed(t *testing.T) {
	t.Parallel()
	base := []string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=x", "WHGUARD_X_SCHEME=github", "WHGUARD_X_SECRET=s"}
	hmac := []string{"WHGUARD_X_SCHEME=hmac", "WHGUARD_X_SIGNATURE_HEADER=X-Sig"}
	catchupOn := []string{"WHGUARD_X_CATCHUP=on", "WHGUARD_X_CATCHUP_TOKEN=ghp_a", "WHGUARD_X_CATCHUP_HOOK=repos/a/b/hooks/1"}
	const whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	cases := []struct {
		key, value string
		extra      []string // set before key=value
		hint       string
	}{
		{"WHGUARD_DATABASE_URL", "mysql://x", nil, "postgres:// or sqlite:"},
		{"WHGUARD_BACKEND_URL", "localhost:3000", nil, "http(s) URL"},
		{"WHGUARD_PROVIDERS", "a-b", nil, "letters, digits"},
		{"WHGUARD_MAX_BODY_BYTES", "lots", nil, "whole number"},
		{"WHGUARD_MAX_BUFFERED_BYTES", "0", nil, "positive"},
		{"WHGUARD_PASS_THROUGH", "perhaps", nil, "true or false"},
		{"WHGUARD_REDACT_HEADERS", "X-Key,bad header", nil, "not a header name"},
		{"WHGUARD_LOG_LEVEL", "loud", nil, "debug, info, warn or error"},
		{"WHGUARD_LOG_FORMAT", "xml", nil, "json or console"},
		{"WHGUARD_SHUTDOWN_TIMEOUT", "0s", nil, "positive"},
		{"WHGUARD_FORWARD_TIMEOUT", "10", nil, "Go duration"},
		{"WHGUARD_FORWARD_CONCURRENCY", "0", nil, "from 1 to 1000"},
		{"WHGUARD_RETRY_BASE_DELAY", "0s", nil, "positive"},
		{"WHGUARD_RETRY_MAX_DELAY", "1ms", nil, "at least"},
		{"WHGUARD_RETRY_MAX_ATTEMPTS", "0", nil, "at least 1"},
		{"WHGUARD_DEDUP_RETENTION", "30m", nil, "at least 1h"},
		{"WHGUARD_PAYLOAD_RETENTION", "0s", nil, "at most WHGUARD_DEDUP_RETENTION"},
		{"WHGUARD_REDIS_URL", "http://127.0.0.1:6379", nil, "redis://host:port/db"},
		{"WHGUARD_REDIS_URL", "redis+sentinel://:s3cret@127.0.0.1:26379/", nil, "master's name is missing"},
		{"WHGUARD_JOURNAL_REPLICATION", "sync", nil, `not "storage"`},
		{"WHGUARD_DATABASE_LISTEN_URL", "mysql://db/whguard", nil, "must start with postgres://"},
		{"WHGUARD_REDIS_NAMESPACE", "a b{c}", nil, "1 to 64 letters"},
		{"WHGUARD_BACKEND_RATE_LIMIT", "50 per second", nil, "N/s, N/m or N/h"},
		{"WHGUARD_BACKEND_RATE_BURST", "0", []string{"WHGUARD_BACKEND_RATE_LIMIT=5/s"}, "from 1 to 1000000"},
		{"WHGUARD_BACKEND_MAX_IN_FLIGHT", "-1", nil, "0 (no bound) or more"},
		{"WHGUARD_BREAKER", "maybe", nil, "on or off"},
		{"WHGUARD_BREAKER_WINDOW", "0s", nil, "positive"},
		{"WHGUARD_BREAKER_MIN_ATTEMPTS", "0", nil, "at least 1"},
		{"WHGUARD_BREAKER_FAILURE_RATIO", "1.5", nil, "at most 1"},
		{"WHGUARD_BREAKER_COOLDOWN", "soon", nil, "Go duration"},
		{"WHGUARD_ALERT_URL", "hooks.slack.com/services/x", nil, "http(s) URL"},
		{"WHGUARD_ALERT_FORMAT", "teams", nil, "slack or json"},
		{"WHGUARD_ALERT_SECRET", "whsec_!!!", []string{"WHGUARD_ALERT_FORMAT=json"}, "Standard Webhooks secret"},
		{"WHGUARD_ALERT_REPEAT", "0s", nil, "positive"},
		{"WHGUARD_ADMIN_TOKEN", "...", nil, "placeholder from the docs"},
		{"WHGUARD_ALERT_BACKLOG_AGE", "-1m", nil, "positive"},
		// The standard OTEL_* variables whguard reads itself.
		{"OTEL_TRACES_EXPORTER", "zipkin", nil, "otlp, console or none"},
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", []string{"OTEL_TRACES_EXPORTER=otlp"}, "http/protobuf or grpc"},
		{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "udp", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4318"}, "http/protobuf or grpc"},
		{"OTEL_PROPAGATORS", "tracecontext,zipkin", []string{"OTEL_TRACES_EXPORTER=console"}, "b3, b3multi, jaeger"},

		{"WHGUARD_X_SCHEME", "gitbub", nil, "known: standard"},
		{"WHGUARD_X_SECRET", "whsec_!!!", []string{"WHGUARD_X_SCHEME=standard"}, "base64"},
		{"WHGUARD_X_SECRET_PREVIOUS", "whsec_!!!", []string{"WHGUARD_X_SCHEME=standard", "WHGUARD_X_SECRET=" + whsec}, "base64"},
		{"WHGUARD_X_SECRET_FILE", "/nonexistent/secrets", nil, "one secret per line"},
		{"WHGUARD_X_BACKEND_SECRET", "backend-secret", nil, "does not re-sign deliveries"},
		{"WHGUARD_X_BACKEND_SECRET_FILE", "/nonexistent/secret", []string{"WHGUARD_X_SCHEME=slack"}, "cannot read the file"},
		{"WHGUARD_X_PATH", "hooks", nil, "must start with /"},
		{"WHGUARD_X_TOLERANCE", "-1s", nil, "positive duration"},
		{"WHGUARD_X_ID_HEADER", "bad header", nil, "letters, digits"},
		{"WHGUARD_X_MAX_BODY_BYTES", "-1", nil, "from 1 to 67108864"},
		{"WHGUARD_X_BACKEND_URL", "ftp://x", nil, "http(s) URL"},
		{"WHGUARD_X_FORWARD_PATH", "x", nil, "must start with /"},
		{"WHGUARD_X_RESIGN", "true", nil, "signatures never expire"},
		{"WHGUARD_X_PRESERVE_HOST", "maybe", nil, "true or false"},
		{"WHGUARD_X_BODY_GUARD", "maybe", nil, "true or false"},
		{"WHGUARD_X_EVENT_TYPES", "push,,pull_request", nil, "item 2 is empty"},
		{"WHGUARD_X_RATE_LIMIT", "0/s", nil, "N from 1 to 1000000"},
		{"WHGUARD_X_RATE_BURST", "3", nil, "a burst needs a rate"},
		{"WHGUARD_X_MODE", "fast", nil, "async (the default) or sync"},
		{"WHGUARD_X_SYNC_TIMEOUT", "0s", []string{"WHGUARD_X_MODE=sync"}, "above 0 and at most 25s"},
		{"WHGUARD_X_ORDER_KEY", "data.object.id", nil, "JSON Pointer into the body (e.g. /data/object/id) or header:<Name>"},
		{"WHGUARD_X_ORDER_ON_DEAD", "wait", []string{"WHGUARD_X_ORDER_KEY=/data/object/id"}, "skip (a dead event releases its key) or block"},
		{"WHGUARD_X_PUBLIC_KEY", "zz", []string{"WHGUARD_X_SCHEME=discord"}, "64 hex digits"},
		{"WHGUARD_X_PUBLIC_KEY_FILE", "/nonexistent/key", []string{"WHGUARD_X_SCHEME=discord"}, "cannot read the file"},
		{"WHGUARD_X_ROTATION_OVERLAP", "-1m", []string{"WHGUARD_X_SECRET_FILE=/dev/null"}, "0 (the previous secrets refused at once) or a positive Go duration"},
		{"WHGUARD_X_PUBLIC_URL", "ftp://x/y", []string{"WHGUARD_X_SCHEME=twilio"}, "http(s)://host[:port]/path"},
		{"WHGUARD_X_HMAC_ALGORITHM", "md5", hmac, "sha256 (the default), sha512 or sha1"},
		{"WHGUARD_X_SIGNATURE_HEADER", "bad header", hmac, "letters, digits"},
		{"WHGUARD_X_SIGNATURE_ENCODING", "base32", hmac, "hex (the default) or base64"},
		{"WHGUARD_X_TIMESTAMP_HEADER", "bad header", append(hmac, "WHGUARD_X_SIGNED_CONTENT={timestamp}.{body}"), "letters, digits"},
		{"WHGUARD_X_SIGNED_CONTENT", "{nope}", hmac, "{id}, {timestamp}, {body}"},
		{"WHGUARD_X_CATCHUP", "yes", nil, "off (the default) or on"},
		{"WHGUARD_X_CATCHUP_TOKEN", "ghp_a", []string{"WHGUARD_X_CATCHUP=on", "WHGUARD_X_CATCHUP_HOOK=repos/a/b/hooks/1", "WHGUARD_X_CATCHUP_TOKEN_FILE=/dev/null"}, "set one"},
		{"WHGUARD_X_CATCHUP_TOKEN_FILE", "/nonexistent", []string{"WHGUARD_X_CATCHUP=on", "WHGUARD_X_CATCHUP_HOOK=repos/a/b/hooks/1"}, "cannot read the file"},
		{"WHGUARD_X_CATCHUP_API_URL", "http://api.github.example", catchupOn, "loopback"},
		{"WHGUARD_X_CATCHUP_HOOK", "a/b/1", []string{"WHGUARD_X_CATCHUP=on", "WHGUARD_X_CATCHUP_TOKEN=ghp_a"}, "repos/OWNER/REPO/hooks/ID"},
		{"WHGUARD_X_CATCHUP_ENDPOINT", "we_1", catchupOn, "stripe only"},
		{"WHGUARD_X_CATCHUP_INTERVAL", "0s", catchupOn, "positive"},
		{"WHGUARD_X_CATCHUP_WINDOW", "100h", catchupOn, "at most 72h"},
		{"WHGUARD_X_VERIFY_TOKEN", "…", []string{"WHGUARD_X_SCHEME=meta"}, "placeholder from the docs"},
		{"WHGUARD_X_BASIC_AUTH", "user:...", []string{"WHGUARD_X_SCHEME=postmark"}, "placeholder from the docs"},
		{"WHGUARD_X_KEY_HOSTS", "*.amazonaws.com", []string{"WHGUARD_X_SCHEME=sns"}, "anyone's content"},
		{"WHGUARD_X_CA_FILE", "/nonexistent/ca.pem", []string{"WHGUARD_X_SCHEME=sns"}, "CA file"},
		{"WHGUARD_X_TOPIC_ARNS", "orders", []string{"WHGUARD_X_SCHEME=sns"}, "ARN pattern"},
		{"WHGUARD_X_AUDIENCE", "  ", []string{"WHGUARD_X_SCHEME=pubsub"}, "required"},
		{"WHGUARD_X_SERVICE_ACCOUNTS", "push-account", []string{"WHGUARD_X_SCHEME=pubsub", "WHGUARD_X_AUDIENCE=https://h/x"}, "email"},
	}
	// Variables no value of which is refused at start-up.
	anyValue := map[string]string{
		"WHGUARD_LISTEN":             "checked when listening",
		"WHGUARD_ADMIN_LISTEN":       "checked when listening",
		"WHGUARD_ADMIN_URL":          "read by whguard events only",
		"WHGUARD_X_SIGNATURE_PREFIX": "any text",
		"WHGUARD_METRICS_LISTEN":     "checked when listening",
		"WHGUARD_ADMIN_HOSTS":        "any host names",
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[tc.key] = true
		t.Run(tc.key, func(t *testing.T) {
			environ := append(append(append([]string{}, base...), tc.extra...), tc.key+"="+tc.value)
			_, _, err := loadConfig(environ)
			if err == nil {
				t.Fatalf("%s=%q accepted", tc.key, tc.value)
			}
			errs := configErrors(err)
			var ce *configError
			if len(errs) != 1 || !errors.As(errs[0], &ce) || ce.key != tc.key {
				t.Fatalf("want one error naming %s, got:\n%v", tc.key, err)
			}
			if !strings.HasPrefix(ce.Error(), tc.key+": ") || !strings.Contains(ce.msg, tc.hint) {
				t.Fatalf("error %q does not start with %s or hint %q", ce, tc.key, tc.hint)
			}
		})
	}
	for k := range knownKeys(&config{}, envPrefix) {
		if !covered[k] && anyValue[k] == "" {
			t.Errorf("%s: no bad-value case (add one, or list it in anyValue)", k)
		}
	}
	for k := range knownKeys(&providerEnv{}, "WHGUARD_X_") {
		if !covered[k] && anyValue[k] == "" {
			t.Errorf("%s: no bad-value case (add one, or list it in anyValue)", k)
		}
	}
}

// Several bad variables are all reported, one per line, in one run.
func TestAllConfigErrorsReported(t *testing.T) {
	t.Parallel()
	code, _, stderr := runCmd([]string{"serve"},
		"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=x,y", "WHGUARD_LOG_FORMAT=xml",
		"WHGUARD_X_SCHEME=hmac", "WHGUARD_X_SECRET=s", "WHGUARD_X_SIGNATURE_HEADER=bad header", "WHGUARD_X_SIGNATURE_ENCODING=base32",
		"WHGUARD_Y_SCHEME=stripe")
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	want := []string{"WHGUARD_LOG_FORMAT", "WHGUARD_X_SIGNATURE_HEADER", "WHGUARD_X_SIGNATURE_ENCODING", "WHGUARD_Y_SECRET"}
	if len(lines) != len(want) {
		t.Fatalf("want %d lines, got:\n%s", len(want), stderr)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], "whguard: invalid configuration: "+w+": ") {
			t.Errorf("line %d is not about %s: %s", i+1, w, lines[i])
		}
	}
}

// WHGUARD_<NAME>_EVENT_TYPES: items are trimmed and kept in order; an
// empty item, a control character, an item longer than any event type, or
// a filter on a scheme that reports no type is refused, naming the
// variable.
func TestEventTypesFilter(t *testing.T) {
	t.Parallel()
	base := []string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=stripe", "WHGUARD_STRIPE_SCHEME=stripe",
		"WHGUARD_STRIPE_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
	c, _, err := loadConfig(append(base, "WHGUARD_STRIPE_EVENT_TYPES= invoice.* , customer.subscription.*,charge.refunded"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.providers[0].eventTypes); got != "[invoice.* customer.subscription.* charge.refunded]" {
		t.Fatalf("parsed %s", got)
	}
	if c, _, err := loadConfig(base); err != nil || c.providers[0].eventTypes != nil {
		t.Fatalf("unset: %v %v", c.providers[0].eventTypes, err)
	}
	for _, tc := range []struct{ value, hint string }{
		{"invoice.*,", "item 2 is empty"},
		{",invoice.*", "item 1 is empty"},
		{"invoice.*, ,customer.*", "item 2 is empty"},
		{"invoice.\x01*", "control character"},
		{"invoice.*,\xff", "invalid UTF-8"},
		{strings.Repeat("a", 257), "longer than 256 bytes"},
		{"*", ""}, // accepted: matches every type
	} {
		value := strings.NewReplacer(`\x01`, "\x01", `\xff`, "\xff").Replace(tc.value)
		_, _, err := loadConfig(append(base, "WHGUARD_STRIPE_EVENT_TYPES="+value))
		if tc.hint == "" {
			if err != nil {
				t.Errorf("%q refused: %v", value, err)
			}
			continue
		}
		var ce *configError
		if errs := configErrors(err); len(errs) != 1 || !errors.As(errs[0], &ce) || ce.key != "WHGUARD_STRIPE_EVENT_TYPES" || !strings.Contains(ce.msg, tc.hint) {
			t.Errorf("%q: want one error naming WHGUARD_STRIPE_EVENT_TYPES with %q, got %v", value, tc.hint, err)
		}
	}
	_, _, err = loadConfig([]string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=sg", "WHGUARD_SG_SCHEME=sendgrid",
		"WHGUARD_SG_PUBLIC_KEY=MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA==",
		"WHGUARD_SG_EVENT_TYPES=processed"})
	if err == nil || !strings.Contains(err.Error(), "WHGUARD_SG_EVENT_TYPES: scheme sendgrid reports no event type") {
		t.Errorf("a filter on a scheme without types: %v", err)
	}
}

// An unset or empty variable keeps its default; an explicit zero is still
// checked (WHGUARD_FORWARD_TIMEOUT=0s is refused, see TestEveryBadVariableNamed).
func TestDefaultsApplied(t *testing.T) {
	t.Parallel()
	c, _, err := loadConfig([]string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=x", "WHGUARD_X_SCHEME=none",
		"WHGUARD_FORWARD_TIMEOUT=", "WHGUARD_LOG_LEVEL="})
	if err != nil {
		t.Fatal(err)
	}
	got := *c
	got.providers = nil
	// The components start from their own defaults.
	if fc := got.forward; fc.Targets["x"].BackendURL != "http://b" {
		t.Fatalf("target %+v", fc.Targets)
	}
	got.forward.Targets = nil
	if !reflect.DeepEqual(got.forward, forwarder.Config{}.WithDefaults()) {
		t.Errorf("forwarder config %+v\nwant %+v", got.forward, forwarder.Config{}.WithDefaults())
	}
	if len(got.ingress.Routes) != 1 || got.ingress.Routes[0].MaxBodyBytes != proxy.DefaultMaxBodyBytes || got.ingress.Routes[0].Path != "/webhooks/x" {
		t.Errorf("routes %+v", got.ingress.Routes)
	}
	got.ingress.Routes = nil
	if !reflect.DeepEqual(got.ingress, proxy.IngressConfig{}.WithDefaults()) {
		t.Errorf("ingress config %+v\nwant %+v", got.ingress, proxy.IngressConfig{}.WithDefaults())
	}
	if !reflect.DeepEqual(got.alerts, alert.Config{}.WithDefaults()) {
		t.Errorf("alert config %+v\nwant %+v", got.alerts, alert.Config{}.WithDefaults())
	}
	if want := (governor.BreakerConfig{Enabled: true}).WithDefaults(); got.gov.Breaker != want {
		t.Errorf("breaker %+v, want %+v", got.gov.Breaker, want)
	}
	got.forward, got.ingress, got.gov, got.alerts = forwarder.Config{}, proxy.IngressConfig{}, governor.Config{}, alert.Config{}
	want := defaultConfig()
	want.BackendURL, want.Providers = "http://b", []string{"x"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("config %+v\nwant     %+v", got, want)
	}
}

// WHGUARD_<NAME>_RESIGN defaults to what the scheme can do; asking a scheme
// that cannot re-sign fails start-up naming the variable.
func TestResignSetting(t *testing.T) {
	hmacTS := []string{"WHGUARD_X_SIGNATURE_HEADER=X-Sig", "WHGUARD_X_TIMESTAMP_HEADER=X-Ts", "WHGUARD_X_SIGNED_CONTENT={timestamp}.{body}"}
	cases := []struct {
		name   string
		env    []string
		resign bool
		err    string // substring of the one error, about WHGUARD_X_RESIGN
	}{
		{"stripe default", []string{"WHGUARD_X_SCHEME=stripe", "WHGUARD_X_SECRET=whsec_x"}, true, ""},
		{"stripe off", []string{"WHGUARD_X_SCHEME=stripe", "WHGUARD_X_SECRET=whsec_x", "WHGUARD_X_RESIGN=false"}, false, ""},
		{"stripe on", []string{"WHGUARD_X_SCHEME=stripe", "WHGUARD_X_SECRET=whsec_x", "WHGUARD_X_RESIGN=true"}, true, ""},
		{"empty is unset", []string{"WHGUARD_X_SCHEME=slack", "WHGUARD_X_SECRET=s", "WHGUARD_X_RESIGN="}, true, ""},
		{"github default", []string{"WHGUARD_X_SCHEME=github", "WHGUARD_X_SECRET=s"}, false, ""},
		{"github off", []string{"WHGUARD_X_SCHEME=github", "WHGUARD_X_SECRET=s", "WHGUARD_X_RESIGN=false"}, false, ""},
		{"github on", []string{"WHGUARD_X_SCHEME=github", "WHGUARD_X_SECRET=s", "WHGUARD_X_RESIGN=true"}, false, "signs no timestamp"},
		{"hmac with timestamp", append([]string{"WHGUARD_X_SCHEME=hmac", "WHGUARD_X_SECRET=s"}, hmacTS...), true, ""},
		{"hmac without timestamp", []string{"WHGUARD_X_SCHEME=hmac", "WHGUARD_X_SECRET=s", "WHGUARD_X_SIGNATURE_HEADER=X-Sig"}, false, ""},
		{"hmac without timestamp on", []string{"WHGUARD_X_SCHEME=hmac", "WHGUARD_X_SECRET=s", "WHGUARD_X_SIGNATURE_HEADER=X-Sig", "WHGUARD_X_RESIGN=1"},
			false, "WHGUARD_X_TIMESTAMP_HEADER"},
		{"discord default", []string{"WHGUARD_X_SCHEME=discord", "WHGUARD_X_PUBLIC_KEY=" + strings.Repeat("ab", 32)}, false, ""},
		{"discord on", []string{"WHGUARD_X_SCHEME=discord", "WHGUARD_X_PUBLIC_KEY=" + strings.Repeat("ab", 32), "WHGUARD_X_RESIGN=true"},
			false, "cannot be re-signed: cannot (public key)"},
		{"linear on", []string{"WHGUARD_X_SCHEME=linear", "WHGUARD_X_SECRET=s", "WHGUARD_X_RESIGN=true"}, false, "cannot (timestamp in the body)"},
		{"not a bool", []string{"WHGUARD_X_SCHEME=stripe", "WHGUARD_X_SECRET=whsec_x", "WHGUARD_X_RESIGN=yes"}, false, "expected true or false"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := loadConfig(append([]string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=x"}, tc.env...))
			if tc.err != "" {
				errs := configErrors(err)
				var ce *configError
				if len(errs) != 1 || !errors.As(errs[0], &ce) || ce.key != "WHGUARD_X_RESIGN" || !strings.Contains(ce.msg, tc.err) {
					t.Fatalf("want one WHGUARD_X_RESIGN error saying %q, got: %v", tc.err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.providers[0].resign; got != tc.resign {
				t.Fatalf("resign = %v, want %v", got, tc.resign)
			}
		})
	}
}

// WHGUARD_<NAME>_MODE and _SYNC_TIMEOUT: async by default, sync waits 2 s
// unless told otherwise, within (0, 30s]; bad values name their variable.
func TestSyncModeSetting(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		env     []string
		timeout time.Duration // 0: async
		errKey  string        // the one variable an error names
		warn    string        // substring of a warning
	}{
		{"default async", nil, 0, "", ""},
		{"async", []string{"WHGUARD_X_MODE=async"}, 0, "", ""},
		{"sync default timeout", []string{"WHGUARD_X_MODE=sync"}, 2 * time.Second, "", ""},
		{"sync 5s", []string{"WHGUARD_X_MODE=sync", "WHGUARD_X_SYNC_TIMEOUT=5s"}, 5 * time.Second, "", ""},
		{"sync at the bound", []string{"WHGUARD_X_MODE=sync", "WHGUARD_X_SYNC_TIMEOUT=25s", "WHGUARD_FORWARD_TIMEOUT=30s"}, 25 * time.Second, "", ""},
		{"sync past the bound", []string{"WHGUARD_X_MODE=sync", "WHGUARD_X_SYNC_TIMEOUT=26s"}, 0, "WHGUARD_X_SYNC_TIMEOUT", ""},
		{"sync negative", []string{"WHGUARD_X_MODE=sync", "WHGUARD_X_SYNC_TIMEOUT=-1s"}, 0, "WHGUARD_X_SYNC_TIMEOUT", ""},
		{"sync not a duration", []string{"WHGUARD_X_MODE=sync", "WHGUARD_X_SYNC_TIMEOUT=2"}, 0, "WHGUARD_X_SYNC_TIMEOUT", ""},
		{"upper case", []string{"WHGUARD_X_MODE=SYNC"}, 0, "WHGUARD_X_MODE", ""},
		{"timeout without sync", []string{"WHGUARD_X_SYNC_TIMEOUT=3s"}, 0, "", "has no effect unless WHGUARD_X_MODE=sync"},
		{"longer than the forward timeout", []string{"WHGUARD_X_MODE=sync", "WHGUARD_X_SYNC_TIMEOUT=20s"}, 20 * time.Second, "",
			"longer than WHGUARD_FORWARD_TIMEOUT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, warnings, err := loadConfig(append([]string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=x",
				"WHGUARD_X_SCHEME=twilio", "WHGUARD_X_SECRET=s", "WHGUARD_X_PUBLIC_URL=https://example.com/sms"}, tc.env...))
			if tc.errKey != "" {
				errs := configErrors(err)
				var ce *configError
				if len(errs) != 1 || !errors.As(errs[0], &ce) || ce.key != tc.errKey {
					t.Fatalf("want one error naming %s, got: %v", tc.errKey, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.providers[0].syncTimeout; got != tc.timeout {
				t.Fatalf("sync timeout %s, want %s", got, tc.timeout)
			}
			if tc.warn != "" && !strings.Contains(strings.Join(warnings, "\n"), tc.warn) {
				t.Fatalf("no warning %q in %q", tc.warn, warnings)
			}
		})
	}
	// whguard answers Discord interactions itself.
	_, _, err := loadConfig([]string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=x", "WHGUARD_X_SCHEME=discord",
		"WHGUARD_X_PUBLIC_KEY=" + strings.Repeat("ab", 32), "WHGUARD_X_MODE=sync"})
	var ce *configError
	if errs := configErrors(err); len(errs) != 1 || !errors.As(errs[0], &ce) || ce.key != "WHGUARD_X_MODE" {
		t.Fatalf("discord in sync mode: %v", err)
	}
}

// A provider whose signed timestamp whguard cannot renew is warned about:
// its backend must not enforce the signature's age.
func TestWarnsWhenTimestampCannotBeRenewed(t *testing.T) {
	for scheme, env := range map[string][]string{
		"sendgrid": {"WHGUARD_X_PUBLIC_KEY=MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="},
		"discord":  {"WHGUARD_X_PUBLIC_KEY=" + strings.Repeat("ab", 32)},
		"linear":   {"WHGUARD_X_SECRET=s"},
		"stripe":   {"WHGUARD_X_SECRET=whsec_x"},
		"github":   {"WHGUARD_X_SECRET=s"},
		"mailgun":  {"WHGUARD_X_SECRET=s"},
		"sns":      nil,
		"pubsub":   {"WHGUARD_X_AUDIENCE=https://hooks.example.com/x"},
		"twitch":   {"WHGUARD_X_SECRET=0123456789"},
	} {
		_, warnings, err := loadConfig(append([]string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=x", "WHGUARD_X_SCHEME=" + scheme}, env...))
		if err != nil {
			t.Fatalf("%s: %v", scheme, err)
		}
		warned := slices.ContainsFunc(warnings, func(w string) bool {
			return strings.Contains(w, "provider x") && strings.Contains(w, "must not enforce the signature's age")
		})
		if want := strings.HasPrefix(verify.ResignSupport(scheme), "cannot"); warned != want {
			t.Errorf("%s: warned %v, want %v; warnings: %q", scheme, warned, want, warnings)
		}
	}
}

// sns and pubsub without the list of their senders are warned about: any
// AWS or Google account can subscribe the endpoint otherwise.
func TestWarnsWhenAnySenderIsAccepted(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"WHGUARD_X_SCHEME=sns"}, "WHGUARD_X_TOPIC_ARNS"},
		{[]string{"WHGUARD_X_SCHEME=pubsub", "WHGUARD_X_AUDIENCE=https://h/x"}, "WHGUARD_X_SERVICE_ACCOUNTS"},
		{[]string{"WHGUARD_X_SCHEME=sns", "WHGUARD_X_TOPIC_ARNS=arn:aws:sns:*:1:orders"}, ""},
		{[]string{"WHGUARD_X_SCHEME=pubsub", "WHGUARD_X_AUDIENCE=https://h/x", "WHGUARD_X_SERVICE_ACCOUNTS=a@p.iam.gserviceaccount.com"}, ""},
	} {
		_, warnings, err := loadConfig(append([]string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=x"}, tc.env...))
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		warned := slices.ContainsFunc(warnings, func(w string) bool {
			return strings.Contains(w, "any") && strings.Contains(w, "TOPIC_ARNS") || strings.Contains(w, "SERVICE_ACCOUNTS")
		})
		if warned != (tc.want != "") || (tc.want != "" && !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, tc.want) })) {
			t.Errorf("%v: warnings %q, want one naming %q", tc.env, warnings, tc.want)
		}
	}
}

// Secrets that are obviously wrong fail start-up naming their variable;
// whitespace around a secret is removed with a warning that names the
// variable and never the value.
func TestSecretChecks(t *testing.T) {
	dir := t.TempDir()
	file := func(content string) string {
		f, err := os.CreateTemp(dir, "secret")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(content); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return f.Name()
	}
	const whsec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	cases := []struct {
		name    string
		env     []string
		errKey  string   // the variable the one error names; "" for none
		errMsg  string   // substring of it
		secrets []string // what is configured, when no error
		warned  []string // variables warned about
	}{
		{name: "stripe secret key", env: []string{"WHGUARD_X_SCHEME=stripe", "WHGUARD_X_SECRET=sk_live_51Habc0123456789"},
			errKey: "WHGUARD_X_SECRET", errMsg: "Stripe API key (sk_…)"},
		{name: "stripe restricted key, previous", env: []string{"WHGUARD_X_SCHEME=stripe", "WHGUARD_X_SECRET=whsec_cur", "WHGUARD_X_SECRET_PREVIOUS=rk_test_51Habc0123456789"},
			errKey: "WHGUARD_X_SECRET_PREVIOUS", errMsg: "Stripe API key (rk_…)"},
		{name: "stripe publishable key in a file", env: []string{"WHGUARD_X_SCHEME=stripe", "WHGUARD_X_SECRET_FILE=" + file("whsec_cur\npk_live_51Habc0123456789\n")},
			errKey: "WHGUARD_X_SECRET_FILE", errMsg: "Stripe API key (pk_…)"},
		{name: "standard not base64", env: []string{"WHGUARD_X_SCHEME=standard", "WHGUARD_X_SECRET=whsec_!!!"},
			errKey: "WHGUARD_X_SECRET", errMsg: "expected whsec_ followed by the base64 key, as the sender shows it, or the base64 key alone"},
		{name: "svix not base64", env: []string{"WHGUARD_X_SCHEME=svix", "WHGUARD_X_SECRET_PREVIOUS=not base64!", "WHGUARD_X_SECRET=" + whsec},
			errKey: "WHGUARD_X_SECRET_PREVIOUS", errMsg: "not base64"},
		{name: "secret only whitespace", env: []string{"WHGUARD_X_SCHEME=github", "WHGUARD_X_SECRET= \n"},
			errKey: "WHGUARD_X_SECRET", errMsg: "only whitespace"},
		{name: "previous only whitespace", env: []string{"WHGUARD_X_SCHEME=github", "WHGUARD_X_SECRET=s", "WHGUARD_X_SECRET_PREVIOUS=\t"},
			errKey: "WHGUARD_X_SECRET_PREVIOUS", errMsg: "only whitespace"},
		{name: "trailing newline in the variable", env: []string{"WHGUARD_X_SCHEME=standard", "WHGUARD_X_SECRET=" + whsec + "\n"},
			secrets: []string{whsec}, warned: []string{"WHGUARD_X_SECRET"}},
		{name: "spaces around the previous", env: []string{"WHGUARD_X_SCHEME=github", "WHGUARD_X_SECRET=cur", "WHGUARD_X_SECRET_PREVIOUS=  old "},
			secrets: []string{"cur", "old"}, warned: []string{"WHGUARD_X_SECRET_PREVIOUS"}},
		{name: "file with trailing spaces and CRLF", env: []string{"WHGUARD_X_SCHEME=github", "WHGUARD_X_SECRET_FILE=" + file("one \r\n\ttwo\r\n  \n")},
			secrets: []string{"one", "two"}, warned: []string{"WHGUARD_X_SECRET_FILE"}},
		{name: "file ending with a newline: nothing to say", env: []string{"WHGUARD_X_SCHEME=stripe", "WHGUARD_X_SECRET_FILE=" + file(whsec+"\n")},
			secrets: []string{whsec}},
		{name: "file of blank lines", env: []string{"WHGUARD_X_SCHEME=github", "WHGUARD_X_SECRET_FILE=" + file(" \n\t\n")},
			errKey: "WHGUARD_X_SECRET_FILE", errMsg: "holds no secret"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, warnings, err := loadConfig(append([]string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=x"}, tc.env...))
			if tc.errKey != "" {
				errs := configErrors(err)
				var ce *configError
				if len(errs) != 1 || !errors.As(errs[0], &ce) || ce.key != tc.errKey || !strings.Contains(ce.msg, tc.errMsg) {
					t.Fatalf("want one %s error saying %q, got: %v", tc.errKey, tc.errMsg, err)
				}
				for _, kv := range tc.env {
					if v := kv[strings.Index(kv, "=")+1:]; len(strings.TrimSpace(v)) > 8 && !strings.Contains(kv, "FILE") && strings.Contains(ce.msg, v) {
						t.Errorf("error %q quotes the secret", ce.msg)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.providers[0].secrets()
			if err != nil || !slices.Equal(got, tc.secrets) {
				t.Fatalf("secrets %q (%v), want %q", got, err, tc.secrets)
			}
			var warned []string
			for _, w := range warnings {
				key, _, _ := strings.Cut(w, ":")
				warned = append(warned, key)
				for _, s := range tc.secrets {
					if strings.Contains(w, s) {
						t.Errorf("warning %q holds the secret", w)
					}
				}
			}
			if !slices.Equal(warned, tc.warned) {
				t.Fatalf("warnings %q, want one per variable %q", warnings, tc.warned)
			}
		})
	}
}

// TestBodyLimitsAndPathsRefused: limits beyond 64 MiB (one once overflowed
// the read and made every body empty), a body limit above the buffering
// budget, paths that could never match, and providers whose variables
// collide are start-up errors naming the variable.
func TestBodyLimitsAndPathsRefused(t *testing.T) {
	base := []string{"WHGUARD_PROVIDERS=x", "WHGUARD_X_SCHEME=github", "WHGUARD_X_SECRET=s", "WHGUARD_BACKEND_URL=http://127.0.0.1:1"}
	for _, c := range []struct {
		env  []string
		key  string
		hint string
	}{
		{[]string{"WHGUARD_MAX_BODY_BYTES=9223372036854775807"}, "WHGUARD_MAX_BODY_BYTES", "from 1 to 67108864"},
		{[]string{"WHGUARD_MAX_BODY_BYTES=67108865"}, "WHGUARD_MAX_BODY_BYTES", "64 MiB"},
		{[]string{"WHGUARD_X_MAX_BODY_BYTES=9223372036854775807"}, "WHGUARD_X_MAX_BODY_BYTES", "from 1 to 67108864"},
		{[]string{"WHGUARD_MAX_BUFFERED_BYTES=1000", "WHGUARD_X_MAX_BODY_BYTES=2000"}, "WHGUARD_X_MAX_BODY_BYTES", "WHGUARD_MAX_BUFFERED_BYTES"},
		{[]string{"WHGUARD_X_PATH=/hooks?x=1"}, "WHGUARD_X_PATH", "plain path"},
		{[]string{"WHGUARD_X_PATH=/hooks%2Fx"}, "WHGUARD_X_PATH", "plain path"},
		{[]string{"WHGUARD_PROVIDERS=x,x_forward", "WHGUARD_X_FORWARD_SCHEME=github", "WHGUARD_X_FORWARD_SECRET=s"}, "WHGUARD_PROVIDERS", "WHGUARD_X_FORWARD_PATH"},
	} {
		_, _, err := loadConfig(append(append([]string{}, base...), c.env...))
		if err == nil {
			t.Fatalf("%v accepted", c.env)
		}
		if !strings.Contains(err.Error(), c.key+": ") || !strings.Contains(err.Error(), c.hint) {
			t.Errorf("%v: %v; want %s and %q", c.env, err, c.key, c.hint)
		}
	}
	if _, _, err := loadConfig(append(append([]string{}, base...), "WHGUARD_MAX_BODY_BYTES=67108864", "WHGUARD_MAX_BUFFERED_BYTES=100000000")); err != nil {
		t.Fatalf("64 MiB with a budget for it refused: %v", err)
	}
	if _, _, err := loadConfig(append(append([]string{}, base...), "WHGUARD_MAX_BODY_BYTES=67108864")); err == nil ||
		!strings.Contains(err.Error(), "WHGUARD_MAX_BODY_BYTES: 67108864 is above three quarters of WHGUARD_MAX_BUFFERED_BYTES") {
		t.Fatalf("64 MiB with the default 64 MiB budget: %v", err)
	}
}

// TestBadBackendURLIsNotEchoed: a backend URL may carry a password or a
// token; the error names the variable and says what is expected, never
// the value.
func TestBadBackendURLIsNotEchoed(t *testing.T) {
	_, _, err := loadConfig([]string{"WHGUARD_PROVIDERS=x", "WHGUARD_X_SCHEME=github", "WHGUARD_X_SECRET=s",
		"WHGUARD_BACKEND_URL=ftp://user:hunter2@app/?token=s3cret"})
	if err == nil || !strings.Contains(err.Error(), "WHGUARD_BACKEND_URL: ") || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("%v", err)
	}
}

// The protection settings parse into the governor's limits: rates in
// their three units, bursts defaulting to the per-second rate rounded up.
func TestProtectionSettings(t *testing.T) {
	t.Parallel()
	c, _, err := loadConfig([]string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=x,y", "WHGUARD_X_SCHEME=none", "WHGUARD_Y_SCHEME=none",
		"WHGUARD_BACKEND_RATE_LIMIT=90/m", "WHGUARD_BACKEND_MAX_IN_FLIGHT=4",
		"WHGUARD_Y_RATE_LIMIT=3600/h", "WHGUARD_Y_RATE_BURST=7", "WHGUARD_REDIS_URL=rediss://:pw@cache:6380/2"})
	if err != nil {
		t.Fatal(err)
	}
	gc := c.gov
	if gc.Backend.Rate != (governor.Rate{N: 90, Per: time.Minute}) || gc.Backend.Burst != 2 {
		t.Errorf("backend limit %+v, want 90/m with the default burst 2", gc.Backend)
	}
	if gc.MaxInFlight != 4 || gc.SlotTTL != c.ForwardTimeout+forwarder.DefaultLeaseMargin {
		t.Errorf("in flight %d, slot TTL %s", gc.MaxInFlight, gc.SlotTTL)
	}
	if l, ok := gc.Providers["y"]; !ok || l.Rate != (governor.Rate{N: 3600, Per: time.Hour}) || l.Burst != 7 {
		t.Errorf("provider y limit %+v", gc.Providers["y"])
	}
	if _, ok := gc.Providers["x"]; ok {
		t.Error("provider x has a limit of its own")
	}
	if !c.limited() {
		t.Error("limits configured, limited() false")
	}
	c, _, err = loadConfig([]string{"WHGUARD_BACKEND_URL=http://b", "WHGUARD_PROVIDERS=x", "WHGUARD_X_SCHEME=none"})
	if err != nil {
		t.Fatal(err)
	}
	if c.limited() {
		t.Error("no limit configured, limited() true: the delivery path would ask the governor")
	}
}

// WHGUARD_REDACT_HEADERS is a comma list: space after a comma is not part
// of the next name (" X-B" would never match a header, and its values
// would show).
func TestRedactHeadersTrimmed(t *testing.T) {
	t.Parallel()
	c, _, err := loadConfig(append(baseEnv(), "WHGUARD_REDACT_HEADERS=X-Api-Key, X-Shop-Token"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.RedactHeaders, "|"); got != "X-Api-Key|X-Shop-Token" {
		t.Fatalf("redacted headers %q", got)
	}
}

// TestAppPaths: with pass-through, a provider whose own BACKEND_URL is the
// same app under another base path has its handler guarded as pass-through
// requests spell it (found: /payments/webhooks/stripe was passed on to the
// handler unverified); another app, or a handler outside the
// pass-through's base, needs nothing more.
func TestAppPaths(t *testing.T) {
	for _, c := range []struct {
		pass, backend, handler string
		want                   []string
	}{
		{"http://app:3000", "http://app:3000/payments", "/webhooks/stripe", []string{"/payments/webhooks/stripe"}},
		{"http://app:3000/", "http://app:3000/payments/", "/webhooks/stripe", []string{"/payments/webhooks/stripe"}},
		{"http://app:3000/api", "http://app:3000/api/v2", "/hook", []string{"/v2/hook"}},
		{"http://app:3000", "http://app:3000", "/webhooks/stripe", nil},
		{"http://app:3000/api", "http://app:3000/api", "/webhooks/stripe", nil},
		{"http://app:3000/api", "http://app:3000/", "/webhooks/stripe", nil},
		{"http://app:3000/api", "http://app:3000/apiary", "/hook", nil},
		{"http://app:3000", "http://other:3000/payments", "/webhooks/stripe", nil},
		{"http://app", "http://app:80/payments", "/hook", []string{"/payments/hook"}},
	} {
		if got := appPaths(c.pass, c.backend, c.handler); !slices.Equal(got, c.want) {
			t.Errorf("appPaths(%s, %s, %s) = %v, want %v", c.pass, c.backend, c.handler, got, c.want)
		}
	}
}
