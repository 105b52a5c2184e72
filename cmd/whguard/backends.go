package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/journal"
)

const backendsUsage = `usage:
  whguard backends list   [-json]
  whguard backends pause  (-backend ORIGIN | -provider P) -reason WHY
  whguard backends resume (-backend ORIGIN | -provider P) -reason WHY

A backend is an origin, scheme://host:port, as "list" shows it. A pause
holds deliveries on every replica (none is lost or counted as an attempt)
until resumed; it is stored in the journal and survives restarts.

Talks to the admin API at WHGUARD_ADMIN_URL (default: derived from
WHGUARD_ADMIN_LISTEN) with WHGUARD_ADMIN_TOKEN.
`

// backends runs `whguard backends …` and returns the exit status.
func backends(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, backendsUsage)
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
		fmt.Fprint(stderr, backendsUsage)
		return 2
	}
	c := &apiClient{base: cfg.baseURL(), token: cfg.AdminToken, http: &http.Client{Timeout: 30 * time.Second}}
	var err error
	switch args[0] {
	case "list":
		err = c.backendsList(args[1:], stdout)
	case "pause", "resume":
		err = c.pauseOrResume(args[0], args[1:], stdout)
	default:
		fmt.Fprintf(stderr, "whguard backends: unknown subcommand %q\n\n%s", args[0], backendsUsage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "whguard backends:", err)
		if _, ok := err.(usageError); ok {
			return 2
		}
		return 1
	}
	return 0
}

func (c *apiClient) backendsList(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("backends list", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print the API's JSON")
	if err := fs.Parse(args); err != nil {
		return usageError(err.Error() + "\n" + backendsUsage)
	}
	var raw json.RawMessage
	if err := c.call(http.MethodGet, "/api/backends", nil, &raw); err != nil {
		return err
	}
	if *asJSON {
		_, err := fmt.Fprintf(w, "%s\n", raw)
		return err
	}
	var resp forwarder.Backends
	if err := json.Unmarshal(raw, &resp); err != nil {
		return fmt.Errorf("read the admin API's answer: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tPROVIDERS\tRATE\tIN FLIGHT\tBREAKER\tPAUSED\tWAITING\tOLDEST")
	for _, b := range resp.Backends {
		rate := "-"
		if b.RateLimit != "" {
			rate = fmt.Sprintf("%s burst %d", b.RateLimit, b.RateBurst)
		}
		inFlight := fmt.Sprint(b.InFlight)
		if b.MaxInFlight > 0 {
			inFlight += fmt.Sprintf("/%d", b.MaxInFlight)
		}
		paused := "-"
		if b.Paused != nil {
			paused = pausedText(*b.Paused)
		}
		oldest := "-"
		if b.Waiting > 0 {
			oldest = (time.Duration(b.OldestAgeSeconds) * time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", b.Backend, strings.Join(b.Providers, ","), rate, inFlight, b.Breaker, paused, b.Waiting, oldest)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range resp.PausedProviders {
		fmt.Fprintf(w, "provider %s paused %s\n", p.Name, pausedText(p))
	}
	return nil
}

func pausedText(p journal.Pause) string {
	return fmt.Sprintf("since %s (%s)", p.Since.UTC().Format(time.RFC3339), truncate(p.Reason, 40))
}

func (c *apiClient) pauseOrResume(verb string, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("backends "+verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	backend := fs.String("backend", "", "the backend's origin, scheme://host:port")
	provider := fs.String("provider", "", "a provider name")
	reason := fs.String("reason", "", "why (audited)")
	if err := fs.Parse(args); err != nil {
		return usageError(err.Error() + "\n" + backendsUsage)
	}
	if (*backend == "") == (*provider == "") || fs.NArg() > 0 {
		return usageError("give exactly one of -backend or -provider\n" + backendsUsage)
	}
	if *reason == "" {
		return usageError("-reason is required: pauses are audited")
	}
	body := map[string]string{"reason": *reason}
	target := ""
	if *backend != "" {
		body["backend"], target = forwarder.Origin(*backend), "backend "+forwarder.Origin(*backend)
	} else {
		body["provider"], target = *provider, "provider "+*provider
	}
	var resp struct {
		Status string `json:"status"`
	}
	if err := c.call(http.MethodPost, "/api/backends/"+verb, body, &resp); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s: %s\n", target, resp.Status)
	return err
}
