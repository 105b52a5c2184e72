package verify

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// urlSigner is a scheme whose signature covers the URL the sender posts
// to (twilio, square, hubspot): Diagnose tries it with other URLs.
type urlSigner interface {
	// signedURL is the configured public URL (WHGUARD_<NAME>_PUBLIC_URL).
	signedURL() string
	// withURL returns the scheme, same secrets, signing u instead.
	withURL(u string) Scheme
}

var (
	_ urlSigner = (*twilioScheme)(nil)
	_ urlSigner = (*squareScheme)(nil)
	_ urlSigner = (*hubspotScheme)(nil)
)

func (s *twilioScheme) signedURL() string { return s.urls[0] }
func (s *twilioScheme) withURL(u string) Scheme {
	return &twilioScheme{keys: s.keys, urls: []string{u}}
}
func (s *squareScheme) signedURL() string { return s.publicURL }
func (s *squareScheme) withURL(u string) Scheme {
	return &squareScheme{keys: s.keys, publicURL: u}
}
func (s *hubspotScheme) signedURL() string { return s.publicURL }
func (s *hubspotScheme) withURL(u string) Scheme {
	return &hubspotScheme{keys: s.keys, tolerance: s.tolerance, publicURL: u}
}

// urlMismatch: the signature verifies over the public URL with another
// scheme, host (the request's Host or X-Forwarded-Host) or port.
func (d *diagnoser) urlMismatch() (Diagnosis, bool) {
	us, ok := d.p.keys.Load().verifier.(urlSigner)
	if !ok || !d.body {
		return Diagnosis{}, false
	}
	configured, err := parseSignedURL(us.signedURL())
	if err != nil {
		return Diagnosis{}, false
	}
	for _, c := range configured.variants(d.host, d.in.Header.Get("X-Forwarded-Host")) {
		if d.verifies(us.withURL(c.String()), d.in) {
			return Diagnosis{Code: DiagnosisURLMismatch, Detail: fmt.Sprintf(
				"the signature matches the public URL with %s: the sender signs the URL it posts to, and a proxy in front of whguard may change "+
					"the scheme, host or port; set this provider's PUBLIC_URL to the URL configured at the sender", configured.diff(c))}, true
		}
	}
	return Diagnosis{}, false
}

// signedURLParts is a public URL split where Diagnose changes it; path is
// everything after the authority, as configured.
type signedURLParts struct {
	scheme, host, port, path string
}

func (u signedURLParts) String() string {
	host := u.host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if u.port != "" {
		host += ":" + u.port
	}
	return u.scheme + "://" + host + u.path
}

// effectivePort is the port the URL reaches (the scheme's default when
// none is written).
func (u signedURLParts) effectivePort() string {
	switch {
	case u.port != "":
		return u.port
	case u.scheme == "https":
		return "443"
	}
	return "80"
}

// parseSignedURL splits a configured public URL (checked when the provider
// was built), keeping its path text as written.
func parseSignedURL(raw string) (signedURLParts, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return signedURLParts{}, err
	}
	i := strings.Index(raw, "://")
	if i < 0 || !strings.HasPrefix(raw[i+3:], u.Host) {
		return signedURLParts{}, fmt.Errorf("not scheme://authority/path")
	}
	return signedURLParts{scheme: u.Scheme, host: u.Hostname(), port: u.Port(), path: raw[i+3+len(u.Host):]}, nil
}

// variants returns the URLs that differ from u only by scheme, host (u's
// or one of hosts, a received Host header's value) or port, u itself and
// its default-port twin left out.
func (u signedURLParts) variants(hosts ...string) []signedURLParts {
	schemes := []string{u.scheme, map[string]string{"https": "http", "http": "https"}[u.scheme]}
	names, ports := []string{u.host}, []string{u.port}
	for _, h := range hosts {
		if name, port, ok := splitReceivedHost(h); ok {
			names, ports = appendNew(names, name), appendNew(ports, port)
		}
	}
	for _, p := range []string{"", "443", "80"} {
		ports = appendNew(ports, p)
	}
	var out []signedURLParts
	for _, name := range names {
		for _, port := range ports {
			for _, scheme := range schemes {
				c := signedURLParts{scheme: scheme, host: name, port: port, path: u.path}
				if c.scheme == u.scheme && strings.EqualFold(c.host, u.host) && c.effectivePort() == u.effectivePort() {
					continue // the configured URL, however spelled: already refused
				}
				out = append(out, c)
			}
		}
	}
	return out
}

// diff says how c differs from u, in words.
func (u signedURLParts) diff(c signedURLParts) string {
	var parts []string
	if c.scheme != u.scheme {
		parts = append(parts, fmt.Sprintf("scheme %s, not %s", c.scheme, u.scheme))
	}
	if !strings.EqualFold(c.host, u.host) {
		parts = append(parts, fmt.Sprintf("host %s, not %s", c.host, u.host))
	}
	if c.effectivePort() != u.effectivePort() {
		parts = append(parts, fmt.Sprintf("port %s, not %s", c.effectivePort(), u.effectivePort()))
	}
	return strings.Join(parts, ", ")
}

// splitReceivedHost splits a received Host value into a host name and a
// port, refusing anything that is not plainly one (the value is the
// sender's to choose).
func splitReceivedHost(h string) (name, port string, ok bool) {
	if h == "" || len(h) > 260 {
		return "", "", false
	}
	name = h
	if n, p, err := net.SplitHostPort(h); err == nil {
		name, port = n, p
	}
	if name == "" || len(port) > 5 || strings.Trim(port, "0123456789") != "" {
		return "", "", false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '.' || c == '-' || c == ':') {
			return "", "", false
		}
	}
	return name, port, true
}

// appendNew appends s to list unless list holds it (case-insensitively).
func appendNew(list []string, s string) []string {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return list
		}
	}
	return append(list, s)
}
