package journal

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// isUndefinedTable reports a PostgreSQL "relation does not exist" error.
func isUndefinedTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42P01"
}
