package proxy

import (
	"cmp"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"strings"
	"time"

	"go.uber.org/zap"
)

// DefaultPassThroughIdle is how long pass-through traffic may stay idle
// in either direction (no byte from the client, none from the app) before
// it is cut: a reverse proxy's timeout (nginx's proxy_read_timeout is
// 60 s), with no bound on the whole exchange.
const DefaultPassThroughIdle = 2 * time.Minute

// PassThroughConfig configures the handler of the app's own traffic.
type PassThroughConfig struct {
	// Target is the app (WHGUARD_BACKEND_URL without its query).
	Target *url.URL
	// Logger receives the failures to reach the app; nil means none.
	Logger *zap.Logger
	// IdleTimeout bounds each wait for the client's next bytes, for the
	// app's answer and for the client to take the next bytes; 0 means
	// DefaultPassThroughIdle.
	IdleTimeout time.Duration
}

// NewPassThrough returns the handler for the app's own traffic when
// whguard stands in front of all of it: every request that is no
// provider's webhook goes to the app unchanged, streamed both ways, with
// the usual X-Forwarded-* headers (httputil.ReverseProxy). Nothing of it
// is verified or journaled: only the webhook paths get whguard's
// guarantees, and the ingress refuses any spelling of them before this
// handler is reached (Ingress.guards). A client cannot pose as a delivery:
// the X-Whguard-* and Idempotency-Key headers it sends are dropped. The
// ingress listener's total deadlines do not apply here (a download or an
// upload may stream for as long as bytes flow); IdleTimeout does. An app
// that does not answer gets 502.
func NewPassThrough(cfg PassThroughConfig) http.Handler {
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	idle := cmp.Or(cfg.IdleTimeout, DefaultPassThroughIdle)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil // the app is a neighbour
	transport.ResponseHeaderTimeout = idle
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(cfg.Target)
			r.SetXForwarded()
			r.Out.Host = r.In.Host // the app sees the Host its users used
			for name := range r.Out.Header {
				if isWhguardHeader(name) {
					delete(r.Out.Header, name)
				}
			}
		},
		Transport: transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("pass-through to the app failed", zap.String("path", boundedPath(r.URL.Path)), zap.Error(err))
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A protocol upgrade other than WebSocket (h2c above all) would
		// hand the client a connection to the app on which it could send
		// any request, to a webhook handler too: refused.
		if up := r.Header.Get("Upgrade"); up != "" && !strings.EqualFold(strings.TrimSpace(up), "websocket") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write(errorBody("only websocket upgrades are passed on"))
			return
		}
		r.Header.Del("Http2-Settings")
		rc := http.NewResponseController(w)
		// The listener's deadlines were set for the whole request; from
		// here each read and write sets its own, idle from now. Once the
		// body is read, the read deadline goes: the server keeps reading
		// the connection in the background (to see the client leave), and
		// a deadline there would end a long download.
		_ = rc.SetWriteDeadline(time.Time{})
		if r.Body != nil && r.Body != http.NoBody {
			_ = rc.SetReadDeadline(time.Now().Add(idle))
			r.Body = &idleReader{ReadCloser: r.Body, rc: rc, idle: idle}
		} else {
			_ = rc.SetReadDeadline(time.Time{})
		}
		rp.ServeHTTP(&idleWriter{ResponseWriter: w, rc: rc, idle: idle}, r)
	})
}

// isWhguardHeader reports the headers only a delivery from whguard may
// carry, and the spellings with underscores of those and of the
// X-Forwarded-* headers: servers that map header names to CGI variables
// (Rack, WSGI, PHP) read X_Whguard_Provider as X-Whguard-Provider.
func isWhguardHeader(name string) bool {
	if strings.IndexByte(name, '_') >= 0 {
		name = strings.ReplaceAll(name, "_", "-")
		if hasPrefixFold(name, "X-Forwarded-") || strings.EqualFold(name, "Forwarded") {
			return true
		}
	}
	return strings.EqualFold(name, "Idempotency-Key") || hasPrefixFold(name, "X-Whguard-")
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// idleReader moves the connection's read deadline before each read of the
// request body.
type idleReader struct {
	io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
}

func (r *idleReader) Read(p []byte) (int, error) {
	_ = r.rc.SetReadDeadline(time.Now().Add(r.idle))
	n, err := r.ReadCloser.Read(p)
	if err == io.EOF {
		_ = r.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// idleWriter moves the connection's write deadline before each write of
// the answer. It unwraps for http.ResponseController (flushes, and the
// hijack of a protocol upgrade).
type idleWriter struct {
	http.ResponseWriter
	rc   *http.ResponseController
	idle time.Duration
}

func (w *idleWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.idle))
	return w.ResponseWriter.Write(p)
}

func (w *idleWriter) Flush() {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.idle))
	_ = w.rc.Flush()
}

func (w *idleWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// maxUnescape bounds how many times a path is percent-decoded: once by
// the framework, and once more by a gateway or a framework that decodes
// twice.
const maxUnescape = 3

// normalizePath folds a request path the way forgiving routers do, so that
// every spelling of one route gives one string: percent-escapes decoded
// (%2F included, up to maxUnescape times), backslashes read as slashes,
// ;matrix parameters dropped, repeated slashes collapsed, . and ..
// resolved, a trailing slash ignored, letters lower-cased.
func normalizePath(escaped string) string {
	p := escaped
	for range maxUnescape {
		u := unescapeLenient(p)
		if u == p {
			break
		}
		p = u
	}
	p = strings.ReplaceAll(p, `\`, "/")
	if strings.IndexByte(p, ';') >= 0 {
		segs := strings.Split(p, "/")
		for i, s := range segs {
			segs[i], _, _ = strings.Cut(s, ";")
		}
		p = strings.Join(segs, "/")
	}
	return strings.ToLower(path.Clean("/" + p))
}

// unescapeLenient decodes every valid %XX escape of s and keeps an invalid
// one as it is (url.PathUnescape refuses the whole string, which left the
// valid escapes beside a bad one undecoded: /webhooks/%73tripe;%).
func unescapeLenient(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// guardSet is the normalized spellings of the paths where an app's
// webhook handlers may live: every provider's path and FORWARD_PATH. With
// pass-through, a request to any of them is refused rather than passed on
// unverified.
type guardSet map[string]bool

func newGuardSet(routes []Route) guardSet {
	g := guardSet{}
	for _, r := range routes {
		for _, p := range append([]string{r.Path, r.ForwardPath}, r.AppPaths...) {
			if p != "" {
				g[normalizePath(p)] = true
			}
		}
	}
	return g
}

// covers reports whether a request to the escaped path could reach a
// webhook handler of the app: its normalized form is a guarded path, with
// or without a format suffix (/webhooks/x.json routes to /webhooks/x in
// Rails, and did in Spring).
func (g guardSet) covers(escaped string) bool {
	n := normalizePath(escaped)
	if g[n] {
		return true
	}
	ext := path.Ext(n)
	return ext != "" && g[n[:len(n)-len(ext)]]
}
