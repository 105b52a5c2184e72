package admin

import (
	"net/url"
	"strings"

	"github.com/whguard/whguard/forwarder"
	"github.com/whguard/whguard/journal"
)

// pauseTarget is what a pause or resume request names, resolved against
// the configuration.
type pauseTarget struct {
	// name is what is stored and matched: the configured origin or
	// provider name when one matches, else the input normalized.
	name string
	// configured tells whether name is a configured backend or provider.
	configured bool
	// noScheme is set for a backend named without a scheme that matched
	// nothing: it cannot be stored, since no backend's origin would
	// ever equal it.
	noScheme bool
}

// resolvePauseTarget resolves a backend (an origin) or provider named by
// a pause or resume among the configured ones (origins or providers, by
// kind). It is a pure function of its inputs.
//
// Providers match by name, case-insensitively (names are lower case).
// Backends match by origin after normalization: the scheme and host's
// letter case, a path or trailing slash, and a default port do not matter
// (http://App:80/hooks/ is http://app:80). A backend named without a
// scheme (127.0.0.1:15001, app:3000) matches the configured origin with
// that host and port when exactly one has them: a pause is by origin, and
// host:port is what people read in their backend's address; the answer
// names the origin paused, so nothing is guessed silently. A host alone,
// without port, matches nothing (its port would be guessed).
func resolvePauseTarget(kind, in string, configured []string) pauseTarget {
	in = strings.TrimSpace(in)
	if kind == journal.PauseProvider {
		for _, c := range configured {
			if strings.EqualFold(c, in) {
				return pauseTarget{name: c, configured: true}
			}
		}
		return pauseTarget{name: strings.ToLower(in)}
	}
	if !strings.Contains(in, "://") {
		var found []string
		for _, c := range configured {
			if u, err := url.Parse(c); err == nil && strings.EqualFold(u.Host, in) {
				found = append(found, c)
			}
		}
		if len(found) == 1 {
			return pauseTarget{name: found[0], configured: true}
		}
		return pauseTarget{name: in, noScheme: true}
	}
	origin := normalizeOrigin(in)
	for _, c := range configured {
		if strings.EqualFold(c, origin) {
			return pauseTarget{name: c, configured: true}
		}
	}
	return pauseTarget{name: origin}
}

// normalizeOrigin is the origin of a URL as the forwarder names backends
// (scheme://host:port, the scheme in lower case, the default port
// written out); a value that does not parse as a URL with a host is
// returned trimmed of a trailing slash. The host keeps its letter case,
// as the forwarder keeps the configured one: matches ignore case.
func normalizeOrigin(raw string) string {
	if u, err := url.Parse(raw); err != nil || u.Host == "" {
		return strings.TrimSuffix(raw, "/")
	}
	return forwarder.Origin(raw)
}
