package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/moirai-go/moirai/guard"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func dsn() string {
	if d := os.Getenv("MOIRAI_TEST_MARIADB"); d != "" {
		return d
	}
	return "mysql://root:@tcp(127.0.0.1:3306)/test"
}

// server opens the source and a helper pool, or skips when no MariaDB is
// reachable (outside CI: under CI a missing server fails the test).
func server(t *testing.T) (*Source, *sql.DB, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	src, err := Open(ctx, dsn())
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("MariaDB unreachable under CI: %v", err)
		}
		t.Skipf("no MariaDB server at %s (set MOIRAI_TEST_MARIADB, or start one): %v", dsn(), err)
	}
	t.Cleanup(func() { src.Close() })
	cfg, _ := ParseDSN(dsn())
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return src, db, ctx
}

// session is one client connection running statements in the background.
type session struct {
	conn *sql.Conn
	id   int64
	wg   sync.WaitGroup
}

func newSession(t *testing.T, ctx context.Context, db *sql.DB) *session {
	t.Helper()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := &session{conn: c}
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&s.id); err != nil {
		t.Fatal(err)
	}
	c.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 50, lock_wait_timeout = 50")
	t.Cleanup(func() {
		db.ExecContext(context.Background(), fmt.Sprintf("KILL CONNECTION %d", s.id))
		s.wg.Wait()
		c.Close()
	})
	return s
}

func (s *session) exec(t *testing.T, ctx context.Context, q string) {
	t.Helper()
	if _, err := s.conn.ExecContext(ctx, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// background runs q without waiting for it; its error is returned on the channel.
func (s *session) background(ctx context.Context, q string) <-chan error {
	ch := make(chan error, 1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_, err := s.conn.ExecContext(ctx, q)
		ch <- err
	}()
	return ch
}

// until polls until ok accepts an observation (bounded by ctx).
func until(t *testing.T, ctx context.Context, src *Source, what string, ok func(*guard.Observation) bool) *guard.Observation {
	t.Helper()
	for {
		obs, err := src.Poll(ctx)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if ok(obs) {
			return obs
		}
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-time.After(150 * time.Millisecond): // INNODB_TRX caches for 0.1 s after each read
		}
	}
}

func waitUse(obs *guard.Observation, id int64) (guard.Use, bool) {
	for _, u := range obs.Uses {
		if u.Session == id && u.Waiting {
			return u, true
		}
	}
	return guard.Use{}, false
}

func table(t *testing.T, ctx context.Context, db *sql.DB, name string) {
	t.Helper()
	for _, q := range []string{"DROP TABLE IF EXISTS " + name, "CREATE TABLE " + name + " (id INT PRIMARY KEY, v INT) ENGINE=InnoDB", "INSERT INTO " + name + " VALUES (1,0),(2,0),(3,0)"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+name) })
}

func TestCheck(t *testing.T) {
	src, _, ctx := server(t)
	info, err := src.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Features) == 0 || !info.Superuser {
		t.Errorf("info %+v: want features and root as superuser", info)
	}
	obs, err := src.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(obs.Skipped) != 0 || len(obs.Sessions) == 0 || obs.At.IsZero() {
		t.Errorf("poll of an idle server: skipped %v, %d sessions, at %v", obs.Skipped, len(obs.Sessions), obs.At)
	}
	own := 0
	for _, s := range obs.Sessions {
		if s.Own {
			own++
		}
	}
	if own != 1 {
		t.Errorf("%d own sessions, want the poll's", own)
	}
	names := map[string]bool{}
	for _, r := range obs.Resources {
		names[r.Name] = true
	}
	if !names["buffer-pool"] || !names["connection-slots"] {
		t.Errorf("resources %v: want buffer-pool and connection-slots", names)
	}
}

