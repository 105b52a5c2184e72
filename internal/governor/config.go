package governor

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/whguard/whguard/internal/fields"
)

// Bounds of a Limit: a million requests per second, minute or hour is far
// above any backend, and keeps the GCRA's arithmetic exact.
const (
	MaxRateN = 1_000_000
	MaxBurst = 1_000_000
)

// units are the periods a Rate is written with.
var units = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}

var rateRE = regexp.MustCompile(`^([0-9]+)/([smh])$`)

// rateHint says what ParseRate accepts.
var rateHint = fmt.Sprintf("expected N/s, N/m or N/h with N from 1 to %d, e.g. 20/s", MaxRateN)

// ParseRate parses a rate written N/s, N/m or N/h (as String writes it).
// The empty string is the zero Rate, no limit.
func ParseRate(s string) (Rate, error) {
	if s == "" {
		return Rate{}, nil
	}
	m := rateRE.FindStringSubmatch(s)
	if m == nil {
		return Rate{}, fmt.Errorf("%q is not a rate; %s", s, rateHint)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 || n > MaxRateN {
		return Rate{}, fmt.Errorf("%q is not a rate; %s", s, rateHint)
	}
	return Rate{N: n, Per: units[m[2]]}, nil
}

// WithDefaults returns l with its burst set to the rate's default burst
// when it has a rate and no burst.
func (l Limit) WithDefaults() Limit {
	if !l.Rate.IsZero() && l.Burst == 0 {
		l.Burst = l.Rate.DefaultBurst()
	}
	return l
}

// Validate checks a Limit with its defaults applied: a rate of 1 to
// MaxRateN per second, minute or hour, and a burst from 1 to MaxBurst; no
// rate and no burst is no limit, a burst without a rate is refused (it
// would do nothing).
func (l Limit) Validate() error {
	var errs []error
	if l.Rate != (Rate{}) {
		if l.Rate.N < 1 || l.Rate.N > MaxRateN || !isUnit(l.Rate.Per) {
			errs = append(errs, fields.Errorf("Rate", "%s is not a rate; %s", l.Rate, rateHint))
		}
	}
	switch {
	case l.Rate == (Rate{}) && l.Burst != 0:
		errs = append(errs, fields.Errorf("Burst", "set without {Rate}: a burst needs a rate"))
	case l.Rate != (Rate{}) && (l.Burst < 1 || l.Burst > MaxBurst):
		errs = append(errs, fields.Errorf("Burst", "must be from 1 to %d, got %d", MaxBurst, l.Burst))
	}
	return errors.Join(errs...)
}

func isUnit(d time.Duration) bool { return d == time.Second || d == time.Minute || d == time.Hour }

// WithDefaults returns c with each zero breaker setting set to its
// default (whether or not the breaker is enabled).
func (c BreakerConfig) WithDefaults() BreakerConfig {
	c.Window = cmp.Or(c.Window, DefaultBreakerWindow)
	c.MinAttempts = cmp.Or(c.MinAttempts, DefaultBreakerMinAttempts)
	c.FailureRatio = cmp.Or(c.FailureRatio, DefaultBreakerFailureRatio)
	c.Cooldown = cmp.Or(c.Cooldown, DefaultBreakerCooldown)
	return c
}

// Validate checks the breaker's settings, enabled or not (a bad value is
// a mistake either way).
func (c BreakerConfig) Validate() error {
	var errs []error
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"Window", c.Window}, {"Cooldown", c.Cooldown}} {
		if d.v <= 0 {
			errs = append(errs, fields.Errorf(d.field, "must be positive, got %s", d.v))
		}
	}
	if c.MinAttempts < 1 {
		errs = append(errs, fields.Errorf("MinAttempts", "must be at least 1, got %d", c.MinAttempts))
	}
	if !(c.FailureRatio > 0 && c.FailureRatio <= 1) {
		errs = append(errs, fields.Errorf("FailureRatio", "must be above 0 and at most 1 (a share of the attempts), got %v", c.FailureRatio))
	}
	return errors.Join(errs...)
}

// DefaultSlotTTL is SlotTTL's default: the forwarder's default timeout
// and lease margin.
const DefaultSlotTTL = 20 * time.Second

// WithDefaults returns c with its limits' bursts, its breaker's settings
// and SlotTTL defaulted where zero.
func (c Config) WithDefaults() Config {
	c.Backend = c.Backend.WithDefaults()
	if len(c.Providers) > 0 {
		ps := make(map[string]Limit, len(c.Providers))
		for p, l := range c.Providers {
			ps[p] = l.WithDefaults()
		}
		c.Providers = ps
	}
	c.Breaker = c.Breaker.WithDefaults()
	c.SlotTTL = cmp.Or(c.SlotTTL, DefaultSlotTTL)
	return c
}

// Validate checks a Config with its defaults applied, returning one
// fields.Error per bad setting.
func (c Config) Validate() error {
	errs := []error{fields.Nest("Backend", c.Backend.Validate())}
	for p, l := range c.Providers {
		errs = append(errs, fields.Nest(fields.Key("Providers", p), l.Validate()))
	}
	if c.MaxInFlight < 0 {
		errs = append(errs, fields.Errorf("MaxInFlight", "must be 0 (no bound) or more, got %d", c.MaxInFlight))
	}
	if c.SlotTTL <= 0 {
		errs = append(errs, fields.Errorf("SlotTTL", "must be positive, got %s", c.SlotTTL))
	}
	errs = append(errs, fields.Nest("Breaker", c.Breaker.Validate()))
	return errors.Join(errs...)
}

var namespaceRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// CheckNamespace checks a deployment's name for the Redis keys: 1 to 64
// letters, digits, '.', '_' or '-' (no space, no brace: a brace would
// change the key's Redis Cluster slot).
func CheckNamespace(s string) error {
	if !namespaceRE.MatchString(s) {
		return fmt.Errorf("%q: use 1 to 64 letters, digits, '.', '_' or '-'", s)
	}
	return nil
}
