package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
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

// validateProtection reads the Redis settings and WHGUARD_BREAKER; the
// limits and the breaker's settings are the governor's to check
// (buildComponents).
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
	if c.RedisNamespace != "" {
		if err := governor.CheckNamespace(c.RedisNamespace); err != nil {
			ps.addf("WHGUARD_REDIS_NAMESPACE", "%v", err)
		}
	}
	switch c.Breaker {
	case "on", "off":
	default:
		ps.addf("WHGUARD_BREAKER", "%q is not on or off", c.Breaker)
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

// limited reports whether any limit is configured.
func (c *config) limited() bool {
	for _, p := range c.providers {
		if c.gov.Limits(p.name) {
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
	gc := c.gov
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
