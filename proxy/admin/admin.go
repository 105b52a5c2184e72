// Package admin is whguard's admin listener: health, readiness and
// metrics for probes and scrapers, the bearer-protected API for
// inspecting, searching, replaying and pausing, the web inspector page, and
// the profiler (docs/inspecting.md, docs/operations.md). It reads the
// journal and controls the forwarder through small interfaces it declares.
package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/whguard/whguard/journal"
)

//go:embed inspector/index.html
var inspectorPage []byte

// AdminConfig configures the admin listener's handler.
type AdminConfig struct {
	// Ready reports whether the journal answers and is migrated.
	Ready func(ctx context.Context) error
	// Gatherer serves /metrics.
	Gatherer prometheus.Gatherer
	// Token is WHGUARD_ADMIN_TOKEN; empty keeps /api/ closed.
	Token string
	// API serves /api/ behind the bearer token; nil answers 404 there.
	API http.Handler
	// Logger receives the admin logs; nil means none.
	Logger *zap.Logger
	// AllowedHosts lists the Host names (without port) the admin listener
	// answers besides the loopback ones (WHGUARD_ADMIN_HOSTS). Others get
	// 421: a page of another origin cannot reach the admin API through a
	// name that resolves to it (DNS rebinding), and a listener bound wider
	// than intended answers nothing to the network.
	AllowedHosts []string
}

// NewAdmin builds the admin handler: /healthz, /readyz and /metrics open,
// everything else behind `Authorization: Bearer <token>`, and all of it
// only for a loopback Host or one of AllowedHosts.
func NewAdmin(cfg AdminConfig) http.Handler {
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	mux := http.NewServeMux()
	probeRoutes(mux, cfg.Ready, cfg.Gatherer, log)
	// The inspector page is static and holds no data: it asks for the token
	// and calls /api/ with it, so serving it openly reveals nothing.
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/inspect", http.StatusFound)
	})
	mux.HandleFunc("GET /inspect", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Referrer-Policy", "no-referrer")
		_, _ = w.Write(inspectorPage)
	})

	api := cfg.API
	if api == nil {
		api = http.NotFoundHandler()
	}
	// Go's profiler, for performance work on a live sidecar; behind the
	// token like the API (profiles reveal code paths, not payloads).
	prof := http.NewServeMux()
	prof.HandleFunc("/debug/pprof/", pprof.Index)
	prof.HandleFunc("/debug/pprof/profile", pprof.Profile)
	prof.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/debug/pprof/", requireBearer(cfg.Token, prof))
	mux.Handle("/", requireBearer(cfg.Token, api))
	return requireHost(cfg.AllowedHosts, mux)
}

// NewProbes serves /metrics, /healthz and /readyz alone, for scrapers and
// orchestrator probes on a listener of their own (WHGUARD_METRICS_LISTEN),
// whatever their Host.
func NewProbes(ready func(ctx context.Context) error, gatherer prometheus.Gatherer, log *zap.Logger) http.Handler {
	if log == nil {
		log = zap.NewNop()
	}
	mux := http.NewServeMux()
	probeRoutes(mux, ready, gatherer, log)
	return mux
}

// ErrStarting is a readiness error: the process is still starting (its
// deliveries have not begun).
var ErrStarting = errors.New("starting: deliveries have not begun")

// probeRoutes adds the open routes: liveness, readiness, metrics.
func probeRoutes(mux *http.ServeMux, ready func(ctx context.Context) error, gatherer prometheus.Gatherer, log *zap.Logger) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := ready(ctx); err != nil {
			msg := "journal unreachable"
			switch {
			case errors.Is(err, journal.ErrNotMigrated):
				msg = "journal not migrated: run `whguard migrate`"
			case errors.Is(err, ErrStarting):
				msg = "starting"
			}
			log.Warn("not ready", zap.Error(err))
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": msg})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
}

// requireHost answers 421 Misdirected Request unless the request's Host is
// a loopback name or address, or one of allowed.
func requireHost(allowed []string, next http.Handler) http.Handler {
	ok := map[string]bool{}
	for _, h := range allowed {
		ok[strings.ToLower(strings.TrimSpace(h))] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
		if !isLoopbackHost(host) && !ok[host] {
			writeJSON(w, http.StatusMisdirectedRequest, map[string]string{
				"error": "the admin listener answers loopback hosts and WHGUARD_ADMIN_HOSTS only"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isLoopbackHost reports localhost names and loopback addresses.
func isLoopbackHost(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// requireBearer answers 401 unless the request carries the token. With no
// token configured every request is refused: the API stays closed.
func requireBearer(token string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The scheme name is case-insensitive (RFC 9110 11.1).
		auth := r.Header.Get("Authorization")
		got, ok := "", len(auth) > 7 && strings.EqualFold(auth[:7], "Bearer ")
		if ok {
			got = auth[7:]
		}
		// Compare digests so the comparison time does not depend on length.
		gotSum := sha256.Sum256([]byte(got))
		if token == "" || !ok || subtle.ConstantTimeCompare(gotSum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="whguard"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized"})
			return
		}
		next.ServeHTTP(w, r)
	})
}
