package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/moirai-go/moirai/guard"
)

// dsn is the test server: $MOIRAI_TEST_POSTGRES, or the machine's
// PostgreSQL on loopback.
func dsn() string {
	if d := os.Getenv("MOIRAI_TEST_POSTGRES"); d != "" {
		return d
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// server opens the source, or skips the test when no server answers
// (outside CI: under CI a missing server fails it).
func server(t *testing.T) *Source {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	s, err := Open(ctx, dsn())
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL unreachable under CI: %v", err)
		}
		t.Skipf("no PostgreSQL server at %s (set MOIRAI_TEST_POSTGRES, or start one): %v", dsn(), err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// client is one client connection of a scenario.
func client(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// cleanup runs sql on a connection of its own, after the test's context
// has ended; errors are left to the next run's DROP … IF EXISTS.
func cleanup(sql string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := pgx.Connect(ctx, dsn()); err == nil {
		_, _ = c.Exec(ctx, sql)
		c.Close(ctx)
	}
}

func exec(t *testing.T, c *pgx.Conn, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func pid(t *testing.T, c *pgx.Conn) int64 {
	var p int32
	if err := c.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&p); err != nil {
		t.Fatal(err)
	}
	return int64(p)
}

// background runs sql on c and reports its error when it ends.
func background(ctx context.Context, c *pgx.Conn, sql string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, sql)
		done <- err
	}()
	return done
}

// table creates a fresh table for one test.
func table(t *testing.T, name string) {
	c := client(t)
	exec(t, c, fmt.Sprintf("DROP TABLE IF EXISTS %s; CREATE TABLE %s (id int PRIMARY KEY, v int); INSERT INTO %s SELECT g, 0 FROM generate_series(1, 100) g", name, name, name))
	t.Cleanup(func() { cleanup("DROP TABLE IF EXISTS " + name) })
}

// until polls until cond holds on an observation, for state the server
// reaches on its own time.
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

func usesOf(obs *guard.Observation, pid int64) []guard.Use {
	var out []guard.Use
	for _, u := range obs.Uses {
		if u.Session == pid {
			out = append(out, u)
		}
	}
	return out
}

func waitingUse(obs *guard.Observation, pid int64) (guard.Use, bool) {
	for _, u := range usesOf(obs, pid) {
		if u.Waiting {
			return u, true
		}
	}
	return guard.Use{}, false
}

func TestCheck(t *testing.T) {
	s := server(t)
	info, err := s.Check(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(info.Version, "PostgreSQL 1") {
		t.Fatalf("version %q", info.Version)
	}
	// A role without the privileges gets a PrivilegeError naming them.
	admin := client(t)
	exec(t, admin, "DROP ROLE IF EXISTS gp_noprivs; CREATE ROLE gp_noprivs LOGIN")
	t.Cleanup(func() { cleanup("DROP ROLE IF EXISTS gp_noprivs") })
	u := strings.Replace(dsn(), "postgres@", "gp_noprivs@", 1)
	weak, err := Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer weak.Close()
	_, err = weak.Check(t.Context())
	var pe *guard.PrivilegeError
	if !errors.As(err, &pe) || !slices.Equal(pe.Missing, []string{"pg_monitor", "pg_signal_backend"}) || !strings.Contains(pe.Hint, "GRANT") {
		t.Fatalf("Check as an unprivileged role: %v", err)
	}
}

func TestBadDSN(t *testing.T) {
	if _, err := Open(t.Context(), "postgres://u:secret@127.0.0.1:1/x?sslmode=disable&connect_timeout=1"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("unreachable server: %v", err)
	}
	if _, err := Open(t.Context(), "postgres://%zz"); err == nil {
		t.Fatal("malformed DSN accepted")
	}
}

// The scenarios' sessions connect as the test server's superuser, which the
// guard protects by default: the guards of these tests allow superusers.

// TestDDLQueueIsSoft is pg-ddl-queue: a long reader holds AccessShare, an
// ALTER TABLE queues for AccessExclusive, and a later SELECT queues
// behind the ALTER. Both waits are blamed on the reader; the SELECT's is
// soft.
func TestDDLQueueIsSoft(t *testing.T) {
	s := server(t)
	table(t, "gp_ddl")
	reader, alter, later := client(t), client(t), client(t)
	rp, ap, lp := pid(t, reader), pid(t, alter), pid(t, later)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	exec(t, reader, "BEGIN; SELECT count(*) FROM gp_ddl")
	r := background(ctx, reader, "SELECT pg_sleep(15)")
	a := background(ctx, alter, "ALTER TABLE gp_ddl ADD COLUMN w int")
	until(t, s, "ALTER waiting", func(o *guard.Observation) bool { _, ok := waitingUse(o, ap); return ok })
	l := background(ctx, later, "SELECT count(*) FROM gp_ddl")
	obs := until(t, s, "SELECT waiting", func(o *guard.Observation) bool { _, ok := waitingUse(o, lp); return ok })

	au, _ := waitingUse(obs, ap)
	lu, _ := waitingUse(obs, lp)
	if !slices.Equal(au.BlockedBy, []int64{rp}) || au.Soft {
		t.Errorf("ALTER waits for %v (soft %v), want the reader %d, hard", au.BlockedBy, au.Soft, rp)
	}
	if !slices.Equal(lu.BlockedBy, []int64{rp}) || !lu.Soft {
		t.Errorf("later SELECT waits for %v (soft %v), want the reader %d, soft", lu.BlockedBy, lu.Soft, rp)
	}
	if au.Since.IsZero() || au.Resource != "relation:test.public.gp_ddl" {
		t.Errorf("ALTER's use %+v", au)
	}
	// The guard would cancel the reader, never the queued ALTER.
	g, err := guard.New(s, guard.Options{Interval: 50 * time.Millisecond, SLO: 100 * time.Millisecond, DryRun: true, Logger: quiet,
		Protect: guard.Protection{AllowSuperuser: true}})
	if err != nil {
		t.Fatal(err)
	}
	var d []guard.Decision
	for start := time.Now(); len(d) == 0 && time.Since(start) < 10*time.Second; time.Sleep(50 * time.Millisecond) {
		if d, err = g.Step(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if len(d) != 1 || d[0].Target.Session != rp || d[0].Outcome != guard.OutcomeDryRun {
		t.Fatalf("decisions %+v, want a dry-run cancel of the reader %d", d, rp)
	}
	cancel()
	<-r
	<-a
	<-l
}

// TestCancelsLockTableCulprit is pg-lock-table: a transaction holds the
// table in EXCLUSIVE mode while it runs a long statement; updates wait.
// The guard cancels the culprit's statement, and the updates complete.
func TestCancelsLockTableCulprit(t *testing.T) {
	s := server(t)
	table(t, "gp_lock")
	culprit := client(t)
	cp := pid(t, culprit)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	exec(t, culprit, "BEGIN; LOCK TABLE gp_lock IN EXCLUSIVE MODE")
	c := background(ctx, culprit, "SELECT pg_sleep(20)")
	var victims []<-chan error
	var vpids []int64
	for i := range 3 {
		v := client(t)
		vpids = append(vpids, pid(t, v))
		victims = append(victims, background(ctx, v, fmt.Sprintf("UPDATE gp_lock SET v = v + 1 WHERE id = %d", i+1)))
	}
	until(t, s, "updates waiting", func(o *guard.Observation) bool {
		for _, p := range vpids {
			if u, ok := waitingUse(o, p); !ok || !slices.Equal(u.BlockedBy, []int64{cp}) {
				return false
			}
		}
		return true
	})
	var audit strings.Builder
	g, err := guard.New(s, guard.Options{Interval: 50 * time.Millisecond, SLO: 200 * time.Millisecond, Audit: &audit, Logger: quiet,
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
		for _, d := range ds {
			if d.Outcome != guard.OutcomeActed {
				t.Fatalf("decision %+v", d)
			}
			acted = append(acted, d)
		}
	}
	if len(acted) != 1 || acted[0].Target.Session != cp {
		t.Fatalf("acted %+v, want one cancel of the culprit %d", acted, cp)
	}
	if err := <-c; err == nil || !strings.Contains(err.Error(), "canceling statement due to user request") {
		t.Fatalf("culprit's statement ended with %v, want a cancel", err)
	}
	exec(t, culprit, "ROLLBACK")
	for i, v := range victims {
		if err := <-v; err != nil {
			t.Fatalf("victim %d: %v", i, err)
		}
	}
	if !strings.Contains(audit.String(), `"outcome":"acted"`) {
		t.Fatalf("audit: %s", audit.String())
	}
}

// TestCancelVerifiesTheStatement checks the race guards: a target whose
// statement has changed, or whose backend is gone, is not signalled.
func TestCancelVerifiesTheStatement(t *testing.T) {
	s := server(t)
	c := client(t)
	p := pid(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	done := background(ctx, c, "SELECT pg_sleep(3)")
	obs := until(t, s, "sleep running", func(o *guard.Observation) bool {
		for _, x := range o.Sessions {
			if x.ID == p && x.Active && strings.Contains(x.Query, "pg_sleep") {
				return true
			}
		}
		return false
	})
	var target guard.Target
	for _, x := range obs.Sessions {
		if x.ID == p {
			target = guard.Target{Session: p, QueryStart: x.QueryStart, XactStart: x.XactStart}
		}
	}
	stale := target
	stale.QueryStart = stale.QueryStart.Add(-time.Microsecond)
	if err := s.Cancel(t.Context(), stale); !errors.Is(err, guard.ErrChanged) {
		t.Fatalf("cancel of another statement: %v, want ErrChanged", err)
	}
	if err := s.Cancel(t.Context(), guard.Target{Session: 1<<31 - 2, QueryStart: time.Now()}); !errors.Is(err, guard.ErrVanished) {
		t.Fatalf("cancel of a vanished backend: %v, want ErrVanished", err)
	}
	if err := s.Cancel(t.Context(), guard.Target{Session: p}); err == nil {
		t.Fatal("a target without a query start was cancelled blind")
	}
	if err := s.Cancel(t.Context(), target); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "canceling statement") {
		t.Fatalf("statement ended with %v, want a cancel", err)
	}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func slotsOf(obs *guard.Observation) (guard.Resource, bool) {
	for _, r := range obs.Resources {
		if r.Name == ConnectionSlots {
			return r, true
		}
	}
	return guard.Resource{}, false
}

func TestConnectionSlots(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	obs, err := s.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before, ok := slotsOf(obs)
	if !ok {
		t.Fatalf("no %s resource in %+v", ConnectionSlots, obs.Resources)
	}
	if before.Capacity <= 0 || before.InUse < 1 || before.InUse > before.Capacity {
		t.Fatalf("connection slots %+v: want 1 ≤ InUse ≤ Capacity", before)
	}
	for range 3 {
		client(t)
	}
	// Not before.InUse+3: other test packages connect to the server at
	// the same time and leave it; ours and the guard's own are 4 at least.
	obs = until(t, s, "three client backends and the guard's", func(o *guard.Observation) bool {
		r, ok := slotsOf(o)
		return ok && r.InUse >= 4 && r.InUse <= r.Capacity
	})
	after, _ := slotsOf(obs)
	if after.Capacity != before.Capacity {
		t.Fatalf("capacity moved from %d to %d", before.Capacity, after.Capacity)
	}
}
