package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Hidden subcommands: the bench re-executes itself to run the null server
// and the naive receiver as separate processes, so their peak RSS and CPU
// can be read from /proc apart from the load generator's.
const (
	cmdNullServer     = "__null-server"
	cmdNaiveReceiver  = "__naive-receiver"
	secretEnvVariable = "WHBENCH_SECRET"
	// cmdSearch runs only the search measurement of the long runs:
	// whguard-bench search [-rows N].
	cmdSearch = "search"
)

// runSubcommand runs a hidden subcommand if args names one.
func runSubcommand(args []string) (status int, ok bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch args[0] {
	case cmdNullServer:
		return runNullServer(args[1:]), true
	case cmdNaiveReceiver:
		return runNaiveReceiver(args[1:]), true
	case cmdSearch:
		return runSearchOnly(args[1:]), true
	}
	return 0, false
}

// serveUntilSignal serves srv until SIGTERM or SIGINT, then shuts it down.
func serveUntilSignal(srv *http.Server) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	errs := make(chan error, 1)
	go func() { errs <- srv.ListenAndServe() }()
	select {
	case err := <-errs:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "serve:", err)
			return 1
		}
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return 0
}
