package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
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
		if _, _, err := redisClientOptions(c.RedisURL); err != nil {
			ps.addf("WHGUARD_REDIS_URL", "%v", err)
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

// Timeouts of every Redis call: a Redis that does not answer holds
// deliveries (an outage), it must not stall them.
const (
	redisDialTimeout = time.Second
	redisIOTimeout   = 500 * time.Millisecond
)

// newRedisClient parses WHGUARD_REDIS_URL into a client with short
// timeouts: redis://host:port/db (rediss:// for TLS), or
// redis+sentinel://[:password@]host1:26379,host2:26379/MASTER[/db]
// (rediss+sentinel://) for a master that Sentinel fails over, followed
// by go-redis's failover client. The error never quotes the URL: it may
// hold a password.
func newRedisClient(raw string) (*redis.Client, error) {
	opt, failover, err := redisClientOptions(raw)
	switch {
	case err != nil:
		return nil, err
	case failover != nil:
		return redis.NewFailoverClient(failover), nil
	}
	return redis.NewClient(opt), nil
}

// redisClientOptions parses WHGUARD_REDIS_URL: options for one server, or
// for a master behind Sentinel.
func redisClientOptions(raw string) (*redis.Options, *redis.FailoverOptions, error) {
	if scheme, _, _ := strings.Cut(raw, "://"); scheme == "redis+sentinel" || scheme == "rediss+sentinel" {
		opt, err := sentinelOptions(raw)
		return nil, opt, err
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
		return nil, nil, errors.New("must be redis://host:port/db (rediss:// for TLS) or redis+sentinel://host1:26379,host2:26379/MASTER_NAME/db (the URL is not shown: it may hold a password)")
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		// go-redis's message may quote parts of the URL; say what is
		// wrong without them.
		return nil, nil, errors.New("cannot be parsed as redis://[user:password@]host:port/db (the URL is not shown: it may hold a password)")
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.MaxRetries = redisDialTimeout, redisIOTimeout, redisIOTimeout, 1
	return opt, nil, nil
}

// sentinelOptions parses a redis+sentinel:// URL: the password in it is
// the master's, ?sentinel_password= the Sentinels'. (The list of hosts is
// not a URL host net/url accepts, so it is cut by hand.)
func sentinelOptions(raw string) (*redis.FailoverOptions, error) {
	bad := func(what string) error {
		return fmt.Errorf("redis+sentinel:// URL: %s; the form is redis+sentinel://[:password@]host1:26379,host2:26379/MASTER_NAME[/db][?sentinel_password=…] (the URL is not shown: it may hold a password)", what)
	}
	scheme, rest, _ := strings.Cut(raw, "://")
	if strings.Contains(rest, "#") {
		return nil, bad("a fragment (#) has no meaning here")
	}
	rest, rawQuery, _ := strings.Cut(rest, "?")
	opt := &redis.FailoverOptions{DialTimeout: redisDialTimeout, ReadTimeout: redisIOTimeout, WriteTimeout: redisIOTimeout, MaxRetries: 1}
	// The last @ ends the user information: a password may hold @ or /.
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		userinfo := rest[:at]
		rest = rest[at+1:]
		user, password, hasPassword := strings.Cut(userinfo, ":")
		var err error
		if opt.Username, err = url.PathUnescape(user); err != nil {
			return nil, bad("the user name is not escaped right")
		}
		if hasPassword {
			if opt.Password, err = url.PathUnescape(password); err != nil {
				return nil, bad("the password is not escaped right")
			}
		}
	}
	authority, path, _ := strings.Cut(rest, "/")
	for _, h := range strings.Split(authority, ",") {
		host, port, err := net.SplitHostPort(h)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return nil, bad("each Sentinel must be host:port")
		}
		opt.SentinelAddrs = append(opt.SentinelAddrs, h)
	}
	master, db, _ := strings.Cut(path, "/")
	master, err := url.PathUnescape(master)
	if err != nil {
		return nil, bad("the master's name is not escaped right")
	}
	if opt.MasterName = master; master == "" {
		return nil, bad("the master's name is missing")
	}
	if db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 {
			return nil, bad("the database must be a number")
		}
		opt.DB = n
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, bad("the query cannot be parsed")
	}
	for k, vs := range q {
		switch {
		case k != "sentinel_password":
			return nil, bad("unknown parameter " + strconv.Quote(k))
		case len(vs) > 1:
			return nil, bad("sentinel_password given twice")
		}
	}
	opt.SentinelPassword = q.Get("sentinel_password")
	if scheme == "rediss+sentinel" {
		opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return opt, nil
}

// redisName names the Redis for the logs without credentials: its address,
// or the master's name under Sentinel.
func redisName(raw string, client *redis.Client) string {
	if _, failover, err := redisClientOptions(raw); err == nil && failover != nil {
		return "sentinel master " + failover.MasterName
	}
	return client.Options().Addr
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
	client, err := newRedisClient(c.RedisURL)
	if err != nil {
		return nil, nil, fmt.Errorf("WHGUARD_REDIS_URL: %w", err)
	}
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
					zap.String("redis", redisName(c.RedisURL, client)))
			}
			log.Info("backend limits and breakers shared through redis", zap.String("redis", redisName(c.RedisURL, client)))
			return rg.Start(ctx)
		},
		StopFunc: func(ctx context.Context) error {
			defer client.Close()
			return rg.Stop(ctx)
		},
	}, nil
}
