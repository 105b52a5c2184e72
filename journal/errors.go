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

// isDataError reports a PostgreSQL data exception (SQLSTATE class 22: a
// value the database refuses, such as an invalid byte sequence).
func isDataError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && len(pgErr.Code) == 5 && pgErr.Code[:2] == "22"
}
