package journal

import (
	"crypto/sha256"
	"database/sql/driver"
	"encoding/hex"
	"fmt"

	"modernc.org/sqlite"
)

// SQLite has no SHA-256 of its own; the embedded store's migrations call
// this one (registered with the driver, for every connection it opens).
func init() {
	sqlite.MustRegisterDeterministicScalarFunction("whguard_sha256_hex", 1,
		func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			var b []byte
			switch v := args[0].(type) {
			case nil:
				return nil, nil
			case string:
				b = []byte(v)
			case []byte:
				b = v
			default:
				b = fmt.Append(nil, v)
			}
			sum := sha256.Sum256(b)
			return hex.EncodeToString(sum[:]), nil
		})
}
