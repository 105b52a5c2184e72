package proxy

import (
	"net"
	"net/http"
	"strings"
)

// withForwarded returns a copy of the request's headers with what a good
// reverse proxy tells the backend about the original request: the client
// in X-Forwarded-For (appended to a value set by a proxy in front of
// whguard), the host and scheme the sender used in X-Forwarded-Host and
// X-Forwarded-Proto (kept when a proxy in front already set them), and the
// same in Forwarded (RFC 7239). They are journaled with the event, so
// every attempt and replay carries them. Frameworks that redirect to HTTPS
// or check allowed hosts (Rails force_ssl, Django ALLOWED_HOSTS) read them.
// was holds what each header it set was when received (an empty list:
// absent), journaled beside them (journal.Event.AsReceived), so the event
// still shows its headers exactly as received.
func withForwarded(r *http.Request) (h, was http.Header) {
	// One map sized for the four headers added, and one backing array for
	// every value, those four included: a Clone followed by four Sets grew
	// the map and allocated a slice per Set on every webhook.
	const added = 4
	nv := added
	for _, vs := range r.Header {
		nv += len(vs)
	}
	sv := make([]string, nv)
	h = make(http.Header, len(r.Header)+added)
	for k, vs := range r.Header {
		n := copy(sv, vs)
		h[k] = sv[:n:n]
		sv = sv[n:]
	}
	// set replaces a header's values with v; name is canonical.
	set := func(name, v string) {
		sv[0] = v
		h[name] = sv[:1:1]
		sv = sv[1:]
	}
	client, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		client = r.RemoteAddr
	}
	prior := [4][]string{h["X-Forwarded-For"], h["Forwarded"], h["X-Forwarded-Proto"], h["X-Forwarded-Host"]}
	if prior := h.Values("X-Forwarded-For"); len(prior) > 0 {
		set("X-Forwarded-For", strings.Join(prior, ", ")+", "+client)
	} else {
		set("X-Forwarded-For", client)
	}
	proto := h.Get("X-Forwarded-Proto")
	setProto, setHost := proto == "", h.Get("X-Forwarded-Host") == ""
	if proto == "" {
		proto = "http"
		if r.TLS != nil {
			proto = "https"
		}
		set("X-Forwarded-Proto", proto)
	}
	host := h.Get("X-Forwarded-Host")
	if host == "" {
		host = r.Host
		set("X-Forwarded-Host", host)
	}
	elem := "for=" + forwardedNode(client) + ";host=" + quoteForwarded(host) + ";proto=" + quoteForwarded(proto)
	if prior := h.Values("Forwarded"); len(prior) > 0 {
		elem = strings.Join(prior, ", ") + ", " + elem
	}
	set("Forwarded", elem)
	return h, receivedAs(prior, setProto, setHost)
}

// noneReceived is withForwarded's was when none of the headers it sets
// came with the request (no proxy in front): shared, never modified.
var noneReceived = http.Header{"X-Forwarded-For": {}, "X-Forwarded-Proto": {}, "X-Forwarded-Host": {}, "Forwarded": {}}

// receivedAs is what the headers withForwarded set were when received
// (prior: X-Forwarded-For, Forwarded, X-Forwarded-Proto, X-Forwarded-Host,
// nil when absent): the first two are always set, the others when they
// were empty.
func receivedAs(prior [4][]string, setProto, setHost bool) http.Header {
	if prior[0] == nil && prior[1] == nil && prior[2] == nil && prior[3] == nil && setProto && setHost {
		return noneReceived
	}
	was := http.Header{"X-Forwarded-For": orNone(prior[0]), "Forwarded": orNone(prior[1])}
	if setProto {
		was["X-Forwarded-Proto"] = orNone(prior[2])
	}
	if setHost {
		was["X-Forwarded-Host"] = orNone(prior[3])
	}
	return was
}

// orNone is vs, or an empty list (absent) for nil.
func orNone(vs []string) []string {
	if vs == nil {
		return []string{}
	}
	return vs
}

// forwardedNode formats a client address as a Forwarded node: IPv6
// addresses in brackets and quotes (RFC 7239, section 6).
func forwardedNode(ip string) string {
	if strings.Contains(ip, ":") {
		return `"[` + ip + `]"`
	}
	return quoteForwarded(ip)
}

// forwardedEscaper escapes a quoted-string's backslashes and quotes (built
// once: a Replacer builds its tables on first use).
var forwardedEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// quoteForwarded quotes a value unless it is a plain token.
func quoteForwarded(v string) string {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return `"` + forwardedEscaper.Replace(v) + `"`
		}
	}
	return v
}
