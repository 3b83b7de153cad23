package mysql

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moirai-go/moirai/guard"
)

// dsn is the test server: $MOIRAI_TEST_MARIADB, or the machine's MariaDB
// on loopback.
func dsn() string {
	if d := os.Getenv("MOIRAI_TEST_MARIADB"); d != "" {
		return d
	}
	return "mysql://root@tcp(127.0.0.1:3306)/test"
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// server opens the source, or skips without a server (fails under CI).
func server(t *testing.T) *Source {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	s, err := Open(ctx, dsn())
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("MariaDB unreachable under CI: %v", err)
		}
		t.Skipf("no MariaDB server at %s (set MOIRAI_TEST_MARIADB, or start one): %v", dsn(), err)
	}
	if _, err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// conn is one client session of a scenario, on a pool of its own (the
// source's holds two connections).
func conn(t *testing.T, s *Source) *sql.Conn {
	t.Helper()
	db, err := sql.Open("mysql", strings.TrimPrefix(dsn(), "mysql://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Discarded, not returned (with its transaction or locks) to the
	// source's pool.
	t.Cleanup(func() { _ = c.Raw(func(any) error { return sqldriver.ErrBadConn }); c.Close() })
	return c
}

func exec(t *testing.T, c *sql.Conn, q string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := c.ExecContext(ctx, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func id(t *testing.T, c *sql.Conn) int64 {
	var n int64
	if err := c.QueryRowContext(t.Context(), "SELECT CONNECTION_ID()").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func background(ctx context.Context, c *sql.Conn, q string) <-chan error {
	done := make(chan error, 1)
	go func() {
		var v any
		err := c.QueryRowContext(ctx, q).Scan(&v)
		if errors.Is(err, sql.ErrNoRows) {
			err = nil
		}
		done <- err
	}()
	return done
}

func table(t *testing.T, s *Source, name string) {
	c := conn(t, s)
	exec(t, c, "DROP TABLE IF EXISTS "+name)
	exec(t, c, "CREATE TABLE "+name+" (id INT PRIMARY KEY, v INT) ENGINE=InnoDB")
	exec(t, c, "INSERT INTO "+name+" SELECT seq, 0 FROM seq_1_to_200")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = s.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+name)
	})
}

func until(t *testing.T, s *Source, what string, cond func(*guard.Observation) bool) *guard.Observation {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		obs, err := s.Poll(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if cond(obs) {
			return obs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached in 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waiting(obs *guard.Observation, id int64) (guard.Use, bool) {
	for _, u := range obs.Uses {
		if u.Session == id && u.Waiting {
			return u, true
		}
	}
	return guard.Use{}, false
}

func TestCheckAndBadInput(t *testing.T) {
	s := server(t)
	info, err := s.Check(t.Context())
	if err != nil || !strings.Contains(info.Version, "MariaDB") {
		t.Fatalf("Check: %+v, %v", info, err)
	}
	for _, v := range []string{"8.0.36", "10.5.1-MariaDB", "garbage"} {
		if supported(v) == nil {
			t.Errorf("version %q accepted", v)
		}
	}
	if m, _ := missingPrivileges([]string{"GRANT PROCESS ON *.* TO `g`@`%`"}); !slices.Equal(m, []string{"CONNECTION ADMIN"}) {
		t.Errorf("missing %v", m)
	}
	if m, super := missingPrivileges([]string{"GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost`"}); m != nil || !super {
		t.Errorf("all privileges: missing %v super %v", m, super)
	}
	c := conn(t, s)
	exec(t, c, "DROP USER IF EXISTS 'gm_noprivs'@'%'")
	exec(t, c, "CREATE USER 'gm_noprivs'@'%'")
	t.Cleanup(func() { _, _ = s.db.ExecContext(context.Background(), "DROP USER IF EXISTS 'gm_noprivs'@'%'") })
	weak, err := Open(t.Context(), "mysql://gm_noprivs@tcp(127.0.0.1:3306)/")
	if err != nil {
		t.Skipf("cannot connect as a new user here: %v", err)
	}
	defer weak.Close()
	_, err = weak.Check(t.Context())
	var pe *guard.PrivilegeError
	if !errors.As(err, &pe) || !slices.Equal(pe.Missing, []string{"PROCESS", "CONNECTION ADMIN"}) {
		t.Fatalf("Check without privileges: %v", err)
	}
	if _, err := Open(t.Context(), "mysql://u:secret@tcp(127.0.0.1:1)/x?timeout=1s"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("unreachable server: %v", err)
	}
}

// TestForUpdate is my-for-update: a transaction holds row locks from
// SELECT … FOR UPDATE and runs a long statement; updates wait. The guard
// kills the culprit's statement.
func TestForUpdate(t *testing.T) {
	s := server(t)
	table(t, s, "gm_rows")
	culprit := conn(t, s)
	cid := id(t, culprit)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	exec(t, culprit, "BEGIN")
	exec(t, culprit, "SELECT * FROM gm_rows WHERE id <= 50 FOR UPDATE")
	long := background(ctx, culprit, "SELECT SLEEP(20)")
	var vids []int64
	for i := range 2 {
		v := conn(t, s)
		vids = append(vids, id(t, v))
		background(ctx, v, fmt.Sprintf("UPDATE gm_rows SET v = v + 1 WHERE id = %d", i+1))
	}
	obs := until(t, s, "updates waiting", func(o *guard.Observation) bool {
		for _, v := range vids {
			if u, ok := waiting(o, v); !ok || !slices.Equal(u.BlockedBy, []int64{cid}) {
				return false
			}
		}
		return true
	})
	u, _ := waiting(obs, vids[0])
	if u.Resource != "row:test.gm_rows" || u.Since.IsZero() {
		t.Errorf("wait %+v", u)
	}
	g, err := guard.New(s, guard.Options{Interval: 50 * time.Millisecond, SLO: 200 * time.Millisecond, Logger: quiet,
		Protect: guard.Protection{AllowSuperuser: true}})
	if err != nil {
		t.Fatal(err)
	}
	var acted []guard.Decision
	for start := time.Now(); len(acted) == 0 && time.Since(start) < 10*time.Second; time.Sleep(50 * time.Millisecond) {
		ds, err := g.Step(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		acted = append(acted, ds...)
	}
	if len(acted) != 1 || acted[0].Outcome != guard.OutcomeActed || acted[0].Target.Session != cid {
		t.Fatalf("decisions %+v, want one kill of the culprit %d", acted, cid)
	}
	select {
	case <-long: // SLEEP returns early (1) or fails as interrupted: either is the kill
	case <-time.After(5 * time.Second):
		t.Fatal("the culprit's statement still runs after the kill")
	}
	exec(t, culprit, "ROLLBACK")
}

// TestFlushQueueIsSoft is my-ftwrl: a long UPDATE runs, FLUSH TABLES WITH
// READ LOCK waits for it, a later INSERT waits behind the FLUSH. Both waits
// are blamed on the UPDATE; the INSERT's is soft.
func TestFlushQueueIsSoft(t *testing.T) {
	s := server(t)
	table(t, s, "gm_flush")
	upd, flush, later := conn(t, s), conn(t, s), conn(t, s)
	uid, fid, lid := id(t, upd), id(t, flush), id(t, later)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	u := background(ctx, upd, "UPDATE gm_flush SET v = v + SLEEP(0.05)")
	until(t, s, "update running", func(o *guard.Observation) bool {
		for _, x := range o.Sessions {
			if x.ID == uid && x.Active {
				return true
			}
		}
		return false
	})
	time.Sleep(100 * time.Millisecond) // the FLUSH must start after the UPDATE
	f := background(ctx, flush, "FLUSH TABLES WITH READ LOCK")
	until(t, s, "flush waiting", func(o *guard.Observation) bool { _, ok := waiting(o, fid); return ok })
	l := background(ctx, later, "INSERT INTO gm_flush VALUES (1000, 1)")
	obs := until(t, s, "insert waiting", func(o *guard.Observation) bool { _, ok := waiting(o, lid); return ok })
	fu, _ := waiting(obs, fid)
	lu, _ := waiting(obs, lid)
	if !slices.Equal(fu.BlockedBy, []int64{uid}) || fu.Soft {
		t.Errorf("FLUSH waits for %v (soft %v), want the UPDATE %d", fu.BlockedBy, fu.Soft, uid)
	}
	if !slices.Equal(lu.BlockedBy, []int64{uid}) || !lu.Soft {
		t.Errorf("INSERT waits for %v (soft %v), want the UPDATE %d, softly", lu.BlockedBy, lu.Soft, uid)
	}
	// Kill the UPDATE's statement through the source: the FLUSH completes.
	var target guard.Target
	for _, x := range obs.Sessions {
		if x.ID == uid {
			target = guard.Target{Session: uid, Statement: x.Statement}
		}
	}
	if err := s.Cancel(t.Context(), target); err != nil {
		t.Fatal(err)
	}
	<-u
	if err := <-f; err != nil {
		t.Fatalf("FLUSH: %v", err)
	}
	exec(t, flush, "UNLOCK TABLES")
	<-l
}

func TestCancelVerifiesTheStatement(t *testing.T) {
	s := server(t)
	c := conn(t, s)
	cid := id(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	done := background(ctx, c, "SELECT SLEEP(3)")
	obs := until(t, s, "sleep running", func(o *guard.Observation) bool {
		for _, x := range o.Sessions {
			if x.ID == cid && x.Active {
				return true
			}
		}
		return false
	})
	var stmt int64
	for _, x := range obs.Sessions {
		if x.ID == cid {
			stmt = x.Statement
		}
	}
	if err := s.Cancel(t.Context(), guard.Target{Session: cid, Statement: stmt - 1}); !errors.Is(err, guard.ErrChanged) {
		t.Fatalf("kill of another statement: %v, want ErrChanged", err)
	}
	if err := s.Cancel(t.Context(), guard.Target{Session: 1 << 40, Statement: 5}); !errors.Is(err, guard.ErrVanished) {
		t.Fatalf("kill on a vanished thread: %v, want ErrVanished", err)
	}
	if err := s.Cancel(t.Context(), guard.Target{Session: cid}); err == nil {
		t.Fatal("a target without a QUERY_ID was killed blind")
	}
	start := time.Now()
	if err := s.Cancel(t.Context(), guard.Target{Session: cid, Statement: stmt}); err != nil {
		t.Fatal(err)
	}
	<-done
	if time.Since(start) > 2500*time.Millisecond {
		t.Fatal("the statement ran to its end: the kill did not reach it")
	}
}
