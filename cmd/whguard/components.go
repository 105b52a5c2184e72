package main

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/internal/alert"
	"github.com/whguard/whguard/internal/catchup"
	"github.com/whguard/whguard/internal/fields"
	"github.com/whguard/whguard/internal/governor"
	"github.com/whguard/whguard/proxy"
	"github.com/whguard/whguard/proxy/admin"
	"github.com/whguard/whguard/verify"
)

// Each component states its own configuration rules (its Config's
// Validate, reporting the Go field at fault); this file only maps the
// variables to those fields and the fields back to the variables, so that
// an error names the variable an operator sets.

// Variables of the global settings, by component field.
var (
	forwarderVars = map[string]string{
		"Timeout":            "WHGUARD_FORWARD_TIMEOUT",
		"Concurrency":        "WHGUARD_FORWARD_CONCURRENCY",
		"MaxInFlight":        "WHGUARD_BACKEND_MAX_IN_FLIGHT",
		"Policy.BaseDelay":   "WHGUARD_RETRY_BASE_DELAY",
		"Policy.MaxDelay":    "WHGUARD_RETRY_MAX_DELAY",
		"Policy.MaxAttempts": "WHGUARD_RETRY_MAX_ATTEMPTS",
		"KeyRetention":       "WHGUARD_DEDUP_RETENTION",
		"PayloadRetention":   "WHGUARD_PAYLOAD_RETENTION",
	}
	ingressVars = map[string]string{
		"MaxBodyBytes":     "WHGUARD_MAX_BODY_BYTES",
		"MaxBufferedBytes": "WHGUARD_MAX_BUFFERED_BYTES",
	}
	governorVars = map[string]string{
		"Backend.Rate":         "WHGUARD_BACKEND_RATE_LIMIT",
		"Backend.Burst":        "WHGUARD_BACKEND_RATE_BURST",
		"MaxInFlight":          "WHGUARD_BACKEND_MAX_IN_FLIGHT",
		"SlotTTL":              "WHGUARD_FORWARD_TIMEOUT",
		"Breaker.Window":       "WHGUARD_BREAKER_WINDOW",
		"Breaker.MinAttempts":  "WHGUARD_BREAKER_MIN_ATTEMPTS",
		"Breaker.FailureRatio": "WHGUARD_BREAKER_FAILURE_RATIO",
		"Breaker.Cooldown":     "WHGUARD_BREAKER_COOLDOWN",
	}
	alertVars = map[string]string{
		"URL":        "WHGUARD_ALERT_URL",
		"Format":     "WHGUARD_ALERT_FORMAT",
		"Sign":       "WHGUARD_ALERT_SECRET",
		"Repeat":     "WHGUARD_ALERT_REPEAT",
		"BacklogAge": "WHGUARD_ALERT_BACKLOG_AGE",
	}
	apiVars = map[string]string{"RedactHeaders": "WHGUARD_REDACT_HEADERS"}
	// routeVars and limitVars name a provider's variables after its
	// WHGUARD_<NAME>_ prefix.
	routeVars = map[string]string{
		"Path": "PATH", "ForwardPath": "FORWARD_PATH", "MaxBodyBytes": "MAX_BODY_BYTES",
		"Sync": "MODE", "SyncTimeout": "SYNC_TIMEOUT", "EventTypes": "EVENT_TYPES",
	}
	limitVars = map[string]string{"Rate": "RATE_LIMIT", "Burst": "RATE_BURST"}
)