func TestRowLockWaiters(t *testing.T) {
	src, db, ctx := server(t)
	table(t, ctx, db, "gm_rows")
	a, b, c := newSession(t, ctx, db), newSession(t, ctx, db), newSession(t, ctx, db)
	a.exec(t, ctx, "BEGIN")
	a.exec(t, ctx, "SELECT * FROM gm_rows WHERE id = 1 FOR UPDATE")
	b.exec(t, ctx, "BEGIN")
	b.background(ctx, "SELECT * FROM gm_rows WHERE id = 1 FOR UPDATE")
	c.exec(t, ctx, "BEGIN")
	c.background(ctx, "SELECT * FROM gm_rows WHERE id = 1 FOR UPDATE")
	obs := until(t, ctx, src, "two row-lock waiters", func(o *guard.Observation) bool {
		_, okb := waitUse(o, b.id)
		_, okc := waitUse(o, c.id)
		return okb && okc
	})
	for _, id := range []int64{b.id, c.id} {
		u, _ := waitUse(obs, id)
		if !slices.Equal(u.BlockedBy, []int64{a.id}) || !strings.HasPrefix(u.Resource, "row:test.gm_rows/") || u.Soft {
			t.Errorf("waiter %d: %+v, want blocked by the holder %d on a row of test.gm_rows", id, u, a.id)
		}
	}
	for _, s := range obs.Sessions {
		if s.ID == a.id && !s.IdleInTransaction {
			t.Errorf("holder %+v not idle in transaction", s)
		}
	}
}

// Two transactions that only took a shared lock on a row show in
// INNODB_TRX without an id (trx_id 0), and so does every wait row on
// them: their waiters are blamed on both, never on one another nor on
// an arbitrary id-less transaction (with the metadata lock view, the
// candidates are those holding the table: exactly the two).
func TestSharedHoldersWithoutTrxID(t *testing.T) {
	src, db, ctx := server(t)
	table(t, ctx, db, "gm_shared")
	a, b, c, d := newSession(t, ctx, db), newSession(t, ctx, db), newSession(t, ctx, db), newSession(t, ctx, db)
	for _, h := range []*session{a, b} {
		h.exec(t, ctx, "BEGIN")
		h.exec(t, ctx, "SELECT * FROM gm_shared WHERE id = 1 LOCK IN SHARE MODE")
	}
	c.background(ctx, "UPDATE gm_shared SET v = v + 1 WHERE id = 1")
	d.background(ctx, "UPDATE gm_shared SET v = v + 1 WHERE id = 1")
	// Check finds the metadata lock view, as the guard's start does:
	// with it, id-less transactions of other clients of a shared server
	// (on other tables) are no candidates.
	info, err := src.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	view := !slices.ContainsFunc(info.Features, func(f string) bool { return strings.Contains(f, "metadata_locks: unavailable") })
	obs := until(t, ctx, src, "two waiters on the shared row", func(o *guard.Observation) bool {
		_, okc := waitUse(o, c.id)
		_, okd := waitUse(o, d.id)
		return okc && okd
	})
	for _, id := range []int64{c.id, d.id} {
		u, _ := waitUse(obs, id)
		for _, r := range u.BlockedBy {
			if r != a.id && r != b.id {
				t.Errorf("waiter %d blamed on %d, not a holder (%d, %d): %+v", id, r, a.id, b.id, u)
			}
		}
		if view && (len(u.BlockedBy) != 2 || !u.Inferred) {
			t.Errorf("waiter %d: %+v, want blocked by both holders %d and %d, inferred", id, u, a.id, b.id)
		}
	}
}

