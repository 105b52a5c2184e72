package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/governor"
	"github.com/whguard/whguard/internal/startstop"
)

// The backend protection's settings: WHGUARD_REDIS_URL, the rate limits,
// the in-flight bound and the circuit breaker.

var (
	rateRE           = regexp.MustCompile(`^([0-9]+)/([smh])$`)
	redisNamespaceRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
)

// parseRate parses N/s, N/m or N/h.
func parseRate(s string) (governor.Rate, bool) {
	m := rateRE.FindStringSubmatch(s)
	if m == nil {
		return governor.Rate{}, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 || n > 1_000_000 {
		return governor.Rate{}, false
	}
	per := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}[m[2]]
	return governor.Rate{N: n, Per: per}, true
}

// parseLimit parses a rate variable and its burst, reporting bad values
// under their own names. An unset rate is no limit; a burst without a
// rate is refused (it would do nothing).
func parseLimit(rateKey, rate, burstKey string, burst *int, ps *problems) governor.Limit {
	var l governor.Limit
	if rate != "" {
		r, ok := parseRate(rate)
		if !ok {
			ps.addf(rateKey, "%q is not a rate; expected N/s, N/m or N/h with N from 1 to 1000000, e.g. 20/s", rate)
			return l
		}
		l.Rate = r
	}
	if burst != nil {
		switch {
		case *burst < 1 || *burst > 1_000_000:
			ps.addf(burstKey, "must be from 1 to 1000000, got %d", *burst)
		case l.Rate.IsZero() && !ps.failed(rateKey):
			ps.addf(burstKey, "set without %s: a burst needs a rate", rateKey)
		default:
			l.Burst = *burst
		}
	}
	return l
}

// validateProtection checks the backend protection's settings.
func (c *config) validateProtection(ps *problems) {
	if c.RedisURL != "" {
		u, err := url.Parse(c.RedisURL)
		switch {
		case err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "":
			// The URL itself is not shown: it may hold a password.
			ps.addf("WHGUARD_REDIS_URL", "must be redis://host:port/db (or rediss:// for TLS)")
		default:
			if _, err := redisOptions(c.RedisURL); err != nil {
				ps.addf("WHGUARD_REDIS_URL", "%v", err)
			}
		}
	}
	if c.RedisNamespace != "" && !redisNamespaceRE.MatchString(c.RedisNamespace) {
		ps.addf("WHGUARD_REDIS_NAMESPACE", "%q: use 1 to 64 letters, digits, '.', '_' or '-'", c.RedisNamespace)
	}
	c.backendLimit = parseLimit("WHGUARD_BACKEND_RATE_LIMIT", c.BackendRateLimit, "WHGUARD_BACKEND_RATE_BURST", c.BackendRateBurst, ps)
	if c.BackendMaxInFlight < 0 && !ps.failed("WHGUARD_BACKEND_MAX_IN_FLIGHT") {
		ps.addf("WHGUARD_BACKEND_MAX_IN_FLIGHT", "must be 0 (no bound) or more, got %d", c.BackendMaxInFlight)
	}
	switch c.Breaker {
	case "on", "off":
	default:
		ps.addf("WHGUARD_BREAKER", "%q is not on or off", c.Breaker)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"WHGUARD_BREAKER_WINDOW", c.BreakerWindow}, {"WHGUARD_BREAKER_COOLDOWN", c.BreakerCooldown}} {
		if d.v < time.Second && !ps.failed(d.name) {
			ps.addf(d.name, "must be at least 1s, got %s", d.v)
		}
	}
	if c.BreakerMinAttempts < 1 && !ps.failed("WHGUARD_BREAKER_MIN_ATTEMPTS") {
		ps.addf("WHGUARD_BREAKER_MIN_ATTEMPTS", "must be at least 1, got %d", c.BreakerMinAttempts)
	}
	if !(c.BreakerFailureRatio > 0 && c.BreakerFailureRatio <= 1) && !ps.failed("WHGUARD_BREAKER_FAILURE_RATIO") {
		ps.addf("WHGUARD_BREAKER_FAILURE_RATIO", "must be above 0 and at most 1 (a share of the attempts), got %v", c.BreakerFailureRatio)
	}
}

