package main

import (
	"context"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/whguard/whguard/internal/testdb"
)

// Machine describes where a report was measured.
type Machine struct {
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpu_model"`
	MemoryMB int64  `json:"memory_mb"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
	Postgres string `json:"postgres"`
	// PostgresSettings are the server settings that move these numbers.
	PostgresSettings string `json:"postgres_settings"`
}

// readMachine collects the machine description; what cannot be read stays
// empty.
func readMachine(ctx context.Context) Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		var kb int64
		for _, f := range strings.Fields(line) {
			if n, ok := parseInt(f); ok {
				kb = n
			}
		}
		m.MemoryMB = kb / 1024
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testdb.ServerURL())
	if err != nil {
		m.Postgres = "unreachable: " + err.Error()
		return m
	}
	defer conn.Close(ctx)
	_ = conn.QueryRow(ctx, "SHOW server_version").Scan(&m.Postgres)
	var settings []string
	for _, name := range []string{"synchronous_commit", "fsync", "wal_sync_method", "shared_buffers", "max_connections"} {
		var v string
		if conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v) == nil {
			settings = append(settings, name+"="+v)
		}
	}
	m.PostgresSettings = strings.Join(settings, " ")
	return m
}

// parseInt parses a non-negative decimal integer.
func parseInt(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
