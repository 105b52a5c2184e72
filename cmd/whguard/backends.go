package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/journal"
)

const backendsUsage = `usage:
  whguard backends list   [-json]
  whguard backends pause  (-backend ORIGIN | -provider P) -reason WHY [-force]
  whguard backends resume (-backend ORIGIN | -provider P) -reason WHY

A backend is an origin, scheme://host:port, as "list" shows it (host:port
alone names the one configured origin with that host and port). One that
matches no configured backend or provider is refused, naming those that
are (exit 1), unless -force: a pause of a backend about to be added. A pause
holds deliveries on every replica (none is lost or counted as an attempt)
until resumed; it is stored in the journal and survives restarts.

Talks to the admin API at WHGUARD_ADMIN_URL (default: derived from
WHGUARD_ADMIN_LISTEN) with WHGUARD_ADMIN_TOKEN.
`

// backends runs `whguard backends …` and returns the exit status.
func backends(args, environ []string, stdout, stderr io.Writer) int {
	pause := func(verb string) func(*apiClient, []string, io.Writer) error {
		return func(c *apiClient, args []string, w io.Writer) error { return c.pauseOrResume(verb, args, w) }
	}
	return adminCommand("backends", backendsUsage, args, environ, stdout, stderr, map[string]func(*apiClient, []string, io.Writer) error{
		"list":   (*apiClient).backendsList,
		"pause":  pause("pause"),
		"resume": pause("resume"),
	})
}

func (c *apiClient) backendsList(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("backends list", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print the API's JSON")
	if err := fs.Parse(args); err != nil {
		return usageError(err.Error() + "\n" + backendsUsage)
	}
	var resp forwarder.Backends
	if shown, err := c.view(w, "/api/backends", *asJSON, &resp); shown || err != nil {
		return err
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
	force := fs.Bool("force", false, "pause a backend or provider that is not configured (yet)")
	if err := fs.Parse(args); err != nil {
		return usageError(err.Error() + "\n" + backendsUsage)
	}
	if (*backend == "") == (*provider == "") || fs.NArg() > 0 {
		return usageError("give exactly one of -backend or -provider\n" + backendsUsage)
	}
	if *reason == "" {
		return usageError("-reason is required: pauses are audited")
	}
	body := map[string]any{"reason": *reason}
	if *force && verb == "pause" {
		body["force"] = true
	}
	kind, name := journal.PauseBackend, *backend
	if *provider != "" {
		kind, name = journal.PauseProvider, *provider
	}
	body[kind] = name
	// The API resolves the name (127.0.0.1:3000 is the configured
	// http://127.0.0.1:3000) and answers with the one it paused.
	var resp struct {
		Status string        `json:"status"`
		Name   string        `json:"name"`
		Pause  journal.Pause `json:"pause"`
	}
	if err := c.call(http.MethodPost, "/api/backends/"+verb, body, &resp); err != nil {
		return err
	}
	for _, n := range []string{resp.Pause.Name, resp.Name} {
		if n != "" {
			name = n
			break
		}
	}
	_, err := fmt.Fprintf(w, "%s %s: %s\n", kind, name, resp.Status)
	return err
}
