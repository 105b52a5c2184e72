package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/verify"
)

// The reference tables of docs/ are generated from the configuration
// structs and the scheme registry, and checked here: a variable or scheme
// added, removed or given another default makes this test fail until
// `make docs` (WHGUARD_UPDATE_DOCS=1) writes them again.

// varDoc documents one variable: what it means, and its default in words
// when the struct's default does not say it (required, derived, none).
type varDoc struct {
	def, meaning string
}

// globalDocs documents every field of config, by its env tag.
var globalDocs = map[string]varDoc{
	"LISTEN":                {"", "webhook ingress address"},
	"ADMIN_LISTEN":          {"", "admin listener (health, readiness, metrics, inspector, API)"},
	"ADMIN_TOKEN":           {"(none)", "bearer token for the API and inspector; unset keeps the API closed"},
	"ADMIN_URL":             {"from `WHGUARD_ADMIN_LISTEN`", "where `whguard events` and `whguard backends` find the admin API"},
	"DATABASE_URL":          {"", "`postgres://…` for production; `sqlite:PATH` for the embedded journal"},
	"DATABASE_LISTEN_URL":   {"(none: `WHGUARD_DATABASE_URL` serves)", "a direct `postgres://…` connection to the same database, for what needs a session (LISTEN, the session locks of migrations and vacuum) when `WHGUARD_DATABASE_URL` goes through a transaction pooler such as PgBouncer (docs/operations.md, \"Connection poolers\")"},
	"JOURNAL_REPLICATION":   {"(none: PostgreSQL's replication)", "`storage` when the database service replicates its storage below PostgreSQL (Aurora, AlloyDB): no warning when the primary has no synchronous standby (docs/operations.md, \"HA PostgreSQL\")"},
	"BACKEND_URL":           {"(required unless every provider sets its own)", "base URL events are forwarded to"},
	"PROVIDERS":             {"(required)", "comma-separated provider names, e.g. `stripe,github`"},
	"MAX_BODY_BYTES":        {"", "body limit for every provider; at most `67108864` (64 MiB)"},
	"MAX_BUFFERED_BYTES":    {"`67108864` (64 MiB)", "request bodies being read at once, all requests together; when spent, a request gets `503` with `Retry-After: 1` before its body is read (large bodies, over 64 KiB, may hold three quarters of it)"},
	"METRICS_LISTEN":        {"(none: metrics stay on the admin listener)", "a listener serving only `/metrics`, `/healthz` and `/readyz`, whatever the `Host`, for scrapers and orchestrator probes"},
	"ADMIN_HOSTS":           {"(none)", "comma list of `Host` names the admin listener answers besides loopback ones (`localhost`, `127.0.0.1`, `::1`); others get `421`"},
	"PASS_THROUGH":          {"", "`true` puts whguard in front of all of the app's traffic: a request to no provider's path goes to `WHGUARD_BACKEND_URL` (any method, streamed both ways with a 2-minute idle timeout and no total deadline, with `X-Forwarded-*` and the user's `Host`), neither verified nor journaled; client-sent `X-Whguard-*` and `Idempotency-Key` headers are dropped, and any other spelling of a provider's path or `FORWARD_PATH` (a trailing slash, `//`, `%2F`, `.` segments, letter case, `;params`, a `.json` suffix) is answered `404`, so it never reaches the app's webhook handler unverified; `false` answers `404` to everything that is no provider's path (route only the webhook paths to whguard)"},
	"REDACT_HEADERS":        {"(none)", "comma list of headers, besides `Authorization`, `Proxy-Authorization`, `Cookie`, `Set-Cookie`, `X-Gitlab-Token` and `X-Telegram-Bot-Api-Secret-Token`, that the API, inspector and CLI show as `[redacted]` (they are still stored and forwarded; `msgraph` bodies' `clientState` values are shown as `[redacted]` too)"},
	"FORWARD_TIMEOUT":       {"", "one delivery attempt"},
	"FORWARD_CONCURRENCY":   {"", "requests to the backend in flight at most, per process (as many finished ones may be waiting for their outcome to be written); within it the number adapts to the backend, from 16: it grows while the backend's latency holds or the delivery rate still rises, and halves when 5 % of attempts show the backend short of capacity (timeouts, refused connections, `429`, `502`–`504`); one limit per process, shared by its backends ([delivery.md](delivery.md), \"Backpressure\")"},
	"RETRY_BASE_DELAY":      {"", "backoff ceiling before the first retry"},
	"RETRY_MAX_DELAY":       {"", "backoff cap (a `Retry-After` may ask for up to 1 h)"},
	"RETRY_MAX_ATTEMPTS":    {"", "attempts before an event is quarantined (`dead`)"},
	"DEDUP_RETENTION":       {"`840h` (35 days)", "how long a delivered event's key is kept ([operations.md](operations.md), \"Retention\")"},
	"PAYLOAD_RETENTION":     {"`168h` (7 days)", "how long a delivered event's body and headers are kept"},
	"SHUTDOWN_TIMEOUT":      {"", "how long in-flight requests and deliveries may take after SIGTERM"},
	"LOG_LEVEL":             {"", "`debug`, `info`, `warn`, `error`"},
	"LOG_FORMAT":            {"", "`json`, or `console` for people"},
	"REDIS_URL":             {"(none: limits kept per process)", "`redis://host:port/db` (`rediss://` for TLS), or `redis+sentinel://host1:26379,host2:26379/MASTER_NAME/db` for a master under Sentinel: the limits, in-flight slots and breaker state every replica shares ([protection.md](protection.md)); whguard starts while it is down (deliveries that need it wait)"},
	"REDIS_NAMESPACE":       {"(derived from the journal)", "names this deployment in every Redis key (1–64 letters, digits, `.`, `_`, `-`); by default a digest of the journal's identity (PostgreSQL: the cluster's system identifier and the database; embedded: the host and file), so replicas of one journal share state and two deployments sharing one Redis share none"},
	"BACKEND_RATE_LIMIT":    {"(none)", "delivery attempts started per backend, all replicas together: `N/s`, `N/m` or `N/h`"},
	"BACKEND_RATE_BURST":    {"(the per-second rate rounded up, at least 1)", "attempts that may start at once above the rate after a quiet spell"},
	"BACKEND_MAX_IN_FLIGHT": {"(none)", "requests in flight to one backend, all replicas together (`WHGUARD_FORWARD_CONCURRENCY` stays the per-process cap)"},
	"BREAKER":               {"", "circuit breaker per backend, `on` or `off`"},
	"BREAKER_WINDOW":        {"", "the span over which attempts are counted"},
	"BREAKER_MIN_ATTEMPTS":  {"", "attempts that must have ended in the window before the breaker may open"},
	"BREAKER_FAILURE_RATIO": {"", "share of those that failed (connection error, timeout, `408`, `429`, `502`–`504`; a `500` or other `5xx` only while nothing succeeded within the window) that opens it"},
	"BREAKER_COOLDOWN":      {"", "wait before one probe delivery; doubles while probes fail, up to `5m`"},
	"ALERT_URL":             {"(none: no alerts)", "where alerts are POSTed (a Slack incoming-webhook URL, or any endpoint for `json`); never logged, it may hold a token ([inspecting.md](inspecting.md), \"Alerts\")"},
	"ALERT_FORMAT":          {"", "`slack` (a message with `text` and `blocks`) or `json` (`{\"type\",\"severity\",\"summary\",\"provider\",\"backend\",\"event_id\",\"at\"}`)"},
	"ALERT_SECRET":          {"(none: unsigned)", "`whsec_…` secret: `json` alerts are signed as a Standard Webhook (`webhook-id`, `webhook-timestamp`, `webhook-signature`)"},
	"ALERT_REPEAT":          {"", "a condition that lasts is reported again this often; dead events of one provider are reported at most this often"},
	"ALERT_BACKLOG_AGE":     {"", "a backend whose oldest undelivered event is older than this is reported (and again when it is back under)"},
}

