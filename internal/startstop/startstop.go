// Package startstop gives whguard's long-lived parts one lifecycle, as
// River's startstop does: Start spawns what the part runs and returns;
// Stop ends it, waiting no longer than its context allows. Both are safe
// to call twice, and Stop before Start. A Group starts parts in order
// (a part may wait for a readiness gate, such as the journal being
// migrated, without holding up the parts after it) and stops them in the
// reverse order, all within one deadline.
package startstop

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.uber.org/zap"
)

// Service is a long-lived part of whguard.
type Service interface {
	// Start spawns the part's work and returns. A second call does
	// nothing.
	Start(ctx context.Context) error
	// Stop ends the part's work, waiting for it until ctx is done, and
	// returns ctx's error when it had to give up waiting. A second call,
	// or one before Start, does nothing.
	Stop(ctx context.Context) error
}

// Func adapts a pair of functions to a Service; start or stop may be nil.
type Func struct {
	StartFunc func(ctx context.Context) error
	StopFunc  func(ctx context.Context) error
}

// Start calls StartFunc.
func (f Func) Start(ctx context.Context) error {
	if f.StartFunc == nil {
		return nil
	}
	return f.StartFunc(ctx)
}

// Stop calls StopFunc.
func (f Func) Stop(ctx context.Context) error {
	if f.StopFunc == nil {
		return nil
	}
	return f.StopFunc(ctx)
}

// Once makes a Service's Start and Stop safe to call twice and Stop safe
// before Start: each runs at most once, and a Stop before Start makes a
// later Start do nothing.
type Once struct {
	svc Service

	mu      sync.Mutex
	started bool
	stopped bool
	stopErr error
}

// NewOnce wraps svc.
func NewOnce(svc Service) *Once { return &Once{svc: svc} }

// Start starts the service the first time, unless it was stopped.
func (o *Once) Start(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.started || o.stopped {
		return nil
	}
	if err := o.svc.Start(ctx); err != nil {
		return err
	}
	o.started = true
	return nil
}

// Stop stops the service the first time, if it was started.
func (o *Once) Stop(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		return o.stopErr
	}
	o.stopped = true
	if o.started {
		o.stopErr = o.svc.Stop(ctx)
	}
	return o.stopErr
}

// Group starts services in the order they were added and stops them in
// the reverse order. It is used from one goroutine: Start, then Stop.
type Group struct {
	log   *zap.Logger
	parts []*part

	// wg waits for the gated starts still waiting or running.
	wg sync.WaitGroup
	// cancel ends the gated starts that still wait (Stop).
	cancel context.CancelFunc
}

type part struct {
	name string
	svc  *Once
	// gate, when set, is what the part's Start waits for.
	gate <-chan struct{}
}

// NewGroup returns an empty group logging to log (nil: nowhere).
func NewGroup(log *zap.Logger) *Group {
	if log == nil {
		log = zap.NewNop()
	}
	return &Group{log: log}
}

// Add appends a part started after those added before it.
func (g *Group) Add(name string, svc Service) {
	g.parts = append(g.parts, &part{name: name, svc: NewOnce(svc)})
}

// AddAfter appends a part whose Start waits until gate is closed: the
// parts after it start without waiting for it. It is never started if
// Stop comes first.
func (g *Group) AddAfter(name string, svc Service, gate <-chan struct{}) {
	g.parts = append(g.parts, &part{name: name, svc: NewOnce(svc), gate: gate})
}

// Start starts every part in order. When one fails, those started are
// stopped (in reverse, within ctx) and its error is returned. A gated
// part's failure to start is logged (it starts in the background).
func (g *Group) Start(ctx context.Context) error {
	gctx, cancel := context.WithCancel(ctx)
	g.cancel = cancel
	for i, p := range g.parts {
		if p.gate != nil {
			g.wg.Add(1)
			go func() {
				defer g.wg.Done()
				select {
				case <-p.gate:
				case <-gctx.Done():
					return
				}
				if err := p.svc.Start(gctx); err != nil && gctx.Err() == nil {
					g.log.Warn("part not started", zap.String("part", p.name), zap.Error(err))
				}
			}()
			continue
		}
		if err := p.svc.Start(ctx); err != nil {
			cancel()
			g.wg.Wait()
			stopErr := g.stopParts(context.WithoutCancel(ctx), g.parts[:i])
			return errors.Join(fmt.Errorf("start %s: %w", p.name, err), stopErr)
		}
	}
	return nil
}

// Stop stops every part in the reverse order, each within what is left of
// ctx, and returns their errors joined.
func (g *Group) Stop(ctx context.Context) error {
	if g.cancel != nil {
		g.cancel()
	}
	g.wg.Wait() // the gated starts: a part is started or never will be
	return g.stopParts(ctx, g.parts)
}

func (g *Group) stopParts(ctx context.Context, parts []*part) error {
	var errs []error
	for i := len(parts) - 1; i >= 0; i-- {
		p := parts[i]
		if err := p.svc.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", p.name, err))
		}
	}
	return errors.Join(errs...)
}
