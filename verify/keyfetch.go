package verify

// Keys fetched from the provider (sns, pubsub): the allow-list of key
// hosts, the HTTPS client that fetches from them, and its refusals. The
// cache of what it fetches is in keycache.go.
//
// Goroutines: a keyClient is built once by NewProvider and never changed
// afterwards; every request goroutine that runs a scheme's Verify uses it
// concurrently (http.Client and its Transport are safe for that). It starts
// no goroutine of its own besides the Transport's connection handling.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Bounds on one fetch from a key host. Real answers are small: an SNS
// signing certificate is about 2 KB, Google's JWKS about 1.5 KB.
const (
	// keyFetchTimeout bounds a whole fetch: connection, TLS, headers and
	// body. A request waiting on a key fails with 503 after it, and the
	// sender retries.
	keyFetchTimeout = 5 * time.Second
	// maxKeyBody is the largest answer read from a key host.
	maxKeyBody = 64 << 10
	// maxKeyURLLen bounds a key or confirmation URL taken from a request.
	maxKeyURLLen = 2048
	// minRSAKeyBits refuses a fetched key weaker than the providers' own
	// (AWS's and Google's are 2048 bits).
	minRSAKeyBits = 2048
)

// keyHosts is an allow-list of the hosts keys may be fetched from. It is
// immutable once built.
type keyHosts struct {
	// pattern holds the scheme's own hosts, matched against the host name
	// of a URL on the default port; nil when KeyHosts replaced it.
	pattern *regexp.Regexp
	// exact holds "host" (default port only) and "host:port" entries,
	// lower case.
	exact []string
	// suffixes holds ".example.com" for each "*.example.com" entry, lower
	// case: any host name ending in it, on the default port.
	suffixes []string
}

// parseKeyHosts reads ProviderConfig.KeyHosts (blank entries skipped); an
// empty list keeps the scheme's pattern. A wildcard must be "*." followed
// by a name with a dot, so that "*" or "*.com" cannot open the list to the
// world.
func parseKeyHosts(entries []string, pattern *regexp.Regexp) (keyHosts, error) {
	var h keyHosts
	for _, e := range entries {
		e = strings.ToLower(strings.TrimSpace(e))
		switch {
		case e == "":
			continue
		case strings.HasPrefix(e, "*."):
			suffix := e[1:]
			if !strings.Contains(suffix[1:], ".") || !validHostPort(suffix[1:], false) {
				return keyHosts{}, fieldErrorf(FieldKeyHosts, "key host %q: a wildcard is *. followed by a domain with at least two labels, such as *.keys.example.internal", e)
			}
			if sharedSuffix(suffix) {
				return keyHosts{}, fieldErrorf(FieldKeyHosts, "key host %q: hosts under %s serve anyone's content over valid TLS (S3, API Gateway, …); list the key hosts themselves", e, suffix[1:])
			}
			h.suffixes = append(h.suffixes, suffix)
		case validHostPort(e, true):
			h.exact = append(h.exact, e)
		default:
			return keyHosts{}, fieldErrorf(FieldKeyHosts, "key host %q: expected a host name, host:port, or *.domain (no scheme, path or spaces)", e)
		}
	}
	if len(h.exact) == 0 && len(h.suffixes) == 0 {
		h.pattern = pattern
	}
	return h, nil
}

// sharedSuffixes are domains under which the cloud serves its customers'
// content: a wildcard over them would trust a key anyone can publish.
var sharedSuffixes = []string{".amazonaws.com", ".amazonaws.com.cn", ".googleapis.com", ".cloudfront.net", ".appspot.com",
	".run.app", ".cloudfunctions.net", ".azurewebsites.net", ".blob.core.windows.net"}

// sharedSuffix tells whether a wildcard's suffix (".domain", lower case)
// is one of sharedSuffixes or a parent of one.
func sharedSuffix(suffix string) bool {
	for _, s := range sharedSuffixes {
		if s == suffix || strings.HasSuffix(s, suffix) {
			return true
		}
	}
	return false
}

// validHostPort tells whether s is a lower-case host name or IP address
// (IPv6 in brackets), followed by ":port" when port is allowed: what a
// URL's authority carries, with no scheme, user, path or wildcard.
func validHostPort(s string, port bool) bool {
	host := s
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.Atoi(p)
		if !port || err != nil || n < 1 || n > 65535 || strings.Contains(h, ":") != strings.HasPrefix(s, "[") {
			return false
		}
		host = h
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
		return strings.Contains(host, ":") && net.ParseIP(host) != nil
	}
	if strings.Contains(host, ":") {
		return net.ParseIP(host) != nil && host != s // a bare IPv6 needs brackets
	}
	return hostNameRE.MatchString(host) || net.ParseIP(host) != nil
}

// hostNameRE matches a lower-case DNS name: labels of letters, digits and
// inner hyphens.
var hostNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)

