package probe

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The gauge is 0 until a check passes, follows each check every
// interval, and stops with Stop.
func TestGaugeFollowsTheCheck(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var failing atomic.Bool
		var checks atomic.Int32
		reg := prometheus.NewRegistry()
		g := NewGauge(reg, prometheus.GaugeOpts{Name: "x_up", Help: "x"}, func(context.Context) error {
			checks.Add(1)
			if failing.Load() {
				return errors.New("down")
			}
			return nil
		}, 5*time.Second, 2*time.Second)
		if v := testutil.ToFloat64(g.g); v != 0 {
			t.Fatalf("before the first check: %v, want 0", v)
		}
		if err := g.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if v := testutil.ToFloat64(g.g); v != 1 || checks.Load() != 1 {
			t.Fatalf("after the first check: %v (%d checks), want 1 at once", v, checks.Load())
		}
		failing.Store(true)
		time.Sleep(4 * time.Second)
		synctest.Wait()
		if v := testutil.ToFloat64(g.g); v != 1 {
			t.Fatalf("before the interval: %v, want still 1", v)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if v := testutil.ToFloat64(g.g); v != 0 {
			t.Fatalf("after a failed check: %v, want 0", v)
		}
		failing.Store(false)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if v := testutil.ToFloat64(g.g); v != 1 {
			t.Fatalf("after it answers again: %v, want 1", v)
		}
		if err := g.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		n := checks.Load()
		time.Sleep(time.Minute)
		synctest.Wait()
		if checks.Load() != n {
			t.Fatalf("%d checks after Stop", checks.Load()-n)
		}
	})
}

// A check that hangs is cut at its timeout and counts as down; one cut
// short by Stop leaves the gauge as it was.
func TestHangingCheck(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var hang atomic.Bool
		reg := prometheus.NewRegistry()
		g := NewGauge(reg, prometheus.GaugeOpts{Name: "x_up", Help: "x"}, func(ctx context.Context) error {
			if hang.Load() {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}, 5*time.Second, 2*time.Second)
		_ = g.Start(context.Background())
		synctest.Wait()
		hang.Store(true)
		time.Sleep(5*time.Second + time.Second)
		synctest.Wait()
		if v := testutil.ToFloat64(g.g); v != 1 {
			t.Fatalf("within the timeout of a check that hangs: %v, want still 1", v)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if v := testutil.ToFloat64(g.g); v != 0 {
			t.Fatalf("a check that hangs past its timeout: %v, want 0", v)
		}
		hang.Store(false)
		time.Sleep(3 * time.Second) // t = 10 s
		synctest.Wait()
		if v := testutil.ToFloat64(g.g); v != 1 {
			t.Fatalf("answering again: %v, want 1", v)
		}
		hang.Store(true)
		time.Sleep(5 * time.Second) // t = 15 s: a check starts and hangs
		synctest.Wait()
		if err := g.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if v := testutil.ToFloat64(g.g); v != 1 {
			t.Fatalf("a check cut short by Stop changed the gauge to %v", v)
		}
	})
}
