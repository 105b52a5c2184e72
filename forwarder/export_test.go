package forwarder

import "time"

// SetStopGrace shortens Stop's wait after its deadline, for tests.
func SetStopGrace(f *Forwarder, d time.Duration) { f.stopGrace = d }
