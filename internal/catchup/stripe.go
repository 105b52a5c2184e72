package catchup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"

	"github.com/stripe/stripe-go/v82"

	"github.com/whguard/whguard/journal"
)

// stripePass lists the events Stripe has not delivered since p.Since
// (delivery_success=false, 100 a page, newest first), keeps the types the
// endpoint is enabled for, and journals each one the journal does not
// have, its body the bytes of its element of the list (stripe-go keeps
// them as the event's LastResponse).
func (c *Catchup) stripePass(ctx context.Context, cfg Config, p *journal.CatchupPass, dryRun bool) error {
	key, err := cfg.Token()
	if err != nil {
		return fmt.Errorf("read the credential: %w", err)
	}
	sc := stripe.NewClient(key, stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		URL:        stripe.String(cfg.APIURL),
		HTTPClient: c.opt.Client,
		// A failure ends the pass; the next one tries again.
		MaxNetworkRetries: stripe.Int64(0),
		// Its messages may quote the (masked) key.
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	})))
	var enabled []string
	var version string // the endpoint's, when it is pinned to one
	if cfg.Endpoint != "" {
		we, err := sc.V1WebhookEndpoints.Retrieve(ctx, cfg.Endpoint, nil)
		if err != nil {
			return stripeReason("read the webhook endpoint", err)
		}
		enabled, version = we.EnabledEvents, we.APIVersion
	}
	// Events are listed rendered in the API version of their creation;
	// an endpoint pinned to another gets its webhooks rendered in its
	// own, and a backend checking the version (stripe-go's
	// ConstructEvent does) would refuse each listed one. Those are not
	// journaled: the pass fails, saying so.
	otherVersion := 0
	types, keep := StripeTypes(enabled)
	params := &stripe.EventListParams{
		DeliverySuccess: stripe.Bool(false),
		CreatedRange:    &stripe.RangeQueryParams{GreaterThanOrEqual: p.Since.Unix()},
	}
	params.Limit = stripe.Int64(100)
	for _, t := range types {
		params.Types = append(params.Types, stripe.String(t))
	}
	var batch []*stripe.Event
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		ids := make([]string, len(batch))
		for i, ev := range batch {
			ids[i] = ev.ID
		}
		known, err := c.opt.Journal.Known(ctx, cfg.Provider, ids)
		if err != nil {
			return fmt.Errorf("look the events up in the journal: %w", err)
		}
		for _, ev := range batch {
			if known[ev.ID] {
				continue
			}
			p.Missing++
			if dryRun || ev.LastResponse == nil {
				continue
			}
			if version != "" && ev.APIVersion != "" && ev.APIVersion != version {
				otherVersion++
				continue
			}
			journaled, err := c.opt.Ingest.Inject(ctx, cfg.Provider, ev.ID, string(ev.Type), ev.LastResponse.RawJSON)
			if err != nil {
				return fmt.Errorf("journal event %.80q: %w", ev.ID, err)
			}
			if journaled {
				p.Journaled++
			}
		}
		batch = batch[:0]
		return nil
	}
	for ev, err := range sc.V1Events.List(ctx, params) {
		if err != nil {
			return stripeReason("list the events", err)
		}
		if !keep(string(ev.Type)) {
			continue
		}
		p.Listed++
		if batch = append(batch, ev); len(batch) == 100 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if otherVersion > 0 {
		return fmt.Errorf("%d missing events are in another API version than the endpoint's (%s): not journaled; its webhooks would not match them", otherVersion, version)
	}
	return nil
}

// stripeReason says why a Stripe call failed, without Stripe's message:
// it may quote the (masked) key.
func stripeReason(what string, err error) error {
	var se *stripe.Error
	if errors.As(err, &se) {
		reason := string(se.Type)
		if se.Code != "" {
			reason += "/" + string(se.Code)
		}
		return fmt.Errorf("%s: Stripe answered %d (%s)", what, se.HTTPStatusCode, reason)
	}
	return transportReason(what, "Stripe", err)
}

// transportReason says why a call that got no API error failed: no
// answer in time, no connection, or an answer that could not be read.
// It never quotes the client's message, which may hold a sample of the
// response body (stripe-go's deserialization errors do): the reasons are
// kept, logged and shown.
func transportReason(what, api string, err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%s: %s did not answer in time", what, api)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: stopped", what)
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return fmt.Errorf("%s: could not reach %s's API (%s)", what, api, oe.Op)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: could not reach %s's API", what, api)
	}
	return fmt.Errorf("%s: %s's answer could not be read", what, api)
}