// providerDocs documents every field of providerEnv, by its env tag.
var providerDocs = map[string]varDoc{
	"SCHEME":              {"(required)", "one of the schemes of [providers.md](providers.md)"},
	"SECRET":              {"", "the signing secret; whitespace around it is removed, with a warning"},
	"SECRET_PREVIOUS":     {"", "an older secret still accepted during a rotation"},
	"SECRET_FILE":         {"", "a file with one secret per line, current first (mounted secrets); read again when it changes, without a restart ([providers.md](providers.md#rotating-a-secret))"},
	"BACKEND_SECRET":      {"(the sender's secrets)", "the only secret deliveries are re-signed with, in the scheme's format (`whsec_…` for `standard`, `svix`): the backend verifies with it, and rotating the sender's secret never touches it ([providers.md](providers.md), \"Re-signing\"); schemes that re-sign only, not with `RESIGN=false`; never logged or shown"},
	"BACKEND_SECRET_FILE": {"", "a file whose first non-blank line is `BACKEND_SECRET` instead (not both); read again when it changes"},
	"PUBLIC_KEY":          {"", "`sendgrid`, `discord`"},
	"PUBLIC_KEY_FILE":     {"", "a file holding `PUBLIC_KEY` instead (not both), one key per line, current first; read again when it changes"},
	"ROTATION_OVERLAP":    {"`1h`", "how long the values `SECRET_FILE`, `PUBLIC_KEY_FILE` and `BACKEND_SECRET_FILE` held before they changed stay accepted (and signed with, where a header carries several signatures); `0` drops them at once"},
	"PUBLIC_URL":          {"", "`twilio`, `square`: the URL the sender posts to, without query"},
	"VERIFY_TOKEN":        {"", "`meta` (required): the Verify Token you chose for the subscription's GET handshake; never logged or shown"},
	"BASIC_AUTH":          {"", "`postmark` (required): the `user:password` written into the webhook URL; never logged or shown"},
	"KEY_HOSTS":           {"the scheme's own hosts", "`sns`, `pubsub`: comma list of the hosts keys may be fetched from, over HTTPS (`host`, or `*.suffix`): AWS China or GovCloud, a test key server"},
	"CA_FILE":             {"(the system's)", "`sns`, `pubsub`: a PEM file of the CAs trusted for the key hosts"},
	"TOPIC_ARNS":          {"(none: any topic, warned at start-up)", "`sns`: comma list of the topic ARNs accepted (`*` matches any run of characters); a message or subscription confirmation of another topic is refused (`401`) before anything is fetched. Any AWS account can subscribe your endpoint to a topic of its own: set it"},
	"SERVICE_ACCOUNTS":    {"(none: any account, warned at start-up)", "`pubsub`: comma list of the service-account emails the push subscriptions authenticate as; a token of another account, or with `email_verified` false, is refused. Any Google account can push to your endpoint with your audience: set it"},
	"AUDIENCE":            {"", "`pubsub` (required): the audience the push subscription's tokens carry (Google's default: the push endpoint URL)"},
	"HMAC_ALGORITHM":      {"`sha256`", "`hmac`: `sha256`, `sha512` or `sha1`"},
	"SIGNATURE_HEADER":    {"", "`hmac`: the header holding the signature (required)"},
	"SIGNATURE_ENCODING":  {"`hex`", "`hmac`: `hex` or `base64`"},
	"SIGNATURE_PREFIX":    {"", "`hmac`: what precedes the encoded signature, e.g. `sha256=`"},
	"TIMESTAMP_HEADER":    {"", "`hmac`: the header holding the signed unix timestamp"},
	"SIGNED_CONTENT":      {"`{body}`", "`hmac`: a template over `{id}` (from `ID_HEADER`), `{timestamp}` and `{body}`"},
	"PATH":                {"`/webhooks/<name>`", "ingress path"},
	"TOLERANCE":           {"the scheme's default", "maximum timestamp age, in both directions"},
	"ID_HEADER":           {"", "take the event id from this header instead"},
	"MAX_BODY_BYTES":      {"`WHGUARD_MAX_BODY_BYTES`", "body limit for this provider"},
	"BACKEND_URL":         {"`WHGUARD_BACKEND_URL`", "this provider's backend"},
	"FORWARD_PATH":        {"the received path", "path to forward to instead"},
	"RESIGN":              {"`true` where the scheme can re-sign, else `false`", "forward a fresh signature made at each attempt with the current secret (every accepted one for `stripe`, `standard`, `svix`; `BACKEND_SECRET` when set: [providers.md](providers.md), \"Re-signing\"); `true` on a scheme that cannot is refused at start-up"},
	"BODY_GUARD":          {"`true` where the scheme's event id is not signed, else `false`", "the same signed body arriving under a fresh event id is a replay of a captured request: acknowledged like a duplicate (`200`), recorded on the first event as a conflicting copy, counted as `whguard_ingress_requests_total{result=\"replay\"}`, never forwarded. Set `false` for a sender that legitimately sends identical bodies under different ids"},
	"RATE_LIMIT":          {"(none)", "a rate limit (`N/s`, `N/m`, `N/h`) for this provider's deliveries, on top of the backend's"},
	"RATE_BURST":          {"(the per-second rate rounded up, at least 1)", "the burst of that limit"},
	"ORDER_KEY":           {"(none: unordered)", "where the event's order key is: a JSON Pointer into the body (`/data/object/id` for Stripe) or `header:<Name>`; events of this provider with the same key value are delivered one at a time, in the order received ([delivery.md](delivery.md), \"Per-key order\")"},
	"CATCHUP":             {"`off`", "`on` asks the provider's API for what it failed to deliver ([catch-up](catchup.md)); schemes `stripe` and `github` only"},
	"CATCHUP_TOKEN":       {"", "the API credential: a Stripe restricted key (`rk_…`) with Events read, or a GitHub token that can read and redeliver the hook's deliveries; never logged or shown"},
	"CATCHUP_TOKEN_FILE":  {"", "a file holding the credential instead (not both); read again at each pass, so a rotated file is used from the next one"},
	"CATCHUP_API_URL":     {"`https://api.stripe.com`, `https://api.github.com`", "the API's base URL (GitHub Enterprise Server: `https://HOST/api/v3`); `http://` only to a loopback host"},
	"CATCHUP_HOOK":        {"", "github, required with catch-up: `repos/OWNER/REPO/hooks/ID` or `orgs/ORG/hooks/ID`"},
	"CATCHUP_ENDPOINT":    {"", "stripe: the webhook endpoint (`we_…`) whose enabled event types are brought in; unset: every type"},
	"CATCHUP_INTERVAL":    {"`5m`", "time between passes; the first runs at start-up"},
	"CATCHUP_WINDOW":      {"`72h`", "how far back a pass looks: at most `720h` (Stripe) or `72h` (GitHub)"},
	"ORDER_ON_DEAD":       {"`skip`", "`skip`: a dead event releases its key and the next one goes; `block`: its key waits until it is replayed (and delivered) or skipped (`whguard events skip`)"},
	"PRESERVE_HOST":       {"`false`", "forward with the `Host` the sender used (for backends that check it, or sign it) instead of the backend's"},
	"EVENT_TYPES":         {"(none: every type is forwarded)", "comma list of event types to forward, `*` matching any run of characters (`invoice.*,customer.subscription.*`); other verified events are acknowledged as usual and journaled as `ignored`, never forwarded unless replayed ([providers.md](providers.md), \"Filtering by event type\")"},
	"MODE":                {"`async`", "`async`: the sender gets `202` once the event is journaled; `sync`: the sender gets the backend's `2xx` answer to the first attempt when it comes within `_SYNC_TIMEOUT`, and so do the event's duplicates ([backend.md](backend.md), \"Sync replies\"); not for `discord`, which whguard answers itself"},
	"SYNC_TIMEOUT":        {"`2s`", "how long a sync-mode sender waits for the backend's answer, counted from the request's arrival: above `0`, at most `25s`"},
}

