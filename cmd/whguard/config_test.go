package main

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

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

		{"WHGUARD_X_SCHEME", "gitbub", nil, "known: standard"},
		{"WHGUARD_X_SECRET", "whsec_!!!", []string{"WHGUARD_X_SCHEME=standard"}, "base64"},
		{"WHGUARD_X_SECRET_PREVIOUS", "whsec_!!!", []string{"WHGUARD_X_SCHEME=standard", "WHGUARD_X_SECRET=" + whsec}, "base64"},
		{"WHGUARD_X_SECRET_FILE", "/nonexistent/secrets", nil, "one secret per line"},
		{"WHGUARD_X_PATH", "hooks", nil, "must start with /"},
		{"WHGUARD_X_TOLERANCE", "-1s", nil, "positive duration"},
		{"WHGUARD_X_ID_HEADER", "bad header", nil, "letters, digits"},
		{"WHGUARD_X_MAX_BODY_BYTES", "-1", nil, "positive"},
		{"WHGUARD_X_BACKEND_URL", "ftp://x", nil, "http(s) URL"},
		{"WHGUARD_X_FORWARD_PATH", "x", nil, "must start with /"},
		{"WHGUARD_X_PUBLIC_KEY", "zz", []string{"WHGUARD_X_SCHEME=discord"}, "64 hex digits"},
		{"WHGUARD_X_PUBLIC_URL", "ftp://x/y", []string{"WHGUARD_X_SCHEME=twilio"}, "http(s)://host[:port]/path"},
		{"WHGUARD_X_HMAC_ALGORITHM", "md5", hmac, "sha256 (the default), sha512 or sha1"},
		{"WHGUARD_X_SIGNATURE_HEADER", "bad header", hmac, "letters, digits"},
		{"WHGUARD_X_SIGNATURE_ENCODING", "base32", hmac, "hex (the default) or base64"},
		{"WHGUARD_X_TIMESTAMP_HEADER", "bad header", append(hmac, "WHGUARD_X_SIGNED_CONTENT={timestamp}.{body}"), "letters, digits"},
		{"WHGUARD_X_SIGNED_CONTENT", "{nope}", hmac, "{id}, {timestamp}, {body}"},
	}
	// Variables no value of which is refused at start-up.
	anyValue := map[string]string{
		"WHGUARD_LISTEN":             "checked when listening",
		"WHGUARD_ADMIN_LISTEN":       "checked when listening",
		"WHGUARD_ADMIN_TOKEN":        "any token",
		"WHGUARD_ADMIN_URL":          "read by whguard events only",
		"WHGUARD_X_SIGNATURE_PREFIX": "any text",
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

// readmeTable returns the rows of the README tables whose header row starts
// with header, each split into its cells.
func readmeTable(t *testing.T, header string) [][]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	in, found := false, false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, header):
			in, found = true, true
		case in && strings.HasPrefix(line, "|---"):
		case in && strings.HasPrefix(line, "|"):
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			rows = append(rows, cells)
		default:
			in = false
		}
	}
	if !found {
		t.Fatalf("README.md has no table headed %q", header)
	}
	return rows
}

// The README's scheme table lists the registry's schemes, in order, with
// their required variables and default tolerances.
func TestReadmeSchemeTableMatchesRegistry(t *testing.T) {
	t.Parallel()
	varField := map[string]verify.Field{}
	for f, v := range fieldVars {
		varField[v] = f
	}
	upper := regexp.MustCompile("`([A-Z][A-Z_]*)`")
	rows := readmeTable(t, "| scheme | set |")
	var names []string
	for _, row := range rows {
		if len(row) != 5 {
			t.Fatalf("row of %d cells: %q", len(row), row)
		}
		name := strings.Trim(row[0], "`")
		names = append(names, name)

		// Required: the variables named in "set" outside parentheses and
		// before "optionally".
		set, _, _ := strings.Cut(row[1], "optionally")
		set = regexp.MustCompile(`\([^)]*\)`).ReplaceAllString(set, "")
		var required []verify.Field
		for _, m := range upper.FindAllStringSubmatch(set, -1) {
			f, ok := varField[m[1]]
			if !ok {
				t.Errorf("%s: README requires %s, not a scheme setting", name, m[1])
			}
			required = append(required, f)
		}
		if want := verify.RequiredFields(name); fmt.Sprint(required) != fmt.Sprint(want) {
			t.Errorf("%s: README requires %v, the registry %v", name, required, want)
		}

		tol, _, _ := strings.Cut(row[4], " ")
		want := verify.DefaultTolerance(name)
		switch tol {
		case "none", "—":
			if want != 0 {
				t.Errorf("%s: README says no tolerance, the registry %s", name, want)
			}
		default:
			d, err := time.ParseDuration(tol)
			if err != nil || d != want {
				t.Errorf("%s: README tolerance %q, the registry %s", name, row[4], want)
			}
		}
	}
	if fmt.Sprint(names) != fmt.Sprint(verify.KnownSchemes()) {
		t.Errorf("README schemes %v, registry %v", names, verify.KnownSchemes())
	}
}

// The README's configuration reference lists exactly the variables whguard
// reads (per-provider ones as WHGUARD_<NAME>_X), with the defaults it uses.
func TestReadmeConfigurationTableMatchesConfig(t *testing.T) {
	t.Parallel()
	token := regexp.MustCompile("`([^`]+)`")
	documented := map[string]string{} // variable → its default cell
	for _, row := range readmeTable(t, "| variable | default |") {
		if len(row) != 3 {
			t.Fatalf("row of %d cells: %q", len(row), row)
		}
		// A row may name several: `WHGUARD_<NAME>_HMAC_ALGORITHM`, `_SIGNATURE_HEADER`, …
		for _, m := range token.FindAllStringSubmatch(row[0], -1) {
			name := m[1]
			if strings.HasPrefix(name, "_") {
				name = "WHGUARD_<NAME>" + name
			}
			if _, dup := documented[name]; dup {
				t.Errorf("%s documented twice", name)
			}
			documented[name] = row[1]
		}
	}
	read := knownKeys(&config{}, envPrefix)
	for k := range knownKeys(&providerEnv{}, "WHGUARD_<NAME>_") {
		read[k] = true
	}
	for k := range read {
		if _, ok := documented[k]; !ok {
			t.Errorf("%s is read but missing from the README's configuration table", k)
		}
	}
	for k := range documented {
		if !read[k] {
			t.Errorf("README documents %s, which whguard does not read", k)
		}
	}

	// Global defaults: the README's first `value` is what defaultConfig
	// holds; a default not in backquotes ("(none)", "from …") means zero.
	def := reflect.ValueOf(defaultConfig())
	typ := def.Type()
	for i := range typ.NumField() {
		tag := typ.Field(i).Tag.Get("env")
		if tag == "" {
			continue
		}
		cell, v := documented[envPrefix+tag], def.Field(i)
		if !strings.HasPrefix(cell, "`") {
			if !v.IsZero() {
				t.Errorf("%s%s: README default %q, whguard's %v", envPrefix, tag, cell, v)
			}
			continue
		}
		doc := token.FindStringSubmatch(cell)[1]
		var same bool
		switch x := v.Interface().(type) {
		case time.Duration:
			d, err := time.ParseDuration(doc)
			same = err == nil && d == x
		default:
			same = fmt.Sprint(x) == doc
		}
		if !same {
			t.Errorf("%s%s: README default %q, whguard's %v", envPrefix, tag, doc, v)
		}
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
	want := defaultConfig()
	want.BackendURL, want.Providers = "http://b", []string{"x"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("config %+v\nwant     %+v", got, want)
	}
}
