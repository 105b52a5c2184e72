package catchup

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v89/github"
	"go.uber.org/zap"

	"github.com/whguard/whguard/journal"
)

// guid is what a pass saw of one GUID in the hook's deliveries.
type guid struct {
	codes []int
	// last is its most recent delivery, the one a redelivery repeats.
	last int64
}

// githubPass reads the hook's deliveries back to p.Since (100 a page,
// newest first, following the Link cursor; without GitHub's status
// filter, whose failure class leaves out connection failures), groups
// them by GUID, and asks GitHub to redeliver each GUID DecideGUID says to
// ask for, one request at a time, RedeliverySpacing apart. GitHub then
// delivers it, signed, to the ingress. A pass stops early when fewer than
// a fifth of the API's rate limit is left: it asks for nothing then, and
// fails saying so.
func (c *Catchup) githubPass(ctx context.Context, cfg Config, p *journal.CatchupPass, dryRun bool) error {
	token, err := cfg.Token()
	if err != nil {
		return fmt.Errorf("read the credential: %w", err)
	}
	base := strings.TrimSuffix(cfg.APIURL, "/") + "/"
	gc, err := github.NewClient(github.WithHTTPClient(c.opt.Client), github.WithAuthToken(token), github.WithURLs(&base, &base))
	if err != nil {
		return fmt.Errorf("GitHub client: %w", err)
	}
	h, _ := parseHook(cfg.Hook) // checked by Validate
	list := func(opts *github.ListCursorOptions) ([]*github.HookDelivery, *github.Response, error) {
		if h.org != "" {
			return gc.Organizations.ListHookDeliveries(ctx, h.org, h.id, opts)
		}
		return gc.Repositories.ListHookDeliveries(ctx, h.owner, h.repo, h.id, opts)
	}
	redeliver := func(id int64) error {
		var err error
		if h.org != "" {
			_, _, err = gc.Organizations.RedeliverHookDelivery(ctx, h.org, h.id, id)
		} else {
			_, _, err = gc.Repositories.RedeliverHookDelivery(ctx, h.owner, h.repo, h.id, id)
		}
		if _, accepted := errors.AsType[*github.AcceptedError](err); accepted {
			return nil // 202: GitHub will deliver it
		}
		return err
	}

	seen := map[string]*guid{}
	var order []string
	paced := false
	var rate github.Rate // the last answer's, when paced
	opts := &github.ListCursorOptions{PerPage: 100}
pages:
	for {
		ds, resp, err := list(opts)
		if err != nil {
			return githubReason("list the hook's deliveries", err)
		}
		for _, d := range ds {
			if d.DeliveredAt != nil && d.DeliveredAt.Before(p.Since) {
				break pages // newest first: the rest is older still
			}
			g := seen[d.GetGUID()]
			if g == nil {
				g = &guid{last: d.GetID()}
				seen[d.GetGUID()] = g
				order = append(order, d.GetGUID())
			}
			g.codes = append(g.codes, d.GetStatusCode())
		}
		if Paced(resp.Rate.Remaining, resp.Rate.Limit) {
			paced, rate = true, resp.Rate
			break
		}
		if resp.Cursor == "" {
			break
		}
		opts.Cursor = resp.Cursor
	}
	p.Listed = len(order)
	// Stopped early, the pass asks for nothing and fails, saying why: a
	// hook whose passes always stop early is never caught up, which must
	// not look like success.
	pacedErr := func() error {
		if !paced {
			return nil
		}
		return fmt.Errorf("stopped early, asking for nothing: under a fifth of GitHub's rate limit is left (%d of %d) until %s",
			rate.Remaining, rate.Limit, rate.Reset.UTC().Format(time.RFC3339))
	}
	if len(order) == 0 {
		return pacedErr()
	}
	known, err := c.known(ctx, cfg.Provider, order)
	if err != nil {
		return fmt.Errorf("look the deliveries up in the journal: %w", err)
	}
	reqs, err := c.opt.Journal.CatchupRequests(ctx, cfg.Provider)
	if err != nil {
		return fmt.Errorf("read the redeliveries asked for: %w", err)
	}
	asked := make(map[string]*journal.CatchupRequest, len(reqs))
	for i := range reqs {
		asked[reqs[i].GUID] = &reqs[i]
	}
	var gaveUp, arrived []string
	sent := 0
	for _, id := range order {
		g, req := seen[id], asked[id]
		delivered := Delivered(g.codes)
		if req != nil && (known[id] || delivered) {
			arrived = append(arrived, id)
		}
		if !known[id] && !delivered && req == nil {
			p.Missing++
		}
		if dryRun || paced {
			continue
		}
		switch DecideGUID(known[id], delivered, req, c.opt.Now(), cfg.Interval) {
		case Ask:
			if sent > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(c.opt.RedeliverySpacing):
				}
			}
			// Recorded before it is asked for: GitHub may deliver it
			// before it answers, and the ingress marks the GUID as
			// catch-up's by this record. Refused, it is put back.
			r := journal.CatchupRequest{GUID: id, DeliveryID: g.last, Requests: 1, LastAt: c.opt.Now()}
			if req != nil {
				r.Requests = req.Requests + 1
			}
			if err := c.opt.Journal.SaveCatchupRequest(ctx, cfg.Provider, r); err != nil {
				return fmt.Errorf("record the redelivery asked for: %w", err)
			}
			if err := redeliver(g.last); err != nil {
				c.unask(ctx, cfg.Provider, id, req)
				return githubReason("ask for a redelivery", err)
			}
			sent++
			p.RedeliveryRequested++
		case GiveUp:
			r := *req
			r.GaveUp = true
			if err := c.opt.Journal.SaveCatchupRequest(ctx, cfg.Provider, r); err != nil {
				return fmt.Errorf("record a delivery given up on: %w", err)
			}
			gaveUp = append(gaveUp, id)
		}
	}
	// What arrived, and what GitHub no longer lists, needs no record.
	if !dryRun {
		before := c.opt.Now().Add(-Retention(KindGitHub))
		if err := c.opt.Journal.ForgetCatchupRequests(ctx, cfg.Provider, arrived, before); err != nil {
			return fmt.Errorf("forget the redeliveries that arrived: %w", err)
		}
	}
	if len(gaveUp) > 0 {
		c.opt.Metrics.gaveUp(cfg.Provider, len(gaveUp))
		if c.opt.Alerts != nil {
			c.opt.Alerts.GaveUp(cfg.Provider, gaveUp)
		}
	}
	return pacedErr()
}