// configurationDoc renders docs/configuration.md.
func configurationDoc(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`# Configuration

<!-- Generated from cmd/whguard's configuration structs by ` + "`make docs`" + `; do not edit by hand. -->

Everything is an environment variable; durations use Go syntax (` + "`90s`, `5m`, `840h`" + `). An invalid value
makes whguard exit with status 2 and a message naming the variable and what it accepts, one line per
bad variable (all of them are reported at once).

**An unknown ` + "`WHGUARD_*`" + ` variable** (one whguard does not read) is named with what it probably meant:
the known variable nearest to it (the plural's S left off ` + "`WHGUARD_PROVIDERS`" + `, two letters of
` + "`WHGUARD_STRIPE_SECRET`" + ` swapped: each gets "did you mean" the right one), among the global variables
and the per-provider ones of the configured providers, or the provider missing from ` + "`WHGUARD_PROVIDERS`" + `
(` + "`WHGUARD_GITHUB_SECRET`" + ` without ` + "`github`" + ` there). When start-up otherwise succeeds it is a warning in the
log, and whguard runs: a typo in an optional setting does not stop production. When start-up fails,
the unknown variables are printed first, as ` + "`whguard: warning: unknown variable …`" + ` lines before the
` + "`whguard: invalid configuration: …`" + ` ones, since the typo is often what the errors are about
(a misspelt ` + "`WHGUARD_PROVIDERS`" + ` leaves no provider configured).

| variable | default | meaning |
|---|---|---|
`)
	def := reflect.ValueOf(defaultConfig())
	typ := def.Type()
	seen := map[string]bool{}
	for i := range typ.NumField() {
		tag := typ.Field(i).Tag.Get("env")
		if tag == "" {
			continue
		}
		seen[tag] = true
		d, ok := globalDocs[tag]
		if !ok {
			t.Errorf("WHGUARD_%s has no entry in globalDocs", tag)
			continue
		}
		// Words that start with a value must give whguard's own.
		if v := def.Field(i); d.def != "" && strings.HasPrefix(d.def, "`") && !v.IsZero() {
			if own := defaultCell("", v); !strings.HasPrefix(d.def, own) {
				t.Errorf("WHGUARD_%s: documented default %s, whguard's %s", tag, d.def, own)
			}
		}
		fmt.Fprintf(&b, "| `%s%s` | %s | %s |\n", envPrefix, tag, defaultCell(d.def, def.Field(i)), d.meaning)
	}
	for tag := range globalDocs {
		if !seen[tag] {
			t.Errorf("globalDocs documents WHGUARD_%s, which whguard does not read", tag)
		}
	}
	b.WriteString(`
Per provider ` + "`NAME`" + ` (the upper-cased name from ` + "`WHGUARD_PROVIDERS`" + `):

| variable | default | meaning |
|---|---|---|
`)
	ptyp := reflect.TypeOf(providerEnv{})
	seen = map[string]bool{}
	for i := range ptyp.NumField() {
		tag := ptyp.Field(i).Tag.Get("env")
		if tag == "" {
			continue
		}
		seen[tag] = true
		d, ok := providerDocs[tag]
		if !ok {
			t.Errorf("WHGUARD_<NAME>_%s has no entry in providerDocs", tag)
			continue
		}
		fmt.Fprintf(&b, "| `WHGUARD_<NAME>_%s` | %s | %s |\n", tag, d.def, d.meaning)
	}
	for tag := range providerDocs {
		if !seen[tag] {
			t.Errorf("providerDocs documents WHGUARD_<NAME>_%s, which whguard does not read", tag)
		}
	}
	b.WriteString(`
**Secrets that are obviously wrong stop start-up**, naming the variable (never the value): a ` + "`stripe`" + `
secret that is an API key (` + "`sk_…`, `rk_…`, `pk_…`" + `) rather than the endpoint's ` + "`whsec_…`" + ` signing
secret; a ` + "`standard` or `svix`" + ` secret that is neither ` + "`whsec_`" + `+base64 nor plain base64; a secret that
is only whitespace; a placeholder copied from the docs, a value that is or ends with ` + "`...`" + ` or ` + "`…`" + `
(` + "`whsec_...`, `whsec_…`" + `), in any variable or file that holds a secret or credential (` + "`_SECRET`" + `,
` + "`_SECRET_PREVIOUS`" + `, each line of ` + "`_SECRET_FILE`" + `, ` + "`_CATCHUP_TOKEN`" + ` and its file, ` + "`_VERIFY_TOKEN`" + `,
` + "`_BASIC_AUTH`" + `, ` + "`WHGUARD_ALERT_SECRET`, `WHGUARD_ADMIN_TOKEN`" + `); a real secret ending so cannot be
configured. **Whitespace around a secret is removed**, in ` + "`_SECRET`, `_SECRET_PREVIOUS`" + ` and each line of
` + "`_SECRET_FILE`" + `, and logged as a warning naming the variable: such a secret is almost never intended (a
file written with a trailing newline, ` + "`kubectl create secret --from-file`" + `, a copy-paste), and kept
it would make every signature fail. A secret that really begins or ends with whitespace cannot be
configured.
`)
	return b.String()
}

