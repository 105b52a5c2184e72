package catchup

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/whguard/whguard/internal/fields"
)

// The providers catch-up can ask, by their signature scheme.
const (
	KindStripe = "stripe"
	KindGitHub = "github"
)

// Defaults and bounds.
const (
	DefaultInterval = 5 * time.Minute
	DefaultWindow   = 72 * time.Hour
	// StripeRetention and GitHubRetention are how far back each API lists
	// (Stripe keeps events 30 days; GitHub lists 3 days of deliveries).
	StripeRetention = 720 * time.Hour
	GitHubRetention = 72 * time.Hour
)

// DefaultAPIURL is each provider's API.
var DefaultAPIURL = map[string]string{KindStripe: "https://api.stripe.com", KindGitHub: "https://api.github.com"}

// Config is one provider's catch-up.
type Config struct {
	// Provider is the provider's name (WHGUARD_PROVIDERS).
	Provider string
	// Kind is KindStripe or KindGitHub: the provider's scheme.
	Kind string
	// Token returns the API credential as it is now (a file may be
	// rotated): never logged, stored or shown.
	Token func() (string, error)
	// APIURL is the API's base URL; "" means DefaultAPIURL's.
	APIURL string
	// Hook is the GitHub hook whose deliveries are read:
	// repos/OWNER/REPO/hooks/ID or orgs/ORG/hooks/ID.
	Hook string
	// Endpoint is the Stripe webhook endpoint (we_…) whose enabled event
	// types limit what is brought in; "" brings in every type.
	Endpoint string
	// Interval is the time between passes; Window how far back a pass
	// looks (at most the provider's retention).
	Interval, Window time.Duration
}

// WithDefaults returns c with its zero settings defaulted.
func (c Config) WithDefaults() Config {
	c.APIURL = cmp.Or(c.APIURL, DefaultAPIURL[c.Kind])
	c.Interval = cmp.Or(c.Interval, DefaultInterval)
	c.Window = cmp.Or(c.Window, DefaultWindow)
	return c
}

var hookRE = regexp.MustCompile(`^(repos/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)|orgs/([A-Za-z0-9_.-]+))/hooks/([0-9]+)$`)

// hook is a parsed Hook.
type hook struct {
	owner, repo, org string
	id               int64
}

func parseHook(s string) (hook, bool) {
	m := hookRE.FindStringSubmatch(s)
	if m == nil {
		return hook{}, false
	}
	id, err := strconv.ParseInt(m[5], 10, 64)
	if err != nil || id <= 0 {
		return hook{}, false
	}
	return hook{owner: m[2], repo: m[3], org: m[4], id: id}, true
}

// Retention is how far back the provider's API lists.
func Retention(kind string) time.Duration {
	if kind == KindStripe {
		return StripeRetention
	}
	return GitHubRetention
}

// Validate checks a Config with its defaults applied, returning one
// fields.Error per bad setting.
func (c Config) Validate() error {
	var errs []error
	add := func(field, format string, a ...any) { errs = append(errs, fields.Errorf(field, format, a...)) }
	if c.Kind != KindStripe && c.Kind != KindGitHub {
		add("Kind", "catch-up asks the Stripe and GitHub APIs only; scheme %q has none", c.Kind)
		return errors.Join(errs...)
	}
	if c.Token == nil {
		add("Token", "is required: the API credential")
	}
	if err := CheckAPIURL(c.APIURL); err != nil {
		errs = append(errs, &fields.Error{Field: "APIURL", Err: err})
	}
	switch {
	case c.Kind == KindGitHub && c.Hook == "":
		add("Hook", "is required: the hook whose deliveries are read, repos/OWNER/REPO/hooks/ID or orgs/ORG/hooks/ID")
	case c.Kind == KindGitHub:
		if _, ok := parseHook(c.Hook); !ok {
			add("Hook", "%q is not repos/OWNER/REPO/hooks/ID or orgs/ORG/hooks/ID", c.Hook)
		}
	case c.Hook != "":
		add("Hook", "applies to github only")
	}
	switch {
	case c.Endpoint != "" && c.Kind != KindStripe:
		add("Endpoint", "applies to stripe only")
	case c.Endpoint != "" && !strings.HasPrefix(c.Endpoint, "we_"):
		add("Endpoint", "%q is not a webhook endpoint id (we_…)", c.Endpoint)
	}
	if c.Interval <= 0 {
		add("Interval", "must be positive, got %s", c.Interval)
	}
	if r := Retention(c.Kind); c.Window <= 0 || c.Window > r {
		add("Window", "must be above 0 and at most %s (how far back %s's API lists), got %s", r, c.Kind, c.Window)
	}
	return errors.Join(errs...)
}

// CheckAPIURL accepts an https URL, or http to a loopback host (a local
// fake or proxy). The error does not quote the URL.
func CheckAPIURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return errors.New("is not an API base URL (expected https://host[:port][/path])")
	}
	if u.Scheme == "http" && !loopback(u.Hostname()) {
		return errors.New("http:// is refused but to a loopback host: the credential would cross the network in clear")
	}
	return nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckStripeKey checks a Stripe catch-up credential: a restricted key
// (rk_…) is what it should be; a secret key (sk_…) works and is warned
// about; a publishable key or a webhook secret is refused. Neither the
// error nor the warning holds the key.
func CheckStripeKey(key string) (warning string, err error) {
	switch {
	case strings.HasPrefix(key, "rk_"):
		return "", nil
	case strings.HasPrefix(key, "sk_"):
		return "a secret key (sk_…) can do anything on the account: create a restricted key (rk_…) that can only read Events (and Webhook Endpoints)", nil
	case strings.HasPrefix(key, "pk_"):
		return "", errors.New("a publishable key (pk_…) cannot read events: use a restricted key (rk_…) with Events read")
	case strings.HasPrefix(key, "whsec_"):
		return "", errors.New("that is the webhook signing secret, not an API key: use a restricted key (rk_…) with Events read")
	}
	return "", fmt.Errorf("is not a Stripe API key: use a restricted key (rk_…) with Events read")
}
