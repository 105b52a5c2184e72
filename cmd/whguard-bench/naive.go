package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// naivePoolConns is the naive receiver's connection pool size.
const naivePoolConns = 32

// naiveTolerance is the accepted timestamp age, as whguard's default.
const naiveTolerance = 5 * time.Minute

// naiveSchema is the naive receiver's one table.
const naiveSchema = `CREATE TABLE IF NOT EXISTS naive_events (
	id          bigserial   PRIMARY KEY,
	provider    text        NOT NULL,
	event_id    text        NOT NULL,
	body        bytea       NOT NULL,
	received_at timestamptz NOT NULL DEFAULT now(),
	UNIQUE (provider, event_id))`

// naiveReceiver is what a team would write by hand: verify the Standard
// Webhooks signature, then commit one row per request and answer.
type naiveReceiver struct {
	pool *pgxpool.Pool
	key  []byte
}

// runNaiveReceiver is the `__naive-receiver ADDR DBURL` subcommand; the
// whsec_ secret comes in the environment (WHBENCH_SECRET), not on the
// command line.
func runNaiveReceiver(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: WHBENCH_SECRET=whsec_… whguard-bench __naive-receiver ADDR DBURL")
		return 2
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(os.Getenv("WHBENCH_SECRET"), "whsec_"))
	if err != nil || len(key) == 0 {
		fmt.Fprintln(os.Stderr, "naive receiver: WHBENCH_SECRET is not a whsec_ secret")
		return 2
	}
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "naive receiver:", err)
		return 2
	}
	cfg.MaxConns = naivePoolConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "naive receiver:", err)
		return 1
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, naiveSchema); err != nil {
		fmt.Fprintln(os.Stderr, "naive receiver: create table:", err)
		return 1
	}
	n := &naiveReceiver{pool: pool, key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.Handle("POST /", n)
	return serveUntilSignal(&http.Server{Addr: args[0], Handler: mux, ReadHeaderTimeout: 10 * time.Second})
}

// ServeHTTP reads, verifies, inserts and answers 202 (new) or 200
// (duplicate).
func (n *naiveReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
	if err != nil {
		http.Error(w, "read error", http.StatusBadRequest)
		return
	}
	if len(body) > 1<<20 {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
		return
	}
	id := r.Header.Get("Webhook-Id")
	if !n.verify(id, r.Header.Get("Webhook-Timestamp"), r.Header.Get("Webhook-Signature"), body) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	tag, err := n.pool.Exec(r.Context(),
		`INSERT INTO naive_events (provider, event_id, body) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		"bench", id, body)
	switch {
	case err != nil:
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	case tag.RowsAffected() == 1:
		w.WriteHeader(http.StatusAccepted)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// verify checks the timestamp and any v1 signature of the header.
func (n *naiveReceiver) verify(id, ts, sigHeader string, body []byte) bool {
	unix, err := strconv.ParseInt(ts, 10, 64)
	if id == "" || err != nil {
		return false
	}
	if age := time.Since(time.Unix(unix, 0)); age > naiveTolerance || age < -naiveTolerance {
		return false
	}
	mac := hmac.New(sha256.New, n.key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range strings.Fields(sigHeader) {
		if v, ok := strings.CutPrefix(s, "v1,"); ok {
			if got, err := base64.StdEncoding.DecodeString(v); err == nil && hmac.Equal(got, want) {
				return true
			}
		}
	}
	return false
}
