package postgres

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines, except one of pgx's: when a
// connection is cut under a query whose context then ends (TestServerOutage
// cuts the guard's connections), pgconn's context watcher waits for an
// Unwatch the dead connection never sends. One goroutine per query in
// flight at a cut, in the driver, not the guard's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgconn/ctxwatch.(*ContextWatcher).Watch.func1"))
}