// defaultCell writes a global variable's default: the words given, or the
// value defaultConfig holds, or (none) for a zero value.
func defaultCell(words string, v reflect.Value) string {
	if words != "" {
		return words
	}
	switch x := v.Interface().(type) {
	case bool:
		return fmt.Sprintf("`%v`", x)
	case time.Duration:
		switch {
		case x == 0:
			return "(none)"
		case x%time.Hour == 0:
			return fmt.Sprintf("`%dh`", x/time.Hour)
		case x%time.Minute == 0:
			return fmt.Sprintf("`%dm`", x/time.Minute)
		}
		return "`" + x.String() + "`"
	}
	if v.IsZero() {
		return "(none)"
	}
	return fmt.Sprintf("`%v`", v.Interface())
}

// providersTable renders the scheme table of docs/providers.md.
func providersTable(t *testing.T) string {
	t.Helper()
	rows, undocumented := verify.Reference()
	for _, s := range undocumented {
		t.Errorf("scheme %s has no SchemeDoc in verify's registry_docs.go", s)
	}
	var b strings.Builder
	b.WriteString("| scheme | set | signature checked | event id | tolerance default | re-signed on delivery | event type from | answers itself |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s | %s |\n", r.Name, r.Set, r.Signature, r.EventID, r.ToleranceText, r.ResignText, r.EventType, r.Handshake)
	}
	return b.String()
}

