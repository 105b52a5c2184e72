package main

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/whguard/whguard/proxy"
)

const refusalsUsage = `usage:
  whguard refusals [-provider P] [-reason R] [-json]

Lists the requests this replica refused lately (the last 1000: 400, 401,
403, 404 on POST, 413), newest first, each with why (its reason) and what
whguard could tell of the cause (its diagnosis: wrong_path, wrong_scheme,
encoding_hex, encoding_base64, timestamp_ms, clock_skew, body_reserialized,
url_mismatch, none) in a sentence. No header value, secret or body is
kept; -json also gives each request's header names and body length.

Talks to the admin API at WHGUARD_ADMIN_URL (default: derived from
WHGUARD_ADMIN_LISTEN) with WHGUARD_ADMIN_TOKEN: each replica keeps its own.
`

// refusalsCmd runs `whguard refusals …` and returns the exit status.
func refusalsCmd(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, refusalsUsage)
		return 0
	}
	// One command, no subcommands: adminCommand runs it as "list".
	return adminCommand("refusals", refusalsUsage, append([]string{"list"}, args...), environ, stdout, stderr,
		map[string]func(*apiClient, []string, io.Writer) error{"list": (*apiClient).refusals})
}

func (c *apiClient) refusals(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("refusals", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	provider := fs.String("provider", "", "only this provider's")
	reason := fs.String("reason", "", "only those refused for this reason (signature_mismatch, not_found, …)")
	asJSON := fs.Bool("json", false, "print the API's JSON")
	if err := fs.Parse(args); err != nil {
		return usageError(err.Error() + "\n" + refusalsUsage)
	}
	if fs.NArg() > 0 {
		return usageError(fmt.Sprintf("unexpected argument %q\n%s", fs.Arg(0), refusalsUsage))
	}
	q := url.Values{}
	for k, v := range map[string]string{"provider": *provider, "reason": *reason} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var resp struct {
		Refusals []proxy.Refusal `json:"refusals"`
	}
	if shown, err := c.view(w, "/api/refusals?"+q.Encode(), *asJSON, &resp); shown || err != nil {
		return err
	}
	if len(resp.Refusals) == 0 {
		_, err := fmt.Fprintln(w, "no refused requests kept on this replica")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tSTATUS\tPROVIDER\tPATH\tREASON\tDIAGNOSIS\tDETAIL")
	for _, r := range resp.Refusals {
		provider := r.Provider
		if provider == "" {
			provider = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s %s\t%s\t%s\t%s\n", r.At.Local().Format("2006-01-02 15:04:05"), r.Status, provider,
			r.Method, truncate(printable(r.Path), 60), r.Reason, r.Diagnosis, printable(r.Detail))
	}
	return tw.Flush()
}

// printable is s with what a terminal would act on (control characters,
// invalid UTF-8) written as Go escapes: what the admin API returns is the
// senders' and the backend's to choose (a refused request's path, decoded,
// where %1b is ESC; a body; a reply excerpt; a header value).
func printable(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r == utf8.RuneError || !unicode.IsGraphic(r) }) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if _, size := utf8.DecodeRuneInString(s[i:]); r == utf8.RuneError && size == 1 {
			fmt.Fprintf(&b, `\x%02x`, s[i]) // a byte of invalid UTF-8
			continue
		}
		switch {
		case unicode.IsGraphic(r):
			b.WriteRune(r)
		case r < utf8.RuneSelf:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// printableLines is printable for text of several lines: its line breaks
// stay.
func printableLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = printable(l)
	}
	return strings.Join(lines, "\n")
}