// Locking reads waiting behind a writer have no transaction id either
// (requesting_trx_id 0 in every one of their wait rows): all on one row,
// each is blamed on the writer.
func TestSharedWaitersWithoutTrxID(t *testing.T) {
	src, db, ctx := server(t)
	table(t, ctx, db, "gm_sharedw")
	a, b, c := newSession(t, ctx, db), newSession(t, ctx, db), newSession(t, ctx, db)
	a.exec(t, ctx, "BEGIN")
	a.exec(t, ctx, "UPDATE gm_sharedw SET v = v + 1 WHERE id = 1")
	for _, w := range []*session{b, c} {
		w.exec(t, ctx, "BEGIN")
		w.background(ctx, "SELECT * FROM gm_sharedw WHERE id = 1 LOCK IN SHARE MODE")
	}
	obs := until(t, ctx, src, "two locking reads waiting", func(o *guard.Observation) bool {
		_, okb := waitUse(o, b.id)
		_, okc := waitUse(o, c.id)
		return okb && okc
	})
	for _, id := range []int64{b.id, c.id} {
		if u, _ := waitUse(obs, id); !slices.Equal(u.BlockedBy, []int64{a.id}) {
			t.Errorf("waiter %d: %+v, want blocked by the writer %d", id, u, a.id)
		}
	}
}

func TestFTWRLRootHolder(t *testing.T) {
	// Only a long writer: on 10.11 FTWRL does not wait for a long SELECT
	// (it takes the read lock at once and the INSERT then waits for the
	// FTWRL holder itself, which is a true holder, not a queued waiter).
	for _, long := range []string{"UPDATE gm_ftwrl SET v = v + SLEEP(10)"} {
		t.Run(long[:6], func(t *testing.T) { testFTWRL(t, long) })
	}
}

func testFTWRL(t *testing.T, long string) {
	src, db, ctx := server(t)
	table(t, ctx, db, "gm_ftwrl")
	a, b, c := newSession(t, ctx, db), newSession(t, ctx, db), newSession(t, ctx, db)
	a.background(ctx, long)
	until(t, ctx, src, "the long update", func(o *guard.Observation) bool {
		return slices.ContainsFunc(o.Sessions, func(s guard.Session) bool { return s.ID == a.id && s.Active })
	})
	b.background(ctx, "FLUSH TABLES WITH READ LOCK")
	until(t, ctx, src, "the FTWRL waiting", func(o *guard.Observation) bool { _, ok := waitUse(o, b.id); return ok })
	c.background(ctx, "INSERT INTO gm_ftwrl VALUES (10, 0)")
	obs := until(t, ctx, src, "the insert waiting", func(o *guard.Observation) bool { _, ok := waitUse(o, c.id); return ok })
	ub, _ := waitUse(obs, b.id)
	uc, _ := waitUse(obs, c.id)
	// The global read lock is the server's: every statement in flight
	// before the FTWRL, of any client of the server (other tests' too),
	// is one of its roots; never the FTWRL or the INSERT.
	roots := func(u guard.Use) bool {
		return slices.Contains(u.BlockedBy, a.id) && !slices.Contains(u.BlockedBy, b.id) && !slices.Contains(u.BlockedBy, c.id)
	}
	if !roots(ub) || ub.Soft {
		t.Errorf("FTWRL use %+v: want a hard wait blocked by the long statement %d", ub, a.id)
	}
	if !roots(uc) || !uc.Soft {
		t.Errorf("INSERT use %+v: want a soft wait blocked by the long statement %d", uc, a.id)
	}
	if _, ok := waitUse(obs, a.id); ok {
		t.Error("the root holder is marked waiting")
	}
}

