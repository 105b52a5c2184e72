package admin_test

import (
	"os"
	"testing"

	"github.com/whguard/whguard/internal/testdb"
	"github.com/whguard/whguard/journal"
)

var dbURL string

func TestMain(m *testing.M) { os.Exit(testdb.Main(m, "admin", &dbURL)) }

var forEachStore = testdb.ForEachStoreParallel

// fixture is a migrated journal of the test's own.
type fixture struct {
	j journal.Store
}

func newFixture(t *testing.T, store string) *fixture {
	t.Helper()
	return &fixture{j: testdb.OpenStore(t, store, true)}
}
