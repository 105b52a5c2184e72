package governor

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/whguard/whguard/internal/groupcommit"
)

// RedisClient is the part of go-redis the governor uses.
type RedisClient interface {
	redis.Scripter
	Ping(ctx context.Context) *redis.StatusCmd
	ZCount(ctx context.Context, key, min, max string) *redis.IntCmd
}

var _ RedisClient = (*redis.Client)(nil)

// Redis keeps the limits in Redis, shared by every replica. Every
// decision is one script run (EVALSHA), atomic, on Redis's clock (TIME),
// so the replicas' clocks do not matter.
//
// The script does what redis_rate's GCRA and asynq's semaphore do, in one
// round trip and with nothing spent unless every check passes: a rate
// token is not taken for a delivery the in-flight bound turns down (Convoy,
// for one, spends its rate token before its breaker check refuses). That
// is why it is our own script rather than redis_rate followed by a second
// call; the cost of a partial grant is floored, not charged as a fraction.
type Redis struct {
	cfg    Config
	client RedisClient
	log    *zap.Logger
	upG    prometheus.Gauge
	errs   *prometheus.CounterVec
	closeHook

	// base starts every key; namespace, when set, names the deployment
	// (see RedisOptions.Namespace) and is resolved once, by ready.
	base      string
	namespace func(ctx context.Context) (string, error)
	// prefix is base plus the resolved namespace: nil until ready.
	prefix atomic.Pointer[string]
	nsMu   sync.Mutex // one resolution at a time

	// mu guards down, so that an outage is logged once, when it starts,
	// and once when it ends.
	mu   sync.Mutex
	down bool

	// bmu guards the breakers as this replica knows them
	// (redis_breaker.go) and the probes it sends.
	bmu      sync.Mutex
	breakers map[string]*knownBreaker
	probes   map[string]string // token → backend

	// releases batches slot releases (batch.go).
	releases *groupcommit.Group[Ask, struct{}]

	// runMu guards runStop and runDone: the breakers' sync started by
	// Start (redis_breaker.go).
	runMu   sync.Mutex
	runStop context.CancelFunc
	runDone chan struct{}
}

// RedisOptions are the optional parts of a Redis governor.
type RedisOptions struct {
	// Prefix starts every key ("whguard:" when empty); tests use their
	// own so that they share one server.
	Prefix string
	// Namespace, when set, returns the name of the deployment whose
	// replicas share this state (NamespaceOf the journal's identity, or
	// WHGUARD_REDIS_NAMESPACE): it follows Prefix in every key, so that two
	// deployments sharing one Redis never share a breaker, a budget or a
	// slot, though their backends have the same origin. It is asked once,
	// before the first use of a key; an error is returned to that caller
	// (the delivery waits) and it is asked again the next time. Nil: Prefix
	// alone.
	Namespace func(ctx context.Context) (string, error)
	// Logger receives the outage warnings; nil means none.
	Logger *zap.Logger
	// Registerer, when set, gets whguard_redis_up.
	Registerer prometheus.Registerer
}

// NewRedis builds a Redis governor on client.
func NewRedis(cfg Config, client RedisClient, opt RedisOptions) (*Redis, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("governor: %w", err)
	}
	r := &Redis{cfg: cfg, client: client, base: cmp.Or(opt.Prefix, "whguard:"), namespace: opt.Namespace, log: opt.Logger,
		breakers: map[string]*knownBreaker{}, probes: map[string]string{}}
	for _, b := range cfg.Backends {
		r.breakers[b] = &knownBreaker{}
	}
	r.releases = r.newReleases()
	if r.namespace == nil {
		r.prefix.Store(&r.base)
	}
	if r.log == nil {
		r.log = zap.NewNop()
	}
	r.upG = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "whguard_redis_up",
		Help: "1 while Redis (WHGUARD_REDIS_URL) answers with what whguard can use, 0 during an outage or while whguard's keys hold bad values: deliveries that need the shared limits wait.",
	})
	r.upG.Set(1)
	r.errs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "whguard_redis_errors_total",
		Help: "Redis calls that failed, by kind: unreachable (no answer), bad_value (an error answer: a key of whguard's of the wrong type, or a value out of range).",
	}, []string{"kind"})
	for _, k := range []string{redisUnreachable, redisBadValue} {
		r.errs.WithLabelValues(k)
	}
	if opt.Registerer != nil {
		opt.Registerer.MustRegister(r.upG, r.errs)
	}
	return r, nil
}

// Kinds of Redis errors, the kind label of whguard_redis_errors_total.
const (
	redisUnreachable = "unreachable"
	redisBadValue    = "bad_value"
)

// NamespaceOf names a deployment in Redis keys after its journal's
// identity: the first 16 hex digits of its SHA-256 (the identity itself,
// a database's system identifier or a host and path, is not shown).
func NamespaceOf(identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return hex.EncodeToString(sum[:8])
}

