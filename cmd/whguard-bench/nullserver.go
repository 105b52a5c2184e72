package main

import (
	"fmt"
	"io"
	"net/http"
	"time"
)

// runNullServer is the `__null-server ADDR` subcommand: the ceiling any
// receiver can reach on this machine. It reads the body and answers 202,
// nothing else.
func runNullServer(args []string) int {
	if len(args) != 1 {
		fmt.Println("usage: whguard-bench __null-server ADDR")
		return 2
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		w.WriteHeader(http.StatusAccepted)
	})
	return serveUntilSignal(&http.Server{Addr: args[0], Handler: mux, ReadHeaderTimeout: 10 * time.Second})
}
