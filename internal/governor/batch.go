package governor

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/whguard/whguard/internal/groupcommit"
)

// Batches: a Redis round trip per delivery would bound the delivery rate
// by Redis's latency (measured: a backlog drained at 0.43× the unlimited
// rate with limits that never bound, at two round trips per delivery). So
// the rows leased together for one provider are admitted together, in one
// script that grants as many as the limits allow now (redis_rate's
// AllowAtMost, with the cost floored), and the slots of finished
// deliveries are released together, in one call per batch. Grants are
// used at once by the deliveries that asked, so a batch never lets more
// through in a second than single asks would.

// AcquireBatch decides asks of one backend and one provider together: the
// first ones as many as the limits allow now, the rest held with the
// reason and wait of the first refused. It is one round trip whatever the
// number of asks, and none when nothing applies.
func (r *Redis) AcquireBatch(ctx context.Context, asks []Ask) ([]Decision, error) {
	out := make([]Decision, len(asks))
	if len(asks) == 0 {
		return out, nil
	}
	a := asks[0]
	if err := r.ready(ctx); err != nil {
		return nil, err
	}
	if r.cfg.Breaker.Enabled {
		r.bmu.Lock()
		kb := r.known(a.Backend)
		closed := kb.state == BreakerClosed && !kb.bad
		r.bmu.Unlock()
		if !closed {
			// A probe is decided one delivery at a time (and a breaker
			// Redis holds a bad value for is an error, as for one).
			for i, x := range asks {
				d, err := r.Acquire(ctx, x)
				if err != nil {
					r.giveBack(ctx, asks[:i], out[:i])
					return nil, err
				}
				out[i] = d
			}
			return out, nil
		}
	}
	if !r.cfg.Limits(a.Provider) {
		for i := range out {
			out[i].Allowed = true
		}
		return out, nil
	}
	if !r.Up() {
		// During an outage no delivery waits for a batch that will
		// fail: each is held, and the sync loop's ping (run) finds out
		// when Redis is back.
		return nil, fmt.Errorf("acquire %d deliveries to %s: redis unavailable", len(asks), a.Backend)
	}
	rks := rateKeys(r.cfg, a)
	keys := make([]string, 1, 1+len(rks))
	keys[0] = r.key(a.Backend, "inflight")
	args := make([]any, 0, 3+len(asks)+2*len(rks))
	args = append(args, len(asks), r.cfg.MaxInFlight, r.cfg.SlotTTL.Microseconds())
	for _, x := range asks {
		args = append(args, x.Token)
	}
	for _, rk := range rks {
		keys = append(keys, r.key(a.Backend, rk.key))
		args = append(args, rk.limit.Rate.interval().Microseconds(), rk.limit.burst())
	}
	res, err := acquireBatchScript.Run(ctx, r.client, keys, args...).Slice()
	if err = r.observe(err); err != nil {
		return nil, fmt.Errorf("acquire %d deliveries to %s: %w", len(asks), a.Backend, err)
	}
	if len(res) != 3 {
		return nil, fmt.Errorf("acquire %d deliveries to %s: unexpected reply %v", len(asks), a.Backend, res)
	}
	granted, _ := res[0].(int64)
	reason, _ := res[1].(string)
	wait, err := toInt(res[2])
	if err != nil {
		return nil, fmt.Errorf("acquire %d deliveries to %s: %w", len(asks), a.Backend, err)
	}
	refused := Decision{Reason: reason, RetryAfter: r.capWait(a, time.Duration(wait)*time.Microsecond)}
	if reason == HoldInFlight {
		refused.RetryAfter = inFlightRetry
	}
	for i := range out {
		if int64(i) < granted {
			out[i].Allowed = true
		} else {
			out[i] = refused
		}
	}
	return out, nil
}

// giveBack releases what asks were granted (ds) when the batch they were
// in fails: their askers learn only of the error, so would never release
// a slot or a probe taken for them (each would be held until it expires).
// Best effort, after ctx if need be: a release that fails expires too.
func (r *Redis) giveBack(ctx context.Context, asks []Ask, ds []Decision) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	for i, d := range ds {
		if d.Allowed {
			if err := r.Release(ctx, asks[i]); err != nil {
				r.log.Debug("a failed batch's grant not given back; it expires by itself", zap.Error(err))
			}
		}
	}
}