// ready resolves the namespace of the keys, once. Every method that uses a
// key calls it first.
func (r *Redis) ready(ctx context.Context) error {
	if r.prefix.Load() != nil {
		return nil
	}
	r.nsMu.Lock()
	defer r.nsMu.Unlock()
	if r.prefix.Load() != nil {
		return nil
	}
	ns, err := r.namespace(ctx)
	if err != nil {
		return fmt.Errorf("name the deployment's redis keys: %w", err)
	}
	p := r.base + ns + ":"
	r.prefix.Store(&p)
	return nil
}

// maxWait bounds how long a delivery is held on one answer of Redis
// before it asks again: a wait computed from a value Redis returned is
// never trusted for longer.
const maxWait = time.Minute

// capWait bounds a wait Redis returned for a's limits: at most the
// longest limit's period times its burst (no honest wait is longer), and
// never more than maxWait.
func (r *Redis) capWait(a Ask, wait time.Duration) time.Duration {
	limit := time.Duration(0)
	for _, rk := range rateKeys(r.cfg, a) {
		limit = max(limit, rk.limit.Rate.Per*time.Duration(rk.limit.burst()))
	}
	if limit > 0 {
		wait = min(wait, limit)
	}
	return max(0, min(wait, maxWait))
}

// Limits reports whether provider's deliveries need asking.
func (r *Redis) Limits(provider string) bool { return r.cfg.Limits(provider) }

// key names one piece of a backend's state. The backend is the hash tag,
// so that one script's keys live on one node of a cluster.
func (r *Redis) key(backend, what string) string {
	return *r.prefix.Load() + "{" + backend + "}:" + what
}

// acquireScript decides one delivery.
//
// KEYS[1] is the backend's in-flight set (member: lease token, score: its
// expiry in µs); KEYS[2..] are the rate keys (each holds its theoretical
// arrival time in µs). ARGV[1] is the token, ARGV[2] the in-flight bound
// (0: none), ARGV[3] the slot's lifetime in µs, then for each rate key its
// emission interval (µs) and burst. It returns {allowed, reason, wait µs}.
var acquireScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local max = tonumber(ARGV[2])
if max > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  if #redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%.0f', now + tonumber(ARGV[3]) + 1000000), '+inf', 'LIMIT', 0, 1) > 0 then
    return redis.error_reply('WHGUARD bad value: a slot that never expires in ' .. KEYS[1])
  end
  if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= max then
    return {0, 'in_flight', 0}
  end
end
local wait = 0
local tats = {}
for i = 2, #KEYS do
  local interval = tonumber(ARGV[2 * i])
  local burst = tonumber(ARGV[2 * i + 1])
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
  local allow_at = tat + interval - burst * interval
  if allow_at > now and allow_at - now > wait then wait = allow_at - now end
  tats[i] = tat + interval
end
if wait > 0 then return {0, 'rate', wait} end
for i = 2, #KEYS do
  redis.call('SET', KEYS[i], string.format('%.0f', tats[i]), 'PX', math.ceil((tats[i] - now) / 1000) + 1)
end
if max > 0 then
  local ttl = tonumber(ARGV[3])
  redis.call('ZADD', KEYS[1], string.format('%.0f', now + ttl), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], math.ceil(ttl / 1000) + 1000)