// Markers around the generated part of a hand-written page.
const (
	generatedBegin = "<!-- generated: begin (make docs) -->\n"
	generatedEnd   = "<!-- generated: end -->\n"
)

// TestGeneratedDocsAreCurrent: docs/configuration.md and the scheme table
// of docs/providers.md are what the code says. WHGUARD_UPDATE_DOCS=1
// (make docs) writes them.
func TestGeneratedDocsAreCurrent(t *testing.T) {
	t.Parallel()
	update := os.Getenv("WHGUARD_UPDATE_DOCS") == "1"
	check := func(path, want string) {
		t.Helper()
		got, err := os.ReadFile(path)
		if err != nil && !update {
			t.Fatal(err)
		}
		if string(got) == want {
			return
		}
		if update {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s is stale: run `make docs`", path)
	}
	check("../../docs/configuration.md", configurationDoc(t))

	page, err := os.ReadFile("../../docs/providers.md")
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(page), generatedBegin)
	_, after, ok2 := strings.Cut(rest, generatedEnd)
	if !ok1 || !ok2 {
		t.Fatalf("docs/providers.md lacks the generated table's markers")
	}
	check("../../docs/providers.md", before+generatedBegin+providersTable(t)+generatedEnd+after)

	page, err = os.ReadFile("../../docs/delivery.md")
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 = strings.Cut(string(page), generatedBegin)
	_, after, ok2 = strings.Cut(rest, generatedEnd)
	if !ok1 || !ok2 {
		t.Fatalf("docs/delivery.md lacks the generated table's markers")
	}
	check("../../docs/delivery.md", before+generatedBegin+transitionsTable()+generatedEnd+after)
}

