package governor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// The breaker in Redis: one hash per backend, changed only by the scripts
// below (on Redis's clock), with the same rules as breaker (breaker.go).
//
// The delivery path does not read it: each replica follows the states in
// memory (refreshed every breakerSync, and from every script's answer) and
// sends its outcomes in batches at the same pace, so a closed breaker
// costs no round trip per delivery (a Redis round trip per delivery for a
// breaker that is closed nearly always would bound throughput). Only when
// the state it knows is open and due for a probe does a replica ask Redis
// which one delivery is the probe. The price: a breaker that opens is
// seen by the other replicas up to breakerSync later.

// breakerSync is how often outcomes are sent and states refreshed.
const breakerSync = 250 * time.Millisecond

// downPing is how often Redis is pinged while it does not answer.
const downPing = time.Second

// breakerFields are the hash's fields, in the scripts' order.
//
// load returns nil when a field holds what no script writes (not a number,
// a state that does not exist, a breaker open or a probe out for longer
// than any cooldown): the caller answers an error, which the governor
// counts as a Redis error, rather than holding deliveries for years.
var breakerLoad = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local limit = now + ` + fmt.Sprint((MaxBreakerCooldown + time.Hour).Microseconds()) + `
local function load(k)
  local v = redis.call('HMGET', k, 'st', 'cs', 'ct', 'cf', 'pt', 'pf', 'until', 'cd', 'probe', 'pexp', 'ls')
  local n = {}
  for i, f in ipairs({1, 2, 3, 4, 5, 6, 7, 8, 10, 11}) do
    if v[f] then
      n[f] = tonumber(v[f])
      if not n[f] then return nil end
    else
      n[f] = 0
    end
  end
  local b = {st = n[1], cs = n[2], ct = n[3], cf = n[4], pt = n[5], pf = n[6], untl = n[7], cd = n[8],
    probe = v[9] or '', pexp = n[10], ls = n[11]}
  if (b.st ~= 0 and b.st ~= 1 and b.st ~= 2) or b.untl > limit or b.pexp > limit or b.cs > limit or b.ls > limit then
    return nil
  end
  return b
end
local function save(k, b)
  redis.call('HSET', k, 'st', b.st, 'cs', string.format('%.0f', b.cs), 'ct', tostring(b.ct), 'cf', tostring(b.cf),
    'pt', tostring(b.pt), 'pf', tostring(b.pf), 'until', string.format('%.0f', b.untl), 'cd', string.format('%.0f', b.cd),
    'probe', b.probe, 'pexp', string.format('%.0f', b.pexp), 'ls', string.format('%.0f', b.ls))
  redis.call('PEXPIRE', k, 3600000)
end
local function bad(k)
  return redis.error_reply('WHGUARD bad value: breaker state out of range in ' .. k)
end
`

// breakerRecordScript counts outcomes and settles a probe. KEYS[1] is the
// hash; ARGV: window, min attempts, ratio, cooldown, max cooldown (µs),
// attempts and failures (FailedOnEvent ones not included), the probe's
// token ("" for none) and its outcome (0 succeeded, 1 failed), a probe
// token to abandon ("" for none), then the successes and the FailedOnEvent
// failures: these count (as attempts and failures) only when no success
// is known within the window. It returns {state, µs until the probe may
// go}.
var breakerRecordScript = redis.NewScript(breakerLoad + `
local window, minA, ratio = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local cd0, cdmax = tonumber(ARGV[4]), tonumber(ARGV[5])
local total, failed = tonumber(ARGV[6]), tonumber(ARGV[7])
local ptoken, pout, abandon = ARGV[8], tonumber(ARGV[9]), ARGV[10]
local succeeded, onEvent = tonumber(ARGV[11]), tonumber(ARGV[12])
local b = load(KEYS[1])
if not b then return bad(KEYS[1]) end
local changed = false
if succeeded > 0 then
  b.ls = now
  changed = true
end
if onEvent > 0 and (b.ls == 0 or now - b.ls >= window) then
  total, failed = total + onEvent, failed + onEvent
