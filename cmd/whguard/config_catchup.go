package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/whguard/whguard/internal/catchup"
)

// catchupVars name catch-up's settings after WHGUARD_<NAME>_.
var catchupVars = map[string]string{
	"Kind": "CATCHUP", "Token": "CATCHUP_TOKEN", "APIURL": "CATCHUP_API_URL", "Hook": "CATCHUP_HOOK",
	"Endpoint": "CATCHUP_ENDPOINT", "Interval": "CATCHUP_INTERVAL", "Window": "CATCHUP_WINDOW",
}

// catchupSettings reads CATCHUP and the credential's variables into
// p.catchup (nil when off), reporting to ps and returning the warnings;
// the rest is catchup.Config's to check (buildComponents). The
// credential is read here once, so that a missing or wrong one stops
// start-up; a file is read again at each pass (a rotated credential is
// used from the next pass on). Nothing said names its value.
func (p *providerConfig) catchupSettings(ps *problems) (warnings []string) {
	switch strings.ToLower(strings.TrimSpace(p.env.Catchup)) {
	case "", "off":
		for _, v := range []struct{ key, val string }{
			{"CATCHUP_TOKEN", p.env.CatchupToken}, {"CATCHUP_TOKEN_FILE", p.env.CatchupTokenFile},
			{"CATCHUP_HOOK", p.env.CatchupHook}, {"CATCHUP_ENDPOINT", p.env.CatchupEndpoint}, {"CATCHUP_API_URL", p.env.CatchupAPIURL},
		} {
			if v.val != "" {
				warnings = append(warnings, fmt.Sprintf("%s%s has no effect unless %sCATCHUP=on", p.prefix, v.key, p.prefix))
			}
		}
		return warnings
	case "on":
	default:
		ps.addf(p.prefix+"CATCHUP", "%q: expected off (the default) or on", p.env.Catchup)
		return warnings
	}
	cfg := &catchup.Config{
		Provider: p.name, Kind: p.env.Scheme, APIURL: p.env.CatchupAPIURL, Hook: p.env.CatchupHook,
		Endpoint: p.env.CatchupEndpoint,
	}
	// Set, a duration is taken as it is; an explicit 0 is refused here,
	// since WithDefaults would read it as unset.
	for _, d := range []struct {
		key string
		set *time.Duration
		to  *time.Duration
	}{{"CATCHUP_INTERVAL", p.env.CatchupInterval, &cfg.Interval}, {"CATCHUP_WINDOW", p.env.CatchupWindow, &cfg.Window}} {
		switch {
		case d.set == nil:
		case *d.set == 0:
			ps.addf(p.prefix+d.key, "must be positive, got 0s")
		default:
			*d.to = *d.set
		}
	}
	p.catchup = cfg
	// Replaced below when the credential is read; a problem with it is
	// reported here, by its variable, not again by Validate.
	cfg.Token = func() (string, error) { return "", errors.New("no credential") }
	if cfg.Kind != catchup.KindStripe && cfg.Kind != catchup.KindGitHub {
		return warnings // Validate says so, naming CATCHUP
	}
	var key, source string
	switch {
	case p.env.CatchupToken != "" && p.env.CatchupTokenFile != "":
		ps.addf(p.prefix+"CATCHUP_TOKEN", "set together with %sCATCHUP_TOKEN_FILE: set one", p.prefix)
		return warnings
	case p.env.CatchupToken != "":
		token := strings.TrimSpace(p.env.CatchupToken)
		cfg.Token = func() (string, error) { return token, nil }
		key, source = p.prefix+"CATCHUP_TOKEN", token
	case p.env.CatchupTokenFile != "":
		path, name := p.env.CatchupTokenFile, p.prefix+"CATCHUP_TOKEN_FILE"
		cfg.Token = func() (string, error) { return readToken(path, name) }
		t, err := cfg.Token()
		if err != nil {
			ps.addf(name, "%v", errors.Unwrap(err))
			return warnings
		}
		key, source = name, t
	default:
		ps.addf(p.prefix+"CATCHUP_TOKEN", "not set (nor %sCATCHUP_TOKEN_FILE); catch-up needs the %s API's credential", p.prefix, p.env.Scheme)
		return warnings
	}
	if source == "" {
		ps.addf(key, "holds only whitespace; expected the API credential")
		return warnings
	}
	if isPlaceholder(source) {
		what := ""
		if strings.HasSuffix(key, "_FILE") {
			what = "the file "
		}
		ps.addf(key, "%s%s", what, placeholderProblem)
		return warnings
	}
	if cfg.Kind == catchup.KindStripe {
		warning, err := catchup.CheckStripeKey(source)
		if err != nil {
			ps.addf(key, "%v", err)
		} else if warning != "" {
			warnings = append(warnings, key+": "+warning)
		}
	}
	return warnings
}

// readToken reads a credential file (whitespace around it removed). Its
// error names the variable, not the value.
func readToken(path, variable string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", variable, errors.New("cannot read the file: "+errors.Unwrap(err).Error()))
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("%s: %w", variable, errors.New("the file holds no credential"))
	}
	return t, nil
}

// catchupAgrees checks p's catch-up against the settings it depends on:
// the events it journals must be keyed as the provider's webhooks are (an
// ID_HEADER other than GitHub's delivery id keys them otherwise, and
// catch-up would journal a second copy of each, or ask again for deliveries
// that arrived), and their keys must be kept for as long as it looks back
// (past WHGUARD_DEDUP_RETENTION, an event still listed by the API, one
// another endpoint keeps failing on, would be journaled and delivered
// again).
func (c *config) catchupAgrees(ps *problems, p providerConfig) {
	if h := strings.TrimSpace(p.env.IDHeader); h != "" &&
		!(p.catchup.Kind == catchup.KindGitHub && strings.EqualFold(h, "X-GitHub-Delivery")) {
		ps.addf(p.prefix+"ID_HEADER", "%q keys events otherwise than %sCATCHUP=on lists them (by the provider's event id): unset one", h, p.prefix)
	}
	if c.forward.KeyRetention < p.catchup.Window {
		ps.addf("WHGUARD_DEDUP_RETENTION", "%s is shorter than %sCATCHUP_WINDOW (%s): catch-up would journal again events whose keys were deleted",
			c.forward.KeyRetention, p.prefix, p.catchup.Window)
	}
}