func TestMetadataLockQueue(t *testing.T) {
	src, db, ctx := server(t)
	table(t, ctx, db, "gm_mdl")
	info, err := src.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := newSession(t, ctx, db), newSession(t, ctx, db), newSession(t, ctx, db)
	a.exec(t, ctx, "BEGIN")
	a.exec(t, ctx, "SELECT * FROM gm_mdl")
	b.background(ctx, "ALTER TABLE gm_mdl ADD COLUMN w INT")
	until(t, ctx, src, "the ALTER waiting", func(o *guard.Observation) bool { _, ok := waitUse(o, b.id); return ok })
	c.background(ctx, "SELECT * FROM gm_mdl")
	obs := until(t, ctx, src, "the SELECT waiting", func(o *guard.Observation) bool { _, ok := waitUse(o, c.id); return ok })
	ub, _ := waitUse(obs, b.id)
	uc, _ := waitUse(obs, c.id)
	if ub.Resource != "mdl:test.gm_mdl" || ub.Soft || !uc.Soft || uc.Resource != ub.Resource {
		t.Errorf("ALTER %+v, SELECT %+v: want both on mdl:test.gm_mdl, the SELECT soft", ub, uc)
	}
	if slices.Contains(uc.BlockedBy, b.id) {
		t.Error("the queued ALTER is blamed")
	}
	// With a lock view the holder (a, idle in its transaction) is tied to
	// both waits. Without one it is inferred when it is the only session
	// that can hold the lock (another test's open transaction in the
	// database makes it ambiguous: then nobody is, and the use says why).
	want := []int64{a.id}
	if slices.ContainsFunc(info.Features, func(f string) bool { return strings.HasPrefix(f, "metadata_locks: unavailable") }) {
		if !ub.Inferred && len(ub.BlockedBy) == 0 && ub.Why != "" {
			want = nil
		} else if !ub.Inferred || !uc.Inferred {
			t.Errorf("without a lock view, ALTER %+v, SELECT %+v: want their holder inferred", ub, uc)
		}
	}
	if !slices.Equal(ub.BlockedBy, want) || !slices.Equal(uc.BlockedBy, want) {
		t.Errorf("features %v: ALTER blocked by %v, SELECT by %v; want %v", info.Features, ub.BlockedBy, uc.BlockedBy, want)
	}
}

func TestCancelVerifiesStatement(t *testing.T) {
	src, db, ctx := server(t)
	a := newSession(t, ctx, db)
	done := a.background(ctx, "SELECT SLEEP(20)")
	var qid int64
	until(t, ctx, src, "the sleep", func(o *guard.Observation) bool {
		for _, s := range o.Sessions {
			if s.ID == a.id && s.Active {
				qid = s.Statement
				return true
			}
		}
		return false
	})
	if err := src.Cancel(ctx, guard.Target{Session: a.id, Statement: qid + 1000}); !errors.Is(err, guard.ErrChanged) {
		t.Errorf("cancel of another statement = %v, want ErrChanged", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the statement ended after a mismatched cancel: %v", err)
	default:
	}
	if err := src.Cancel(ctx, guard.Target{Session: a.id, Statement: qid}); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	<-done // SLEEP returns early when its query is killed
	if err := src.Cancel(ctx, guard.Target{Session: 1 << 40, Statement: 1}); !errors.Is(err, guard.ErrVanished) {
		t.Errorf("cancel of a vanished session = %v, want ErrVanished", err)
	}
	if err := src.Terminate(ctx, guard.Target{Session: 1 << 40, Statement: 1}); !errors.Is(err, guard.ErrVanished) {
		t.Errorf("terminate of a vanished session = %v, want ErrVanished", err)
	}
}

func TestPrivilegeError(t *testing.T) {
	_, db, ctx := server(t)
	db.ExecContext(ctx, "DROP USER IF EXISTS 'gm_nopriv'@'%'")
	if _, err := db.ExecContext(ctx, "CREATE USER 'gm_nopriv'@'%' IDENTIFIED BY 'gm_pw'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.ExecContext(context.Background(), "DROP USER IF EXISTS 'gm_nopriv'@'%'") })
	cfg, _ := ParseDSN(dsn())
	src, err := Open(ctx, fmt.Sprintf("mysql://gm_nopriv:gm_pw@%s(%s)/", cfg.Net, cfg.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	_, err = src.Check(ctx)
	var pe *guard.PrivilegeError
	if !errors.As(err, &pe) || !slices.Equal(pe.Missing, []string{"PROCESS", "CONNECTION ADMIN"}) || pe.Hint == "" {
		t.Fatalf("Check = %v, want a PrivilegeError for PROCESS and CONNECTION ADMIN", err)
	}
}