end
if abandon ~= '' and b.st == 2 and b.probe == abandon then
  b.st, b.probe, b.untl = 1, '', now
  changed = true
end
if ptoken ~= '' and b.st == 2 and b.probe == ptoken then
  b.probe = ''
  if pout == 0 then
    b = {st = 0, cs = now, ct = 0, cf = 0, pt = 0, pf = 0, untl = 0, cd = 0, probe = '', pexp = 0, ls = now}
  else
    b.cd = math.min(2 * b.cd, cdmax)
    b.st, b.untl = 1, now + b.cd
  end
  changed = true
elseif b.st == 0 and total > 0 then
  if b.cs == 0 then b.cs = now end
  while now - b.cs >= window do
    b.pt, b.pf, b.ct, b.cf = b.ct, b.cf, 0, 0
    b.cs = b.cs + window
    if now - b.cs >= window then b.pt, b.pf, b.cs = 0, 0, now end
  end
  b.ct, b.cf = b.ct + total, b.cf + failed
  local w = 1 - (now - b.cs) / window
  local tot, fail = b.ct + w * b.pt, b.cf + w * b.pf
  if tot >= minA and fail >= ratio * tot then
    b.st, b.cd = 1, cd0
    b.untl = now + cd0
  end
  changed = true
end
if changed then save(KEYS[1], b) end
local wait = 0
if b.st == 1 and b.untl > now then wait = b.untl - now end
return {b.st, string.format('%.0f', wait)}
`)

// breakerProbeScript is asked when a replica's known state is open and due
// for a probe: it makes this delivery (ARGV[1], kept ARGV[2] µs at most)
// the probe, or says why not. It returns {allowed, state, µs to wait}.
var breakerProbeScript = redis.NewScript(breakerLoad + `
local b = load(KEYS[1])
if not b then return bad(KEYS[1]) end
if b.st == 0 then return {1, 0, '0'} end
if b.st == 1 and now < b.untl then return {0, 1, string.format('%.0f', b.untl - now)} end
if b.st == 2 and b.probe ~= ARGV[1] and now < b.pexp then
  return {0, 2, string.format('%.0f', math.min(b.pexp - now, 1000000))}
