package proxy

import (
	"net/http"
	"net/http/httputil"
	"net/url"

	"go.uber.org/zap"
)

// NewPassThrough returns the handler for the app's own traffic when
// whguard stands in front of all of it: every request that is no
// provider's webhook goes to target unchanged, streamed both ways, with
// the usual X-Forwarded-* headers (httputil.ReverseProxy). Nothing of it
// is verified or journaled: only the webhook paths get whguard's
// guarantees. A target that does not answer gets 502.
func NewPassThrough(target *url.URL, log *zap.Logger) http.Handler {
	if log == nil {
		log = zap.NewNop()
	}
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.SetXForwarded()
			r.Out.Host = r.In.Host // the app sees the Host its users used
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("pass-through to the app failed", zap.String("path", boundedPath(r.URL.Path)), zap.Error(err))
			w.WriteHeader(http.StatusBadGateway)
		},
	}
}
