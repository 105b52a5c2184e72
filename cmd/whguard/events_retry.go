package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
)

// retry is `whguard events retry ID` and `whguard events retry -all …`:
// events waiting for their next attempt made due now, their attempts and
// budget unchanged (POST /api/events/{id}/retry, POST /api/retry). The
// reason is optional, audited when given.
func (c *apiClient) retry(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("events retry", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	reason := fs.String("reason", "", "why (optional; audited)")
	all := fs.Bool("all", false, "every event in retry matching the filters")
	provider := fs.String("provider", "", "with ID: the provider whose event id it is; with -all: only this provider")
	var search searchFlags
	search.register(fs)
	limit := fs.Int("limit", 0, "with -all: at most this many (0: all)")
	dryRun := fs.Bool("dry-run", false, "with -all: count what would be made due, change nothing")
	id, err := idAndFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case *all && id == "":
		var resp struct {
			Retried    int `json:"retried"`
			WouldRetry int `json:"would_retry"`
		}
		body := map[string]any{"provider": *provider, "limit": *limit, "reason": *reason, "dry_run": *dryRun}
		search.set(func(k string, v any) { body[k] = v })
		if err := c.call(http.MethodPost, "/api/retry", body, &resp); err != nil {
			return err
		}
		if *dryRun {
			fmt.Fprintf(w, "would make %d events in retry due now\n", resp.WouldRetry)
			return nil
		}
		fmt.Fprintf(w, "made %d events due now (attempts unchanged)\n", resp.Retried)
	case !*all && id != "":
		var resp struct {
			ID int64 `json:"id"`
		}
		if err := c.call(http.MethodPost, eventPath(id, *provider, "/retry"), map[string]string{"reason": *reason}, &resp); err != nil {
			return err
		}
		fmt.Fprintf(w, "event %d due now: attempted as soon as its backend's limits allow (attempts unchanged)\n", resp.ID)
	default:
		return usageError("give either one event id or -all\n" + eventsUsage)
	}
	return nil
}
