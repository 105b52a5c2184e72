package forwarder

import "time"

// SetStopGrace shortens Stop's wait after its deadline, for tests.
func SetStopGrace(f *Forwarder, d time.Duration) { f.stopGrace = d }

// Workers reports how many delivery goroutines were started and how many
// are alive.
func Workers(f *Forwarder) (started, live int32) {
	return f.workersStarted.Load(), f.workersLive.Load()
}

// WaitLoops waits until the forwarder's background loops have ended (after
// Start's context is cancelled, or Stop).
func WaitLoops(f *Forwarder) { f.loops.Wait() }