// unask puts back the record of a redelivery GitHub refused: as it was
// (prev), or none.
func (c *Catchup) unask(ctx context.Context, provider, id string, prev *journal.CatchupRequest) {
	ctx = context.WithoutCancel(ctx)
	var err error
	if prev != nil {
		err = c.opt.Journal.SaveCatchupRequest(ctx, provider, *prev)
	} else {
		err = c.opt.Journal.ForgetCatchupRequests(ctx, provider, []string{id}, time.Time{})
	}
	if err != nil {
		c.log.Warn("catch-up: put back a refused redelivery's record", zap.String("provider", provider), zap.Error(err))
	}
}

// githubReason says why a GitHub call failed: its status and, for rate
// limits, when to try again.
func githubReason(what string, err error) error {
	if rl, ok := errors.AsType[*github.RateLimitError](err); ok {
		return fmt.Errorf("%s: GitHub's rate limit is spent until %s", what, rl.Rate.Reset.UTC().Format(time.RFC3339))
	}
	if ab, ok := errors.AsType[*github.AbuseRateLimitError](err); ok {
		wait := "later"
		if ab.RetryAfter != nil {
			wait = "in " + ab.RetryAfter.String()
		}
		return fmt.Errorf("%s: GitHub's secondary rate limit: try again %s", what, wait)
	}
	if er, ok := errors.AsType[*github.ErrorResponse](err); ok && er.Response != nil {
		return fmt.Errorf("%s: GitHub answered %d %s", what, er.Response.StatusCode, http.StatusText(er.Response.StatusCode))
	}
	return transportReason(what, "GitHub", err)
}