end
b.st, b.probe, b.pexp = 2, ARGV[1], now + tonumber(ARGV[2])
save(KEYS[1], b)
return {1, 2, '0'}
`)

// knownBreaker is a replica's view of one backend's breaker.
type knownBreaker struct {
	state BreakerState
	// until is when an open breaker's probe may go (this process's clock).
	until time.Time
	// bad: Redis holds a value for this breaker that no script writes;
	// deliveries to the backend wait (an error) until it is fixed.
	bad bool
	// attempts and failures (FailedTransiently) ended here and not yet
	// sent to Redis; successes and onEvent (FailedOnEvent failures) are
	// sent apart, since whether the latter count depends on the former.
	attempts, failures, successes, onEvent int
}

// breakerCheck applies the breaker to a; it asks Redis only when the known
// state is open and due for a probe.
func (r *Redis) breakerCheck(ctx context.Context, a Ask) (ok bool, wait time.Duration, err error) {
	r.bmu.Lock()
	kb := r.known(a.Backend)
	state, until, bad := kb.state, kb.until, kb.bad
	r.bmu.Unlock()
	now := time.Now()
	switch {
	case bad:
		return false, 0, fmt.Errorf("breaker of %s: redis holds a state out of range", a.Backend)
	case state == BreakerClosed:
		return true, 0, nil
	case state != BreakerClosed && now.Before(until):
		// Open until its cooldown ends, or half-open while a probe is
		// out: known without asking.
		return false, until.Sub(now), nil
	}
	res, err := breakerProbeScript.Run(ctx, r.client, []string{r.key(a.Backend, "breaker")}, a.Token, r.cfg.SlotTTL.Microseconds()).Slice()
	var redisErr redis.Error
	isBad := err != nil && errors.As(err, &redisErr)
	if err = r.observe(err); err != nil {
		if isBad {
			r.bmu.Lock()
			r.known(a.Backend).bad = true
			r.bmu.Unlock()
		}
		return false, 0, fmt.Errorf("breaker probe for %s: %w", a.Backend, err)
	}
	allowed, st, w, err := threeInts(res)
	if err != nil {
		return false, 0, fmt.Errorf("breaker probe for %s: %w", a.Backend, err)
	}
	wait = time.Duration(w) * time.Microsecond
	r.bmu.Lock()
	defer r.bmu.Unlock()
	kb = r.known(a.Backend)
	kb.state = BreakerState(st)
	switch {
	case allowed == 1 && kb.state == BreakerHalfOpen:
		// This delivery is the probe; the others here wait for its
		// outcome (or ask again in a second).
		r.probes[a.Token] = a.Backend
		kb.until = time.Now().Add(time.Second)
	case kb.state != BreakerClosed:
		kb.until = time.Now().Add(wait)
	}
	return allowed == 1, wait, nil
}

// known returns backend's known breaker, under bmu.
func (r *Redis) known(backend string) *knownBreaker {
	kb := r.breakers[backend]
	if kb == nil {
		kb = &knownBreaker{}
		r.breakers[backend] = kb
	}
	return kb
}

// breakerRecord runs the record script and takes its answer as the known
// state.
func (r *Redis) breakerRecord(ctx context.Context, backend string, c breakerCounts, probe string, probeFailed bool, abandon string) error {
	b := r.cfg.Breaker
	pout := 0
	if probeFailed {
		pout = 1
	}
	res, err := breakerRecordScript.Run(ctx, r.client, []string{r.key(backend, "breaker")},
		b.Window.Microseconds(), b.MinAttempts, b.FailureRatio, b.Cooldown.Microseconds(), MaxBreakerCooldown.Microseconds(),
		c.attempts, c.failures, probe, pout, abandon, c.successes, c.onEvent).Slice()
	var redisErr redis.Error
	bad := err != nil && errors.As(err, &redisErr)
	if err = r.observe(err); err != nil {
		if bad {
			r.bmu.Lock()
			r.known(backend).bad = true
			r.bmu.Unlock()
		}
		return fmt.Errorf("breaker of %s: %w", backend, err)
	}
	if len(res) != 2 {
		return fmt.Errorf("breaker of %s: unexpected reply %v", backend, res)
	}
	st, _ := res[0].(int64)
	w, err := toInt(res[1])
	if err != nil {
		return fmt.Errorf("breaker of %s: %w", backend, err)
	}
	r.bmu.Lock()
	kb := r.known(backend)
	kb.state, kb.until, kb.bad = BreakerState(st), time.Now().Add(time.Duration(w)*time.Microsecond), false
	r.bmu.Unlock()
	return nil
}

// Start runs, until Stop, the breakers' sync: the outcomes counted here
// are sent, and the known breaker states refreshed, every breakerSync.
// Without it the breaker sees only probes. It also pings Redis during an
// outage (run). A second Start does nothing.
func (r *Redis) Start(ctx context.Context) error {
	r.runMu.Lock()
	defer r.runMu.Unlock()
	if r.runStop != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	r.runStop, r.runDone = cancel, done
	go func() {
		defer close(done)
		r.run(ctx)
	}()
	return nil
}

// Stop ends the sync started by Start and waits for it (until ctx is
// done). It does nothing before Start, and a second time.
func (r *Redis) Stop(ctx context.Context) error {
	r.runMu.Lock()
	stop, done := r.runStop, r.runDone
	r.runMu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop the breakers' sync: %w", ctx.Err())
	}
}

// run is the breakers' sync loop, until ctx ends. During an outage it
// also pings Redis every downPing, so that the end of the outage is seen
// (whguard_redis_up, and the governor's asks sent in batches again) even
// when nothing else talks to Redis: no breaker, no delivery asking.
func (r *Redis) run(ctx context.Context) {
	t := time.NewTicker(breakerSync)
	defer t.Stop()
	var pinged time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if r.cfg.Breaker.Enabled {
			r.syncBreakers(ctx)
		}
		if !r.Up() && time.Since(pinged) >= downPing {
			pinged = time.Now()
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			_ = r.Ping(pctx) // observed: its answer ends the outage
			cancel()
		}
	}
}

// breakerCounts are outcomes counted here for one backend's breaker.
type breakerCounts struct {
	attempts, failures, successes, onEvent int
}

// syncBreakers is one pass of Run.
func (r *Redis) syncBreakers(ctx context.Context) {
	if err := r.ready(ctx); err != nil {
		r.log.Debug("breaker sync skipped", zap.Error(err))
		return
	}
	type pending struct {
		backend string
		counts  breakerCounts
	}
	r.bmu.Lock()
	var ps []pending
	for b, kb := range r.breakers {
		ps = append(ps, pending{b, breakerCounts{kb.attempts, kb.failures, kb.successes, kb.onEvent}})
		kb.attempts, kb.failures, kb.successes, kb.onEvent = 0, 0, 0, 0
	}
	r.bmu.Unlock()
	for _, p := range ps {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		err := r.breakerRecord(cctx, p.backend, p.counts, "", false, "")
		cancel()
		if err != nil {
			// Outcomes not counted during an outage are dropped: the
			// breaker then sees only what follows.
			r.log.Debug("breaker sync failed", zap.String("backend", p.backend), zap.Error(err))
			return
		}
	}
}

// breakerFinish counts a's outcome: a probe's at once (a good one that
// closes the breaker is told to OnClose's hook), the others with the next
// sync.
func (r *Redis) breakerFinish(ctx context.Context, a Ask, o Outcome) error {
	r.bmu.Lock()
	_, probe := r.probes[a.Token]
	delete(r.probes, a.Token)
	if !probe {
		kb := r.known(a.Backend)
		switch {
		case o == Succeeded:
			kb.successes++ // also while not closed: a success is news
			if kb.state == BreakerClosed {
				kb.attempts++
			}
		case kb.state != BreakerClosed:
		case o == FailedOnEvent:
			kb.onEvent++
		default:
			kb.attempts++
			kb.failures++
		}
	}
	r.bmu.Unlock()
	if !probe {
		return nil
	}
	if err := r.breakerRecord(ctx, a.Backend, breakerCounts{}, a.Token, o != Succeeded, ""); err != nil {
		return err
	}
	r.bmu.Lock()
	closed := o == Succeeded && r.known(a.Backend).state == BreakerClosed
	r.bmu.Unlock()
	if closed {
		r.closed(a.Backend) // this replica's probe closed it: told once
	}
	return nil
}

// breakerAbandon gives up a's probe, if it was one (a limit held it, or it
// was not sent).
func (r *Redis) breakerAbandon(ctx context.Context, a Ask) error {
	r.bmu.Lock()
	_, probe := r.probes[a.Token]
	delete(r.probes, a.Token)
	r.bmu.Unlock()
	if !probe {
		return nil
	}
	return r.breakerRecord(ctx, a.Backend, breakerCounts{}, "", false, a.Token)
}

// BreakerStates reads the known breaker of every backend.
func (r *Redis) BreakerStates() map[string]BreakerState {
	r.bmu.Lock()
	defer r.bmu.Unlock()
	out := make(map[string]BreakerState, len(r.breakers))
	for b, kb := range r.breakers {
		out[b] = kb.state
	}
	return out
}

func threeInts(res []any) (a, b, c int64, err error) {
	if len(res) != 3 {
		return 0, 0, 0, fmt.Errorf("unexpected reply %v", res)
	}
	a, _ = res[0].(int64)
	b, _ = res[1].(int64)
	c, err = toInt(res[2])
	return a, b, c, err
}

// toInt reads a number the scripts return as a string (a Lua number
// would lose the microseconds of a large value).
func toInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		var n int64
		_, err := fmt.Sscan(x, &n)
		return n, err
	}
	return 0, fmt.Errorf("unexpected value %v", v)
}
