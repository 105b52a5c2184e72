package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/whguard/whguard/journal"
	"github.com/whguard/whguard/verify"
)

// ErrNoRoute: catch-up named a provider the ingress has no path for.
var ErrNoRoute = errors.New("no ingress route for this provider")

// Inject journals an event that catch-up read from the provider's API as
// if it had arrived now on the provider's path: no query, Content-Type
// application/json; charset=utf-8, the X-Forwarded-Proto and
// X-Forwarded-Host of the provider's last webhook since whguard started
// (none before one arrived), its body the API's bytes, the route's
// type filter and order key applied, marked as catch-up's. Its
// authenticity is the authenticated call to the API: there is no
// signature to check, and the delivery is signed afresh for the backend.
// A webhook copy of it that arrives later is a duplicate, whatever its
// bytes. An id or a body size the webhook path would refuse is refused
// (wrapping verify.ErrBadRequest). Inject reports whether the event was new.
func (in *Ingress) Inject(ctx context.Context, provider, id, eventType string, body []byte) (bool, error) {
	route, ok := in.routeOf(provider)
	if !ok {
		return false, fmt.Errorf("inject %s: %w", provider, ErrNoRoute)
	}
	// The id and type as the webhook path would take them: an id it
	// refuses would be sent in a header no request can carry, and an
	// empty one would make every such event one.
	if err := verify.CheckEventID(id); err != nil {
		return false, fmt.Errorf("inject %s: %w", provider, err)
	}
	eventType = verify.EventType(eventType)
	if route.MaxBodyBytes > 0 && int64(len(body)) > route.MaxBodyBytes {
		return false, fmt.Errorf("inject %s: %w: body larger than the %d bytes this path takes", provider, verify.ErrBadRequest, route.MaxBodyBytes)
	}
	h := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
	if f := in.public[provider].Load(); f != nil {
		// As its webhooks reach the backend: frameworks that redirect
		// to HTTPS or check the host read these.
		h["X-Forwarded-Proto"], h["X-Forwarded-Host"] = []string{f.proto}, []string{f.host}
	}
	ev := journal.Event{
		Provider:    provider,
		EventID:     id,
		EventType:   eventType,
		ContentHash: route.Provider.Digest(h, body),
		Headers:     h,
		Body:        body,
		Path:        route.Path,
		ReceivedAt:  in.now(),
		Ignored:     route.ignores(eventType),
		OrderKey:    route.Order.Value(h, body),
		OrderBlock:  route.Order.Block,
		Scheme:      route.Provider.SchemeName(),
		Source:      journal.SourceCatchup,
	}
	ctx, cancel := context.WithTimeout(ctx, in.timeout)
	defer cancel()
	acc, err := in.intake.Accept(ctx, ev, false)
	if err != nil {
		return false, fmt.Errorf("inject %s %s: %w", provider, id, err)
	}
	switch acc.Result.Outcome {
	case journal.Inserted:
		return true, nil
	case journal.Duplicate, journal.Conflict, journal.Replayed:
		return false, nil
	default:
		return false, fmt.Errorf("inject %s %s: the journal did not store it", provider, id)
	}
}

// routeOf finds provider's route.
func (in *Ingress) routeOf(provider string) (Route, bool) {
	for _, r := range in.routes {
		if r.Provider.Name() == provider {
			return r, true
		}
	}
	return Route{}, false
}

// publicFacts are how a provider's webhooks reach whguard: the scheme and
// host they were sent to, as the ingress tells the backend.
type publicFacts struct {
	proto, host string
}

// notePublic keeps how provider's webhook with headers h (as forwarded)
// reached whguard, for the events catch-up journals. It allocates only
// when that changed.
func (in *Ingress) notePublic(provider string, h http.Header) {
	p := in.public[provider]
	if p == nil {
		return
	}
	proto, host := h.Get("X-Forwarded-Proto"), h.Get("X-Forwarded-Host")
	if f := p.Load(); f != nil && f.proto == proto && f.host == host {
		return
	}
	p.Store(&publicFacts{proto: proto, host: host})
}
