package startstop_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/whguard/whguard/internal/startstop"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder records the calls of the parts it makes, in order.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) part(name string, startErr error) startstop.Service {
	return startstop.Func{
		StartFunc: func(context.Context) error { r.add("start " + name); return startErr },
		StopFunc:  func(context.Context) error { r.add("stop " + name); return nil },
	}
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.calls = append(r.calls, s)
	r.mu.Unlock()
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.calls, ", ")
}

func TestGroupStartsInOrderStopsInReverse(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	g := startstop.NewGroup(nil)
	g.Add("journal", r.part("journal", nil))
	g.Add("admin", r.part("admin", nil))
	g.Add("ingress", r.part("ingress", nil))
	ctx := context.Background()
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(ctx); err != nil { // twice: nothing more
		t.Fatal(err)
	}
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Stop(ctx); err != nil { // twice: nothing more
		t.Fatal(err)
	}
	if got, want := r.String(), "start journal, start admin, start ingress, stop ingress, stop admin, stop journal"; got != want {
		t.Fatalf("calls: %s\nwant:  %s", got, want)
	}
}

func TestGroupStartFailureStopsWhatStarted(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	g := startstop.NewGroup(nil)
	g.Add("journal", r.part("journal", nil))
	g.Add("admin", r.part("admin", errors.New("address in use")))
	g.Add("ingress", r.part("ingress", nil))
	err := g.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "start admin: address in use") {
		t.Fatalf("error %v", err)
	}
	if got, want := r.String(), "start journal, start admin, stop journal"; got != want {
		t.Fatalf("calls: %s\nwant:  %s", got, want)
	}
}

// A gated part starts when its gate opens, without holding up the parts
// after it; one whose gate never opened is never started, and Stop does
// not wait for it.
func TestGroupGates(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{}
		migrated := make(chan struct{})
		never := make(chan struct{})
		g := startstop.NewGroup(nil)
		g.Add("journal", r.part("journal", nil))
		g.AddAfter("forwarder", r.part("forwarder", nil), migrated)
		g.AddAfter("alerts", r.part("alerts", nil), never)
		g.Add("ingress", r.part("ingress", nil))
		if err := g.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got, want := r.String(), "start journal, start ingress"; got != want {
			t.Fatalf("before the gate: %s, want %s", got, want)
		}
		time.Sleep(time.Minute) // a migration taking its time
		close(migrated)
		synctest.Wait()
		if err := g.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got, want := r.String(), "start journal, start ingress, start forwarder, stop ingress, stop forwarder, stop journal"; got != want {
			t.Fatalf("calls: %s\nwant:  %s", got, want)
		}
	})
}

// Once: Stop before Start makes Start do nothing; each runs once.
func TestOnce(t *testing.T) {
	t.Parallel()
	r := &recorder{}
	o := startstop.NewOnce(r.part("x", nil))
	ctx := context.Background()
	_ = o.Stop(ctx)
	_ = o.Start(ctx)
	_ = o.Stop(ctx)
	if got := r.String(); got != "" {
		t.Fatalf("stopped before start, then started: %s", got)
	}
	o = startstop.NewOnce(r.part("y", nil))
	_ = o.Start(ctx)
	_ = o.Start(ctx)
	_ = o.Stop(ctx)
	_ = o.Stop(ctx)
	if got := r.String(); got != "start y, stop y" {
		t.Fatalf("calls %s", got)
	}
}
