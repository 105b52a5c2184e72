package journal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestConnectionFailed(t *testing.T) {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}
	cases := []struct {
		name      string
		err       error
		hot, cold bool // on a hot pool (timeouts fail), on the general pool
	}{
		{"none", nil, false, false},
		{"caller cancelled", fmt.Errorf("append: %w", context.Canceled), false, false},
		{"deadline", fmt.Errorf("append: %w", context.DeadlineExceeded), true, false},
		{"socket timeout", timeout, true, false},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, true, true},
		{"EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true, true},
		{"closed connection", fmt.Errorf("query: %w", pgconn.ErrConnClosed), true, true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true, true},
		{"connection exception", &pgconn.PgError{Code: "08006"}, true, true},
		{"read-only: a standby", &pgconn.PgError{Code: "25006"}, true, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false, false},
		{"data error", &pgconn.PgError{Code: "22021"}, false, false},
		{"statement timeout (server)", &pgconn.PgError{Code: "57014"}, false, false},
	}
	for _, c := range cases {
		if got := connectionFailed(c.err, true); got != c.hot {
			t.Errorf("%s on a hot pool: %v, want %v", c.name, got, c.hot)
		}
		if got := connectionFailed(c.err, false); got != c.cold {
			t.Errorf("%s on the general pool: %v, want %v", c.name, got, c.cold)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }
