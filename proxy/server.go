package proxy

import (
	"net/http"
	"time"

	"go.uber.org/zap"
)

// NewServer wraps a handler in an http.Server with every timeout set, so a
// slow or idle client cannot hold a connection open forever.
func NewServer(addr string, h http.Handler, log *zap.Logger) *http.Server {
	var errLog *zap.Logger
	if log != nil {
		errLog = log
	} else {
		errLog = zap.NewNop()
	}
	stdLog, _ := zap.NewStdLogAt(errLog, zap.WarnLevel)
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          stdLog,
	}
}
