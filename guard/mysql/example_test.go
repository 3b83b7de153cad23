package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	"github.com/moirai-go/moirai/guard"
	"github.com/moirai-go/moirai/guard/mysql"
)

func str(s string) sql.NullString { return sql.NullString{String: s, Valid: true} }
func num(n int64) sql.NullInt64   { return sql.NullInt64{Int64: n, Valid: true} }

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// The guard for a MariaDB server (guard.Open picks it for mysql:// and
// mariadb:// DSNs). Not run here: it needs a server.
func ExampleSource() {
	ctx := context.Background()
	src, err := mysql.Open(ctx, "mysql://guard@tcp(127.0.0.1:3306)/")
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	g, err := guard.New(src, guard.Options{DryRun: true})
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(g.Run(ctx))
}

// A PROCESSLIST row becomes a session; rows with NULLs where a value must
// be, or unknown commands, are skipped (and counted by the poller).
func ExampleProcRow() {
	r := mysql.ProcRow{ID: num(42), User: str("app"), Host: str("10.0.0.7:5123"), Command: str("Query"),
		TimeMS: sql.NullFloat64{Float64: 2500, Valid: true}, State: str("Sending data"), Info: str("SELECT * FROM t FOR UPDATE"), QueryID: num(9001)}
	s, ok := mysql.ParseSession(r, now)
	fmt.Println(ok, s.ID, s.Statement, s.Active, s.QueryStart.Equal(now.Add(-2500*time.Millisecond)))
	_, ok = mysql.ParseSession(mysql.ProcRow{}, now)
	fmt.Println(ok)
	// Output:
	// true 42 9001 true true
	// false
}

// An INNODB_TRX row says which thread runs which transaction, since when,
// and whether it waits for a lock.
func ExampleTrxRow() {
	t, ok := mysql.ParseTrx(mysql.TrxRow{ID: str("1234"), Thread: num(42), Started: sql.NullTime{Time: now, Valid: true}, State: str("LOCK WAIT"),
		WaitStarted: sql.NullTime{Time: now.Add(time.Second), Valid: true}})
	fmt.Println(ok, t.Thread, t.State, t.WaitStarted.Sub(t.Started))
	// Output: true 42 LOCK WAIT 1s
}

// Trx is a parsed INNODB_TRX row.
func ExampleTrx() {
	_, ok := mysql.ParseTrx(mysql.TrxRow{ID: str("1"), Thread: num(7), Started: sql.NullTime{Time: now, Valid: true}, State: str("DANCING")})
	fmt.Println(ok) // an unknown state is skipped
	// Output: false
}

// An INNODB_LOCK_WAITS row, joined with the waited-for lock, names the
// blocking transaction directly.
func ExampleWaitRow() {
	w, ok := mysql.ParseWait(mysql.WaitRow{Requesting: str("1235"), Blocking: str("1234"), LockID: str("1234:15:4:2"),
		Mode: str("X"), Type: str("RECORD"), Table: str("`test`.`orders`")})
	fmt.Println(ok, w.Requesting, "waits for", w.Blocking, "on", w.Resource)
	// Output: true 1235 waits for 1234 on row:test.orders/15:4:2
}

// Wait is a parsed lock wait; a lock id that is not the server's shape is
// refused.
func ExampleWait() {
	_, ok := mysql.ParseWait(mysql.WaitRow{Requesting: str("1"), Blocking: str("2"), LockID: str("x:y"), Type: str("TABLE"), Table: str("t")})
	fmt.Println(ok)
	// Output: false
}

// A metadata lock (METADATA_LOCK_INFO or performance_schema) of a session
// on a table; Build attributes the queues behind a waiting DDL or FTWRL to
// the session that holds the lock.
func ExampleMDL() {
	m, ok := mysql.ParseMDL(num(42), str("MDL_SHARED_READ"), str("test"), str("orders"))
	fmt.Println(ok, m.Session, m.Mode, m.Table)
	// Output: true 42 MDL_SHARED_READ test.orders
}
