package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/whguard/whguard/journal"
)

// cliConfig is what `whguard events` needs: where the admin API is and its
// token; the same variables the sidecar reads, so `kubectl exec … whguard
// events list` works with no flags.
type cliConfig struct {
	AdminListen string `env:"ADMIN_LISTEN"`
	AdminToken  string `env:"ADMIN_TOKEN"`
	// AdminURL overrides the address derived from WHGUARD_ADMIN_LISTEN.
	AdminURL string `env:"ADMIN_URL"`
}

func (c cliConfig) baseURL() string {
	if c.AdminURL != "" {
		return strings.TrimSuffix(c.AdminURL, "/")
	}
	host, port, err := net.SplitHostPort(c.AdminListen)
	if err != nil {
		return "http://" + c.AdminListen
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

const eventsUsage = `usage:
  whguard events list   [-status S] [-provider P] [FILTERS] [-limit N] [-before ID] [-json]
  whguard events show      ID [-provider P | -row] [-json]   (its story: receipts, holds, attempts, replays)
  whguard events conflicts ID [-provider P | -row]
  whguard events replay    ID [-provider P] -reason WHY
  whguard events replay -all [-status dead|done|ignored] [-provider P] [FILTERS] [-limit N] [-dry-run] -reason WHY
  whguard events retry     ID [-provider P] [-reason WHY]   (due now; its attempts stay)
  whguard events retry -all [-provider P] [FILTERS] [-limit N] [-dry-run] [-reason WHY]
  whguard events skip      ID [-provider P] -reason WHY   (a dead event releases its order key)
  whguard events overview [-window 1h] [-minutes 10] [-json]

FILTERS: -event-id ID[*]  -type invoice.*,customer.*  -since RFC3339  -until RFC3339
         -match /json/pointer=value (repeatable; searches the bodies of recent events)

ID is the journal's row id or the provider's event id (evt_…, a webhook-id);
-provider says whose when several providers used that id; -row that a
number is the row id when it is also some provider's event id.

Talks to the admin API at WHGUARD_ADMIN_URL (default: derived from
WHGUARD_ADMIN_LISTEN) with WHGUARD_ADMIN_TOKEN.
`

// events runs `whguard events …` and returns the exit status.
func events(args, environ []string, stdout, stderr io.Writer) int {
	return adminCommand("events", eventsUsage, args, environ, stdout, stderr, map[string]func(*apiClient, []string, io.Writer) error{
		"list":      (*apiClient).list,
		"show":      (*apiClient).show,
		"conflicts": (*apiClient).conflicts,
		"replay":    (*apiClient).replay,
		"retry":     (*apiClient).retry,
		"skip":      (*apiClient).skip,
		"overview":  (*apiClient).overview,
	})
}

// adminCommand runs a CLI command that talks to the admin API (`whguard
// events`, `whguard backends`): help, the address and token from the
// sidecar's own variables, the subcommand, and the exit status (2 for a
// usage or configuration mistake, 1 for a failure).
func adminCommand(name, usage string, args, environ []string, stdout, stderr io.Writer,
	subs map[string]func(*apiClient, []string, io.Writer) error) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	cfg := cliConfig{AdminListen: defaultAdminListen}
	if err := parseEnv(&cfg, envPrefix, env.ToMap(environ)); err != nil {
		fmt.Fprintln(stderr, "whguard:", err)
		return 2
	}
	if cfg.AdminToken == "" {
		fmt.Fprintln(stderr, "whguard: WHGUARD_ADMIN_TOKEN is not set: the admin API needs it")
		return 2
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	sub, ok := subs[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "whguard %s: unknown subcommand %q\n\n%s", name, args[0], usage)
		return 2
	}
	c := &apiClient{base: cfg.baseURL(), token: cfg.AdminToken, http: &http.Client{Timeout: 30 * time.Second}}
	if err := sub(c, args[1:], stdout); err != nil {
		fmt.Fprintf(stderr, "whguard %s: %v\n", name, err)
		if _, ok := err.(usageError); ok {
			return 2
		}
		return 1
	}
	return 0
}

// redactURL hides a password in an admin URL (WHGUARD_ADMIN_URL may carry
// one for a proxy in front of the admin listener).
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the configured admin URL"
	}
	return u.Redacted()
}