// allows tells whether u's host is on the list. Host names compare case
// insensitively; a pattern, plain host or wildcard entry allows the
// default port only.
func (h keyHosts) allows(u *url.URL) bool {
	host, name, port := strings.ToLower(u.Host), strings.ToLower(u.Hostname()), u.Port()
	defaultPort := port == "" || port == "443"
	if h.pattern != nil {
		return defaultPort && h.pattern.MatchString(name)
	}
	for _, e := range h.exact {
		if host == e || (defaultPort && name == e) {
			return true
		}
	}
	for _, s := range h.suffixes {
		if defaultPort && strings.HasSuffix(name, s) && len(name) > len(s) {
			return true
		}
	}
	return false
}

// keyClient fetches keys, and SNS confirmations, over HTTPS from the
// allow-listed hosts: redirects are not followed, and each fetch is bounded
// in time (keyFetchTimeout) and size (maxKeyBody). Immutable once built;
// safe for concurrent use.
type keyClient struct {
	hosts  keyHosts
	client *http.Client
}

// newKeyClient builds the client of a scheme whose own hosts are pattern:
// ProviderConfig.KeyHosts replaces them, and ProviderConfig.CAFile (PEM)
// replaces the system's roots. Its errors are FieldErrors.
func newKeyClient(cfg ProviderConfig, pattern *regexp.Regexp) (*keyClient, error) {
	hosts, err := parseKeyHosts(cfg.KeyHosts, pattern)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	var roots *x509.CertPool // nil: the system's
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		roots = x509.NewCertPool()
		switch {
		case err != nil:
			errs = append(errs, fieldErrorf(FieldCAFile, "CA file: %w", err))
		case !roots.AppendCertsFromPEM(pem):
			errs = append(errs, fieldErrorf(FieldCAFile, "CA file %s holds no PEM certificate", cfg.CAFile))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
	tr.MaxResponseHeaderBytes = maxKeyBody
	tr.MaxIdleConnsPerHost = 2
	return &keyClient{hosts: hosts, client: &http.Client{
		Transport: tr,
		Timeout:   keyFetchTimeout,
		// A redirect would leave the allow-list: answer with it as is,
		// which fetch then refuses as not 200.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}, nil
}

// allowedURL parses a URL the request names (field says which, for the
// message) and checks it before anything is fetched: https, no user info,
// an allow-listed host, and, when suffix is set, a path ending in it. Its
// refusal is a 401 with ReasonUntrustedKeyURL.
func (c *keyClient) allowedURL(field, raw, suffix string) (*url.URL, error) {
	if len(raw) > maxKeyURLLen {
		return nil, refusef(ReasonUntrustedKeyURL, "%w: %s longer than %d bytes", ErrUnauthorized, field, maxKeyURLLen)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		return nil, refusef(ReasonUntrustedKeyURL, "%w: %s is not an absolute URL", ErrUnauthorized, field)
	case u.Scheme != "https":
		return nil, refusef(ReasonUntrustedKeyURL, "%w: %s is not https", ErrUnauthorized, field)
	case u.User != nil:
		return nil, refusef(ReasonUntrustedKeyURL, "%w: %s carries user info", ErrUnauthorized, field)
	case !c.hosts.allows(u):
		host := u.Host
		if !printable(host, 255) {
			host = "(unprintable)"
		}
		return nil, refusef(ReasonUntrustedKeyURL, "%w: %s host %q is not on the key-host allow-list", ErrUnauthorized, field, host)
	case suffix != "" && !strings.HasSuffix(u.Path, suffix):
		return nil, refusef(ReasonUntrustedKeyURL, "%w: %s path does not end in %s", ErrUnauthorized, field, suffix)
	}
	return u, nil
}

// fetch GETs u, which allowedURL (or the scheme's own configuration) has
// approved, and returns the body of a 200 answer and its headers. Any
// other outcome is an error wrapping ErrUnavailable with
// ReasonKeyUnavailable: the request cannot be verified now, and the
// sender retries. Its messages name the host, never the whole URL (an SNS
// SubscribeURL carries a token).
func (c *keyClient) fetch(what string, u *url.URL) ([]byte, http.Header, error) {
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, nil, unavailable(what, u, err)
	}
	req.Header.Set("User-Agent", "whguard")
	resp, err := c.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		return nil, nil, unavailable(what, u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, unavailable(what, u, fmt.Errorf("answered HTTP %d", resp.StatusCode))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeyBody+1))
	if err != nil {
		return nil, nil, unavailable(what, u, err)
	}
	if len(body) > maxKeyBody {
		return nil, nil, unavailable(what, u, fmt.Errorf("answer longer than %d bytes", maxKeyBody))
	}
	return body, resp.Header, nil
}

// unavailable is the 503 refusal of a fetch of what from u's host.
func unavailable(what string, u *url.URL, cause error) error {
	return refusef(ReasonKeyUnavailable, "%w: %s from %s: %w", ErrUnavailable, what, u.Host, cause)
}
