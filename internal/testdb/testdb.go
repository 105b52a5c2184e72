// Package testdb gives tests fresh journals on real servers: TestMain
// calls Main, which creates the package's empty PostgreSQL database, runs
// the tests and drops it; a test calls OpenStore (or Create, or
// CreateMigrated) for a database or file of its own.
//
// The server is TEST_DATABASE_URL (set by `make test`), else the local one
// at postgres://postgres@127.0.0.1:5432/postgres.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultURL is used when TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// ServerURL is the maintenance connection string of the test server.
func ServerURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Create makes a new empty database named after prefix and returns its URL
// and a function that drops it.
func Create(ctx context.Context, prefix string) (dbURL string, drop func(), err error) {
	return createFrom(ctx, prefix, "template0")
}

// CreateMigrated is Create with the journal's migrations already applied:
// the database is a copy of a migrated template (template.go), which is
// much cheaper than migrating each test's database.
func CreateMigrated(ctx context.Context, prefix string) (dbURL string, drop func(), err error) {
	tpl, err := migratedTemplate()
	if err != nil {
		return "", nil, err
	}
	return createFrom(ctx, prefix, tpl)
}

func createFrom(ctx context.Context, prefix, template string) (dbURL string, drop func(), err error) {
	base := ServerURL()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, fmt.Errorf("connect to test server (is PostgreSQL running? use `make test`): %w", err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := fmt.Sprintf("whguard_test_%s_%s", prefix, hex.EncodeToString(b[:]))
	u, err := databaseURL(name)
	if err != nil {
		return "", nil, err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident(name)+" TEMPLATE "+ident(template)); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testdb: drop %s: %v\n", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "testdb: drop %s: %v\n", name, err)
		}
	}
	return u, drop, nil
}

// databaseURL is the test server's URL naming another database.
func databaseURL(name string) (string, error) {
	u, err := url.Parse(ServerURL())
	if err != nil {
		return "", fmt.Errorf("parse test server URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// Main creates the package's database, stores its URL in *dbURL, runs the
// tests and drops the database. Use it as
//
//	func TestMain(m *testing.M) { os.Exit(testdb.Main(m, "journal", &dbURL)) }
func Main(m *testing.M, prefix string, dbURL *string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	u, drop, err := Create(ctx, prefix)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testdb:", err)
		return 1
	}
	defer drop()
	*dbURL = u
	return m.Run()
}