// isHelp reports a request for help: -h, -help, --help or help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

type usageError string

func (e usageError) Error() string { return string(e) }

type apiClient struct {
	base, token string
	http        *http.Client
}

// view GETs path for a command that prints it: with asJSON the API's
// answer is printed as it came and shown is true; otherwise it is decoded
// into out for the command to print readably.
func (c *apiClient) view(w io.Writer, path string, asJSON bool, out any) (shown bool, err error) {
	var raw json.RawMessage
	if err := c.call(http.MethodGet, path, nil, &raw); err != nil {
		return false, err
	}
	if asJSON {
		_, err := fmt.Fprintf(w, "%s\n", raw)
		return true, err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return false, fmt.Errorf("read the admin API's answer: %w", err)
	}
	return false, nil
}

func (c *apiClient) call(method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("reach the admin API at %s: %w", redactURL(c.base), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read the admin API's answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, e.Error)
	}
	return json.Unmarshal(b, out)
}

// searchFlags are the event filters of `events list` and `events replay
// -all`, under the API's names.
type searchFlags struct {
	eventID, typ, since, until string
	match                      multiFlag
}

func (sf *searchFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&sf.eventID, "event-id", "", "the provider's event id (a trailing * for a prefix)")
	fs.StringVar(&sf.typ, "type", "", "event types, comma-separated, * wildcards (invoice.*)")
	fs.StringVar(&sf.since, "since", "", "received at or after (RFC 3339)")
	fs.StringVar(&sf.until, "until", "", "received before (RFC 3339)")
	fs.Var(&sf.match, "match", "JSON-Pointer=value in the body (repeatable), e.g. /data/object/customer=cus_123")
}