end
return {1, '', 0}
`)

// Acquire says whether a's delivery may start now: the breaker first
// (from memory, unless a probe is due), then the limits, in one script,
// when a's provider has any. An error means Redis did not answer: the
// caller holds the delivery (HoldUnavailable).
func (r *Redis) Acquire(ctx context.Context, a Ask) (Decision, error) {
	if err := r.ready(ctx); err != nil {
		return Decision{}, err
	}
	if r.cfg.Breaker.Enabled {
		ok, wait, err := r.breakerCheck(ctx, a)
		if err != nil {
			return Decision{}, err
		}
		if !ok {
			return Decision{Reason: HoldBreaker, RetryAfter: wait}, nil
		}
	}
	if !r.cfg.Limits(a.Provider) {
		return Decision{Allowed: true}, nil
	}
	d, err := r.limit(ctx, a)
	if (err != nil || !d.Allowed) && r.cfg.Breaker.Enabled {
		if aerr := r.breakerAbandon(ctx, a); aerr != nil {
			r.log.Debug("abandon probe failed; it expires by itself", zap.Error(aerr))
		}
	}
	return d, err
}

// limit applies the rate limits and the in-flight bound in one script.
func (r *Redis) limit(ctx context.Context, a Ask) (Decision, error) {
	rks := rateKeys(r.cfg, a)
	keys := make([]string, 1, 1+len(rks))
	keys[0] = r.key(a.Backend, "inflight")
	args := make([]any, 3, 3+2*len(rks))
	args[0], args[1], args[2] = a.Token, r.cfg.MaxInFlight, r.cfg.SlotTTL.Microseconds()
	for _, rk := range rks {
		keys = append(keys, r.key(a.Backend, rk.key))
		args = append(args, rk.limit.Rate.interval().Microseconds(), rk.limit.burst())
	}
	res, err := acquireScript.Run(ctx, r.client, keys, args...).Slice()
	if err = r.observe(err); err != nil {
		return Decision{}, fmt.Errorf("acquire delivery to %s: %w", a.Backend, err)
	}
	if len(res) != 3 {
		return Decision{}, fmt.Errorf("acquire delivery to %s: unexpected reply %v", a.Backend, res)
	}
	if allowed, _ := res[0].(int64); allowed == 1 {
		return Decision{Allowed: true}, nil
	}
	reason, _ := res[1].(string)
	wait, _ := res[2].(int64)
	d := Decision{Reason: reason, RetryAfter: r.capWait(a, time.Duration(wait)*time.Microsecond)}
	if reason == HoldInFlight {
		d.RetryAfter = inFlightRetry
	}
	return d, nil
}

// Release gives back what a's allowed delivery took without an outcome
// (it was not sent after all): its slot, and its probe if it was one.
// When Redis does not answer, both expire on their own after SlotTTL.
func (r *Redis) Release(ctx context.Context, a Ask) error {
	if err := r.ready(ctx); err != nil {
		return err
	}
	return errors.Join(r.breakerAbandon(ctx, a), r.releaseSlot(ctx, a))
}

// Finish gives back a's slot once its attempt ended with o, and counts o
// for the backend's breaker.
func (r *Redis) Finish(ctx context.Context, a Ask, o Outcome) error {
	if err := r.ready(ctx); err != nil {
		return err
	}
	var err error
	if r.cfg.Breaker.Enabled {
		err = r.breakerFinish(ctx, a, o)
	}
	return errors.Join(err, r.releaseSlot(ctx, a))
}

func (r *Redis) releaseSlot(ctx context.Context, a Ask) error {
	if r.cfg.MaxInFlight <= 0 || !r.cfg.Limits(a.Provider) {
		return nil
	}
	_, err := r.releases.Do(ctx, []Ask{a})
	return err
}

// InFlight counts the unexpired slots held on backend.
func (r *Redis) InFlight(ctx context.Context, backend string) (int, error) {
	if r.cfg.MaxInFlight <= 0 {
		return 0, nil
	}
	if err := r.ready(ctx); err != nil {
		return 0, err
	}
	// Slots are scored with Redis's clock; without a round trip for TIME,
	// expired ones not yet dropped are counted: an upper bound, for display.
	n, err := r.client.ZCount(ctx, r.key(backend, "inflight"), "-inf", "+inf").Result()
	if err = r.observe(err); err != nil {
		return 0, fmt.Errorf("count slots on %s: %w", backend, err)
	}
	return int(n), nil
}

// Ping checks that Redis answers (at startup: an unreachable Redis is a
// configuration error then, an outage later).
func (r *Redis) Ping(ctx context.Context) error {
	return r.observe(r.client.Ping(ctx).Err())
}

// Up reports whether the last call reached Redis.
func (r *Redis) Up() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.down
}

// observe tracks Redis's availability from a call's error: the first
// failure of an outage is logged (once) and sets whguard_redis_up to 0,
// the first success after it logs the end. An error answer (a key of
// whguard's holding the wrong type, or a value a script refuses as out of
// range) is an outage too: what Redis holds cannot be used, so deliveries
// that need it wait until someone fixes it. Every failure is counted in
// whguard_redis_errors_total. A cancelled call says nothing about Redis.
func (r *Redis) observe(err error) error {
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, redis.Nil)) {
		return err
	}
	var redisErr redis.Error
	switch {
	case err == nil:
		r.setDown(false, "", nil)
	case errors.As(err, &redisErr):
		r.errs.WithLabelValues(redisBadValue).Inc()
		err = fmt.Errorf("redis: %w", err)
		r.setDown(true, redisBadValue, err)
	default:
		r.errs.WithLabelValues(redisUnreachable).Inc()
		r.setDown(true, redisUnreachable, err)
	}
	return err
}

func (r *Redis) setDown(down bool, kind string, err error) {
	r.mu.Lock()
	was := r.down
	r.down = down
	r.mu.Unlock()
	switch {
	case down && !was && kind == redisBadValue:
		r.upG.Set(0)
		r.log.Warn("redis holds a value whguard cannot use (a key of the wrong type, or out of range): deliveries that need the shared limits wait until the key is fixed or deleted", zap.Error(err))
	case down && !was:
		r.upG.Set(0)
		r.log.Warn("redis unreachable: deliveries that need the shared limits wait until it answers", zap.Error(err))
	case !down && was:
		r.upG.Set(1)
		r.log.Info("redis answers again")
	}
}

// Settings returns the limits it applies.
func (r *Redis) Settings() Config { return r.cfg }
