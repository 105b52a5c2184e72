package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/whguard/whguard/internal/catchup"
)

const catchupUsage = `usage:
  whguard catchup status  [-json]
  whguard catchup run NAME [-since D] [-dry-run]

Catch-up asks the provider's API (stripe, github) what it failed to deliver
and brings it in. "status" shows each provider's last pass; "run" runs a
pass now and prints what it found: -since replaces the window for this pass
(up to what the provider keeps), -dry-run only reports what is missing.

Talks to the admin API at WHGUARD_ADMIN_URL (default: derived from
WHGUARD_ADMIN_LISTEN) with WHGUARD_ADMIN_TOKEN.
`

// catchupCmd runs `whguard catchup …` and returns the exit status.
func catchupCmd(args, environ []string, stdout, stderr io.Writer) int {
	return adminCommand("catchup", catchupUsage, args, environ, stdout, stderr, map[string]func(*apiClient, []string, io.Writer) error{
		"status": (*apiClient).catchupStatus,
		"run":    (*apiClient).catchupRun,
	})
}

func (c *apiClient) catchupStatus(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("catchup status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print the API's JSON")
	if err := fs.Parse(args); err != nil {
		return usageError(err.Error() + "\n" + catchupUsage)
	}
	var resp struct {
		Providers []catchup.Status `json:"providers"`
	}
	if shown, err := c.view(w, "/api/catchup", *asJSON, &resp); shown || err != nil {
		return err
	}
	if len(resp.Providers) == 0 {
		_, err := fmt.Fprintln(w, "catch-up is off for every provider (WHGUARD_<NAME>_CATCHUP=on turns it on)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tWINDOW\tLAST PASS\tLISTED\tMISSING\tJOURNALED\tREDELIVERY ASKED\tNEXT PASS\tRESULT")
	for _, s := range resp.Providers {
		last, result := "never", "-"
		var listed, missing, journaled, asked int
		if p := s.LastPass; p != nil {
			last = p.Finished.Local().Format(time.DateTime)
			listed, missing, journaled, asked = p.Listed, p.Missing, p.Journaled, p.RedeliveryRequested
			result = "ok"
			if p.Error != "" {
				result = printable(p.Error) // the provider API's words, in part
			}
		}
		next := "-"
		if s.NextPass != nil {
			next = s.NextPass.Local().Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", s.Provider, s.Window, last, listed, missing, journaled, asked, next, result)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range resp.Providers {
		if len(s.Unarrived) > 0 {
			fmt.Fprintf(w, "%s: asked for three times and never arrived: %s\n", s.Provider, printable(strings.Join(s.Unarrived, ", ")))
		}
	}
	return nil
}

func (c *apiClient) catchupRun(args []string, w io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usageError("name the provider: whguard catchup run NAME\n" + catchupUsage)
	}
	name := args[0]
	fs := flag.NewFlagSet("catchup run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	since := fs.Duration("since", 0, "look back this far for this pass (default: the provider's window)")
	dry := fs.Bool("dry-run", false, "report what is missing; journal and ask for nothing")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError(err.Error() + "\n" + catchupUsage)
	}
	if fs.NArg() > 0 {
		return usageError("unexpected arguments: " + strings.Join(fs.Args(), " ") + "\n" + catchupUsage)
	}
	body := map[string]any{}
	if *since > 0 {
		body["since"] = since.String()
	}
	if *dry {
		body["dry_run"] = true
	}
	// A pass may wait 30 s for another replica's, then run up to 2 min.
	c.http.Timeout = 3 * time.Minute
	var res struct {
		Listed              int    `json:"listed"`
		Missing             int    `json:"missing"`
		Journaled           int    `json:"journaled"`
		RedeliveryRequested int    `json:"redelivery_requested"`
		Error               string `json:"error"`
	}
	if err := c.call(http.MethodPost, "/api/catchup/"+url.PathEscape(name), body, &res); err != nil {
		return err
	}
	what := "pass"
	if *dry {
		what = "dry run (nothing journaled or asked for)"
	}
	fmt.Fprintf(w, "%s %s: listed %d, missing %d, journaled %d, redelivery asked %d\n", name, what, res.Listed, res.Missing, res.Journaled, res.RedeliveryRequested)
	if res.Error != "" {
		return fmt.Errorf("the pass stopped early: %s", res.Error)
	}
	return nil
}