// buildComponents fills each component's configuration from c, starting
// from the component's defaults, and reports its Validate errors to ps
// under their variables. The providers are already parsed (their verify
// settings checked); a provider whose verifier could not be built still
// gets its route and target checked, so that every problem is reported.
func (c *config) buildComponents(ps *problems) {
	// Variables that failed to parse keep their defaults: a rule that
	// then fails would blame a value nobody set.
	parseFailed := map[string]bool{}
	for k := range ps.bad {
		parseFailed[k] = true
	}
	report := func(err error, name func(field string) string) {
		for _, fe := range fields.All(err) {
			key := name(fe.Field)
			if key == "" {
				// A rule about a setting no variable fills: a wiring bug.
				ps.errs = append(ps.errs, fmt.Errorf("internal configuration error: %s: %w", fe.Field, fe))
				continue
			}
			if parseFailed[key] {
				continue
			}
			ps.addOnce(key, fe.Message(func(f string) string { return cmp.Or(name(f), f) }))
		}
	}

	c.forward = forwarder.Config{}.WithDefaults()
	c.forward.Timeout, c.forward.Concurrency, c.forward.MaxInFlight = c.ForwardTimeout, c.ForwardConcurrency, c.BackendMaxInFlight
	c.forward.Policy = forwarder.Policy{BaseDelay: c.RetryBaseDelay, MaxDelay: c.RetryMaxDelay, MaxAttempts: c.RetryMaxAttempts}
	c.forward.KeyRetention, c.forward.PayloadRetention = c.DedupRetention, c.PayloadRetention
	c.forward.Targets = map[string]forwarder.Target{}
	for _, p := range c.providers {
		c.forward.Targets[p.name] = forwarder.Target{BackendURL: p.backendURL(c), ForwardPath: p.env.ForwardPath, PreserveHost: p.env.PreserveHost, Sync: p.sync}
	}
	report(c.forward.Validate(), func(f string) string {
		if name, field, ok := element(f, "Targets"); ok {
			p := c.provider(name)
			switch {
			case field == "BackendURL" && p.env.BackendURL == "":
				return "WHGUARD_BACKEND_URL"
			case field == "BackendURL":
				return p.prefix + "BACKEND_URL"
			case field == "ForwardPath":
				return p.prefix + "FORWARD_PATH"
			}
			return ""
		}
		return forwarderVars[f]
	})
	if c.BackendURL != "" {
		// Checked though every provider has a backend of its own.
		report(forwarder.Target{BackendURL: c.BackendURL}.Validate(), func(string) string { return "WHGUARD_BACKEND_URL" })
	}

	c.ingress = proxy.IngressConfig{}.WithDefaults()
	c.ingress.MaxBodyBytes, c.ingress.MaxBufferedBytes = c.MaxBodyBytes, c.MaxBufferedBytes
	for _, p := range c.providers {
		r := proxy.Route{Path: p.env.Path, ForwardPath: p.env.ForwardPath, MaxBodyBytes: p.env.MaxBodyBytes, BodyGuard: p.bodyGuard,
			EventTypes: p.eventTypes, Sync: p.sync, SyncTimeout: p.syncTimeout, Order: p.order,
			CatchupAsked: p.catchup != nil && p.env.Scheme == catchup.KindGitHub}
		if r.MaxBodyBytes == 0 {
			r.MaxBodyBytes = c.MaxBodyBytes
		}
		if c.PassThrough {
			r.AppPaths = appPaths(c.BackendURL, p.backendURL(c), cmp.Or(p.env.ForwardPath, p.env.Path))
		}
		if p.provider != nil {
			r.Provider = p.provider
		}
		c.ingress.Routes = append(c.ingress.Routes, r)
	}
	report(c.ingress.Validate(), func(f string) string {
		if i, field, ok := index(f, "Routes"); ok {
			p := c.providers[i]
			if field == "" { // a reference to the whole route
				return "provider " + p.name
			}
			return p.prefix + routeVars[field]
		}
		return ingressVars[f]
	})

	report(c.gov.Validate(), func(f string) string {
		if name, field, ok := element(f, "Providers"); ok {
			return c.provider(name).prefix + limitVars[field]
		}
		return governorVars[f]
	})

	for _, p := range c.providers {
		if p.catchup == nil {
			continue
		}
		*p.catchup = p.catchup.WithDefaults()
		report(p.catchup.Validate(), func(f string) string { return p.prefix + catchupVars[f] })
		c.catchupAgrees(ps, p)
	}

	c.alerts = alert.Config{}.WithDefaults()
	c.alerts.URL, c.alerts.Format, c.alerts.Sign = c.AlertURL, c.AlertFormat, c.alertSign
	c.alerts.Repeat, c.alerts.BacklogAge = c.AlertRepeat, c.AlertBacklogAge
	report(c.alerts.Validate(), func(f string) string { return alertVars[f] })

	for i, name := range c.RedactHeaders {
		c.RedactHeaders[i] = strings.TrimSpace(name) // "X-A, X-B" lists two names
	}
	report(admin.APIConfig{RedactHeaders: c.RedactHeaders}.Validate(), func(f string) string { return apiVars[f] })
}

// provider returns the provider named name.
func (c *config) provider(name string) *providerConfig {
	for i := range c.providers {
		if c.providers[i].name == name {
			return &c.providers[i]
		}
	}
	panic("no provider " + name)
}

// backendURL is where the provider's events go: its own backend, else the
// global one.
func (p *providerConfig) backendURL(c *config) string {
	return cmp.Or(p.env.BackendURL, c.BackendURL)
}

