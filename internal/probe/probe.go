// Package probe keeps a gauge at 1 while a check passes and at 0 while it
// fails: whguard_journal_up. The check runs in the background at a fixed
// interval, never at scrape time, so a scrape never waits for the thing it
// reports on.
package probe

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Gauge runs its check every interval and sets its gauge from the
// result. The gauge is 0 until the first check passes: what has not been
// seen to answer is not up.
type Gauge struct {
	check          func(ctx context.Context) error
	every, timeout time.Duration
	g              prometheus.Gauge

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewGauge registers a gauge named by opts on reg, set by check every
// interval once started; a check that has not answered within timeout
// (at most the interval) fails.
func NewGauge(reg prometheus.Registerer, opts prometheus.GaugeOpts, check func(ctx context.Context) error, every, timeout time.Duration) *Gauge {
	g := &Gauge{check: check, every: every, timeout: min(timeout, every), g: prometheus.NewGauge(opts)}
	reg.MustRegister(g.g)
	return g
}

// Start runs the first check at once, in the background, then one every
// interval until Stop. A second call does nothing.
func (g *Gauge) Start(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done != nil {
		return nil
	}
	ctx, g.cancel = context.WithCancel(context.WithoutCancel(ctx))
	g.done = make(chan struct{})
	go g.run(ctx)
	return nil
}

func (g *Gauge) run(ctx context.Context) {
	defer close(g.done)
	t := time.NewTicker(g.every)
	defer t.Stop()
	for {
		g.Once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Once runs the check now and sets the gauge, unless ctx ended meanwhile
// (a check cut short by Stop says nothing about what it checks).
func (g *Gauge) Once(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, g.timeout)
	err := g.check(cctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		g.g.Set(0)
		return
	}
	g.g.Set(1)
}

// Stop ends the checks and waits for one in progress until ctx is done.
func (g *Gauge) Stop(ctx context.Context) error {
	g.mu.Lock()
	cancel, done := g.cancel, g.done
	g.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("probe: %w", ctx.Err())
	}
}