// redisOptions parses WHGUARD_REDIS_URL into client options with short
// timeouts: a Redis that does not answer holds deliveries (an outage),
// it must not stall them.
func redisOptions(raw string) (*redis.Options, error) {
	opt, err := redis.ParseURL(raw)
	if err != nil {
		// go-redis's message may quote parts of the URL; say what is
		// wrong without them.
		return nil, errors.New("cannot be parsed as redis://[user:password@]host:port/db (the URL is not shown: it may hold a password)")
	}
	opt.DialTimeout = time.Second
	opt.ReadTimeout = 500 * time.Millisecond
	opt.WriteTimeout = 500 * time.Millisecond
	opt.MaxRetries = 1
	return opt, nil
}

// governorConfig is the limits as the governor takes them.
func (c *config) governorConfig() governor.Config {
	gc := governor.Config{
		Backend:     c.backendLimit,
		MaxInFlight: c.BackendMaxInFlight,
		// A crashed replica's slots come back once its lease would have
		// expired.
		SlotTTL:   c.ForwardTimeout + forwarder.DefaultLeaseMargin,
		Providers: map[string]governor.Limit{},
		Breaker: governor.BreakerConfig{
			Enabled: c.Breaker == "on", Window: c.BreakerWindow, MinAttempts: c.BreakerMinAttempts,
			FailureRatio: c.BreakerFailureRatio, Cooldown: c.BreakerCooldown,
		},
	}
	for _, p := range c.providers {
		if !p.limit.Rate.IsZero() {
			gc.Providers[p.name] = p.limit
		}
		if o := forwarder.Origin(p.env.BackendURL); !slices.Contains(gc.Backends, o) {
			gc.Backends = append(gc.Backends, o)
		}
	}
	return gc
}

// limited reports whether any limit is configured.
func (c *config) limited() bool {
	gc := c.governorConfig()
	for _, p := range c.providers {
		if gc.Limits(p.name) {
			return true
		}
	}
	return false
}

// newGovernor builds the governor: in Redis when WHGUARD_REDIS_URL is set,
// else in process. It returns nil when nothing is limited and the breaker
// is off: the delivery path then asks nothing. With the breaker alone, the
// Redis governor reads it from memory: no round trip per delivery either.
// The keys are named after WHGUARD_REDIS_NAMESPACE, else the journal's
// identity, so that two deployments sharing one Redis share nothing. svc,
// when not nil, is what the Redis governor runs (the breakers' sync) and
// closes: its Start checks that Redis answers, and a Redis that does not
// is an outage like any other (warned about, whguard_redis_up 0,
// deliveries that need it wait), never a reason not to start: ingest does
// not need it.
func newGovernor(ctx context.Context, c *config, j interface {
	Identity(context.Context) (string, error)
}, reg prometheus.Registerer, log *zap.Logger) (g forwarder.Governor, svc startstop.Service, err error) {
	gc := c.governorConfig()
	if !c.limited() && !gc.Breaker.Enabled {
		return nil, nil, nil
	}
	if c.RedisURL == "" {
		g, err := governor.NewLocal(gc, nil)
		if err != nil {
			return nil, nil, err
		}
		governor.RegisterBreakerMetric(reg, g)
		log.Info("backend limits and breakers kept in this process (set WHGUARD_REDIS_URL to share them between replicas)")
		return g, nil, nil
	}
	opt, err := redisOptions(c.RedisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("WHGUARD_REDIS_URL: %w", err)
	}
	client := redis.NewClient(opt)
	namespace := func(ctx context.Context) (string, error) {
		if c.RedisNamespace != "" {
			return c.RedisNamespace, nil
		}
		id, err := j.Identity(ctx)
		if err != nil {
			return "", err
		}
		return governor.NamespaceOf(id), nil
	}
	rg, err := governor.NewRedis(gc, client, governor.RedisOptions{Logger: log, Registerer: reg, Namespace: namespace})
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	governor.RegisterBreakerMetric(reg, rg)
	return rg, startstop.Func{
		StartFunc: func(ctx context.Context) error {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if err := rg.Ping(pctx); err != nil {
				log.Warn("redis does not answer at start-up; webhooks are acknowledged as usual, deliveries that need the shared limits wait until it does",
					zap.String("addr", opt.Addr))
			}
			log.Info("backend limits and breakers shared through redis", zap.String("addr", opt.Addr))
			return rg.Start(ctx)
		},
		StopFunc: func(ctx context.Context) error {
			defer client.Close()
			return rg.Stop(ctx)
		},
	}, nil
}