// element splits "Targets[stripe].BackendURL" into stripe and BackendURL
// when f is an element of the map field named field.
func element(f, field string) (key, rest string, ok bool) {
	after, ok := strings.CutPrefix(f, field+"[")
	if !ok {
		return "", "", false
	}
	key, rest, ok = strings.Cut(after, "]")
	return key, strings.TrimPrefix(rest, "."), ok
}

// index is element for a slice field: "Routes[2].Path" is 2 and Path.
func index(f, field string) (i int, rest string, ok bool) {
	key, rest, ok := element(f, field)
	if !ok {
		return 0, "", false
	}
	if _, err := fmt.Sscan(key, &i); err != nil {
		return 0, "", false
	}
	return i, rest, true
}

// verifyVars maps each verify setting to the variable (after
// WHGUARD_<NAME>_) that holds it. Secrets come from SECRET, SECRET_FILE
// and SECRET_PREVIOUS: see loadSecrets.
var verifyVars = map[verify.Field]string{
	verify.FieldScheme:            "SCHEME",
	verify.FieldSecrets:           "SECRET",
	verify.FieldTolerance:         "TOLERANCE",
	verify.FieldIDHeader:          "ID_HEADER",
	verify.FieldPublicKey:         "PUBLIC_KEY",
	verify.FieldPublicURL:         "PUBLIC_URL",
	verify.FieldHMACAlgorithm:     "HMAC_ALGORITHM",
	verify.FieldSignatureHeader:   "SIGNATURE_HEADER",
	verify.FieldSignatureEncoding: "SIGNATURE_ENCODING",
	verify.FieldSignaturePrefix:   "SIGNATURE_PREFIX",
	verify.FieldTimestampHeader:   "TIMESTAMP_HEADER",
	verify.FieldSignedContent:     "SIGNED_CONTENT",
	verify.FieldBackendSecret:     "BACKEND_SECRET",
	verify.FieldVerifyToken:       "VERIFY_TOKEN",
	verify.FieldBasicAuth:         "BASIC_AUTH",
	verify.FieldKeyHosts:          "KEY_HOSTS",
	verify.FieldCAFile:            "CA_FILE",
	verify.FieldAudience:          "AUDIENCE",
	verify.FieldTopicARNs:         "TOPIC_ARNS",
	verify.FieldServiceAccounts:   "SERVICE_ACCOUNTS",
}

// governorConfig is the limits as the governor takes them, with the
// rates and bursts parsed from their variables (a bad one reported to ps).
func (c *config) governorConfig(ps *problems) governor.Config {
	gc := governor.Config{
		Backend:     c.limit("WHGUARD_", c.BackendRateLimit, c.BackendRateBurst, ps),
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
		if l := c.limit(p.prefix, p.env.RateLimit, p.env.RateBurst, ps); l != (governor.Limit{}) {
			gc.Providers[p.name] = l
		}
		if o := forwarder.Origin(p.backendURL(c)); !slices.Contains(gc.Backends, o) {
			gc.Backends = append(gc.Backends, o)
		}
	}
	return gc
}

// limit parses a <prefix>RATE_LIMIT (WHGUARD_BACKEND_RATE_LIMIT for the
// backend's) and its burst: an unset burst takes the rate's default, a set
// one is kept as it is for the governor to check (0 included).
func (c *config) limit(prefix, rate string, burst *int, ps *problems) governor.Limit {
	rateVar := prefix + "RATE_LIMIT"
	if prefix == "WHGUARD_" {
		rateVar = "WHGUARD_BACKEND_RATE_LIMIT"
	}
	r, err := governor.ParseRate(rate)
	if err != nil {
		ps.addf(rateVar, "%v", err)
		return governor.Limit{} // its burst is not checked against no rate
	}
	l := governor.Limit{Rate: r}
	if burst == nil {
		return l.WithDefaults()
	}
	l.Burst = *burst
	return l
}

// appPaths is where a provider's webhook handler, delivered to at
// backendURL + handler, lies as pass-through requests to passURL spell it:
// none when its backend is another app (another origin) or the handler is
// outside the pass-through's base path; the handler itself when both
// share a base path (Path and ForwardPath guard it already).
func appPaths(passURL, backendURL, handler string) []string {
	pu, err1 := url.Parse(passURL)
	bu, err2 := url.Parse(backendURL)
	if err1 != nil || err2 != nil || forwarder.Origin(passURL) != forwarder.Origin(backendURL) {
		return nil
	}
	full := strings.TrimSuffix(bu.Path, "/") + handler
	rest, ok := strings.CutPrefix(full, strings.TrimSuffix(pu.Path, "/"))
	if !ok || rest == handler || !strings.HasPrefix(rest, "/") {
		return nil
	}
	return []string{rest}
}