// set adds the filters to an API request (query values or JSON fields).
func (sf *searchFlags) set(put func(k string, v any)) {
	for k, v := range map[string]string{"event_id": sf.eventID, "type": sf.typ, "since": sf.since, "until": sf.until} {
		if v != "" {
			put(k, v)
		}
	}
	if len(sf.match) > 0 {
		put("match", []string(sf.match))
	}
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func (c *apiClient) list(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("events list", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	status := fs.String("status", "", "pending, processing, done, retry, dead or ignored")
	provider := fs.String("provider", "", "provider name")
	var search searchFlags
	search.register(fs)
	limit := fs.Int("limit", 50, "at most this many (1-500)")
	before := fs.Int64("before", 0, "only ids below this (paging)")
	asJSON := fs.Bool("json", false, "print the API's JSON")
	if err := fs.Parse(args); err != nil {
		return usageError(err.Error() + "\n" + eventsUsage)
	}
	q := url.Values{}
	for k, v := range map[string]string{"status": *status, "provider": *provider} {
		if v != "" {
			q.Set(k, v)
		}
	}
	search.set(func(k string, v any) {
		if vs, ok := v.([]string); ok {
			q[k] = vs
			return
		}
		q.Set(k, v.(string))
	})
	q.Set("limit", strconv.Itoa(*limit))
	if *before > 0 {
		q.Set("before", strconv.FormatInt(*before, 10))
	}
	var resp struct {
		Events []journal.Summary `json:"events"`
		Next   *int64            `json:"next"`
	}
	if err := c.call(http.MethodGet, "/api/events?"+q.Encode(), nil, &resp); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(resp)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tPROVIDER\tEVENT ID\tTYPE\tATTEMPTS\tRECEIVED\tLAST ERROR")
	for _, e := range resp.Events {
		status := string(e.Status)
		if e.Held != "" {
			status += " (held: " + e.Held + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", e.ID, printable(status), printable(e.Provider), printable(e.EventID),
			printable(e.EventType), e.Attempts, e.ReceivedAt.Local().Format("2006-01-02 15:04:05"), truncate(printable(e.LastError), 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if resp.Next != nil {
		fmt.Fprintf(w, "more: whguard events list -before %d\n", *resp.Next)
	}
	return nil
}

// eventPath is the API path of one event: id is the journal's row id or
// the provider's event id (evt_…); provider, when set, says whose, and
// "row" that a number is the row id.
func eventPath(id, provider, suffix string) string {
	p := "/api/events/" + url.PathEscape(id) + suffix
	switch provider {
	case "":
	case rowProvider:
		p += "?row=true"
	default:
		p += "?provider=" + url.QueryEscape(provider)
	}
	return p
}

// rowProvider, given as -provider, says the id is the journal's row id.
const rowProvider = "-row"

func (c *apiClient) replay(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("events replay", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	reason := fs.String("reason", "", "why (audited; required)")
	all := fs.Bool("all", false, "bulk replay every matching event")
	status := fs.String("status", "dead", "with -all: dead, done or ignored")
	provider := fs.String("provider", "", "with -all: only this provider")
	var search searchFlags
	search.register(fs)
	limit := fs.Int("limit", 0, "with -all: at most this many (0: all)")
	dryRun := fs.Bool("dry-run", false, "with -all: count what would be replayed, replay nothing")
	id, err := idAndFlags(fs, args)
	if err != nil {
		return err
	}
	if *reason == "" && !*dryRun {
		return usageError("-reason is required: replays are audited")
	}
	switch {
	case *all && id == "":
		var resp struct {
			Replayed    int `json:"replayed"`
			WouldReplay int `json:"would_replay"`
		}
		body := map[string]any{"status": *status, "provider": *provider, "limit": *limit, "reason": *reason, "dry_run": *dryRun}
		search.set(func(k string, v any) { body[k] = v })
		if err := c.call(http.MethodPost, "/api/replay", body, &resp); err != nil {
			return err
		}
		if *dryRun {
			fmt.Fprintf(w, "would replay %d events\n", resp.WouldReplay)
			break
		}
		fmt.Fprintf(w, "replayed %d events\n", resp.Replayed)
	case !*all && id != "":
		var resp struct {
			ID int64 `json:"id"`
		}
		if err := c.call(http.MethodPost, eventPath(id, *provider, "/replay"), map[string]string{"reason": *reason}, &resp); err != nil {
			return err
		}
		fmt.Fprintf(w, "event %d replayed: due now, same payload and Idempotency-Key\n", resp.ID)
	default:
		return usageError("give either one event id or -all\n" + eventsUsage)
	}
	return nil
}

// skip releases the order key held by a dead event
// (WHGUARD_<NAME>_ORDER_ON_DEAD=block), so the events behind it go on.
func (c *apiClient) skip(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("events skip", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	reason := fs.String("reason", "", "why (audited; required)")
	provider := fs.String("provider", "", "the provider whose event id ID is")
	id, err := idAndFlags(fs, args)
	if err != nil {
		return err
	}
	if id == "" {
		return usageError("skip takes one event id\n" + eventsUsage)
	}
	if *reason == "" {
		return usageError("-reason is required: skips are audited")
	}
	var resp struct {
		ID int64 `json:"id"`
	}
	if err := c.call(http.MethodPost, eventPath(id, *provider, "/skip"), map[string]string{"reason": *reason}, &resp); err != nil {
		return err
	}
	fmt.Fprintf(w, "event %d skipped: it stays dead, and the events of its order key behind it go on\n", resp.ID)
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// idAndFlags parses an events subcommand's flags, taking its event id
// before or after them ("" when none is given).
func idAndFlags(fs *flag.FlagSet, args []string) (string, error) {
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return "", usageError(err.Error() + "\n" + eventsUsage)
	}
	if id == "" && fs.NArg() == 1 {
		id = fs.Arg(0)
	}
	return id, nil
}