// acquireBatchScript grants up to ARGV[1] deliveries. KEYS as
// acquireScript; ARGV: the count k, the in-flight bound, the slot's
// lifetime (µs), k tokens, then each rate key's interval (µs) and burst.
// It returns {granted, reason of the first refused, µs it should wait}.
var acquireBatchScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local k = tonumber(ARGV[1])
local max = tonumber(ARGV[2])
local g, reason = k, ''
if max > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  if #redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%.0f', now + tonumber(ARGV[3]) + 1000000), '+inf', 'LIMIT', 0, 1) > 0 then
    return redis.error_reply('WHGUARD bad value: a slot that never expires in ' .. KEYS[1])
  end
  local free = max - redis.call('ZCARD', KEYS[1])
  if free < 0 then free = 0 end
  if free < g then g, reason = free, 'in_flight' end
end
local base = 3 + k
local tats = {}
for i = 2, #KEYS do
  local interval = tonumber(ARGV[base + 2 * (i - 2) + 1])
  local burst = tonumber(ARGV[base + 2 * (i - 2) + 2])
  local tat = now
  local raw = redis.call('GET', KEYS[i])
  if raw then
    tat = tonumber(raw)
    -- No grant ever sets it further than the burst ahead of now.
    if not tat or tat > now + (burst + 1) * interval then
      return redis.error_reply('WHGUARD bad value: rate state out of range in ' .. KEYS[i])
    end
  end
  if tat < now then tat = now end
  -- request j passes when tat + j*interval - burst*interval <= now;
  -- floor: a fraction of a request is not granted (nor charged).
  local m = math.floor((now - tat + burst * interval) / interval)
  if m < 0 then m = 0 end
  if m < g then g, reason = m, 'rate' end
  tats[i] = tat
end
local wait = 0
if g < k and reason == 'rate' then
  for i = 2, #KEYS do
    local interval = tonumber(ARGV[base + 2 * (i - 2) + 1])
    local burst = tonumber(ARGV[base + 2 * (i - 2) + 2])
    local allow_at = tats[i] + (g + 1) * interval - burst * interval
    if allow_at - now > wait then wait = allow_at - now end
  end
end
if g > 0 then
  for i = 2, #KEYS do
    local interval = tonumber(ARGV[base + 2 * (i - 2) + 1])
    local nt = tats[i] + g * interval
    redis.call('SET', KEYS[i], string.format('%.0f', nt), 'PX', math.ceil((nt - now) / 1000) + 1)
  end
  if max > 0 then
    local ttl = tonumber(ARGV[3])
    for j = 1, g do
      redis.call('ZADD', KEYS[1], string.format('%.0f', now + ttl), ARGV[3 + j])
    end
    redis.call('PEXPIRE', KEYS[1], math.ceil(ttl / 1000) + 1000)
  end
end
if g == k then reason = '' end
return {g, reason, string.format('%.0f', wait)}
`)

// releaseManyScript removes slots: KEYS[1] the in-flight set, ARGV the
// tokens.
var releaseManyScript = redis.NewScript(`return redis.call('ZREM', KEYS[1], unpack(ARGV))`)

// newReleases batches slot releases: the deliveries finishing while one
// release is on its way to Redis share the next.
func (r *Redis) newReleases() *groupcommit.Group[Ask, struct{}] {
	return groupcommit.New(groupcommit.Config{MaxBatch: 500, Timeout: 2 * time.Second}, func(ctx context.Context, asks []Ask) ([]struct{}, error) {
		byBackend := map[string][]any{}
		for _, a := range asks {
			byBackend[a.Backend] = append(byBackend[a.Backend], a.Token)
		}
		for b, toks := range byBackend {
			if err := r.observe(releaseManyScript.Run(ctx, r.client, []string{r.key(b, "inflight")}, toks...).Err()); err != nil {
				return nil, fmt.Errorf("release %d slots on %s: %w", len(toks), b, err)
			}
		}
		return make([]struct{}, len(asks)), nil
	})
}

// AcquireBatch decides asks one by one: in process, that is exact and
// cheap.
func (l *Local) AcquireBatch(ctx context.Context, asks []Ask) ([]Decision, error) {
	out := make([]Decision, len(asks))
	for i, a := range asks {
		d, err := l.Acquire(ctx, a)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}