// transitionsTable is journal.Transitions as docs/delivery.md shows it.
func transitionsTable() string {
	var b strings.Builder
	b.WriteString("| from | what happens | to | attempts | due | order key |\n|---|---|---|---|---|---|\n")
	statuses := func(ss []journal.Status) string {
		if len(ss) == 0 {
			return "(new)"
		}
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = "`" + string(s) + "`"
		}
		return strings.Join(out, ", ")
	}
	for _, tr := range journal.Transitions {
		attempts := "unchanged"
		if tr.Attempts != 0 {
			attempts = fmt.Sprintf("%+d", tr.Attempts)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", statuses(tr.From), tr.What, statuses(tr.To), attempts, tr.Due, tr.Order)
	}
	return b.String()
}

// The variables a provider's scheme requires are named in its docs row.
func TestProvidersTableNamesRequiredVariables(t *testing.T) {
	t.Parallel()
	rows, _ := verify.Reference()
	for _, r := range rows {
		var missing []string
		for _, f := range verify.RequiredFields(r.Name) {
			v := verifyVars[f]
			if !strings.Contains(r.Set, "`"+v+"`") {
				missing = append(missing, v)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s's row does not name %v", r.Name, missing)
		}
	}
}

// TestDocLinksResolve: every relative link of the README and docs/ names a
// file that exists, and, with an anchor, a heading of that file.
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	pages, _ := filepath.Glob("../../docs/*.md")
	pages = append(pages, "../../README.md", "../../BENCHMARKS.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headings := map[string]map[string]bool{}
	slugs := func(path string) map[string]bool {
		if h, ok := headings[path]; ok {
			return h
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		h := map[string]bool{}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "#") {
				title := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
				slug := regexp.MustCompile(`[^a-z0-9 _-]`).ReplaceAllString(title, "")
				h[strings.ReplaceAll(slug, " ", "-")] = true
			}
		}
		headings[path] = h
		return h
	}
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s: no such file", page, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !slugs(path)[anchor] {
				t.Errorf("%s links to %s: no such heading", page, target)
			}
		}
	}
}
