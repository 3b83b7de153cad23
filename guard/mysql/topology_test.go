package mysql

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/moirai-go/moirai/guard"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// database creates the database moirai_guard_<name> for one test and
// returns a pool and the guard's source on it; both are closed and the
// database dropped after the test.
func database(t *testing.T, name string) (*Source, *sql.DB, context.Context) {
	t.Helper()
	return databaseNamed(t, "moirai_guard_"+name)
}

// databaseNamed is database with the database's whole name, and the
// source opened with opts.
func databaseNamed(t *testing.T, db string, opts ...Option) (*Source, *sql.DB, context.Context) {
	t.Helper()
	_, admin, ctx := server(t)
	for _, q := range []string{"DROP DATABASE IF EXISTS " + db, "CREATE DATABASE " + db} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+db) })
	cfg, _ := ParseDSN(dsn())
	cfg.DBName = db
	pool, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	src, err := Open(ctx, "mysql://"+cfg.FormatDSN(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	if _, err := src.Check(ctx); err != nil {
		t.Fatal(err)
	}
	return src, pool, ctx
}

// allWaiting is a condition of until: every one of ss waits.
func allWaiting(ss []*session) func(*guard.Observation) bool {
	return func(o *guard.Observation) bool {
		for _, s := range ss {
			if _, ok := waitUse(o, s.id); !ok {
				return false
			}
		}
		return true
	}
}

// runGuard steps g every 150 ms (the InnoDB views' refresh) for d and
// returns its decisions.
func runGuard(t *testing.T, ctx context.Context, g *guard.Guard, d time.Duration) []guard.Decision {
	t.Helper()
	var all []guard.Decision
	for start := time.Now(); time.Since(start) < d; time.Sleep(150 * time.Millisecond) {
		ds, err := g.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ds...)
	}
	return all
}

// Observation 2: a row-lock queue whose holder is idle in transaction
// (no --terminate-idle): the guard acts on no waiter.
func TestRowLockQueueIdleHolderNoVictim(t *testing.T) {
	src, db, ctx := database(t, "rowq")
	table(t, ctx, db, "t")
	h := newSession(t, ctx, db)
	h.exec(t, ctx, "BEGIN")
	h.exec(t, ctx, "UPDATE t SET v = 1 WHERE id = 1")
	var waiters []*session
	for range 3 {
		w := newSession(t, ctx, db)
		w.background(ctx, "UPDATE t SET v = 2 WHERE id = 1")
		waiters = append(waiters, w)
		time.Sleep(50 * time.Millisecond)
	}
	until(t, ctx, src, "updates waiting", allWaiting(waiters))
	g, err := guard.New(src, guard.Options{Interval: 150 * time.Millisecond, SLO: 300 * time.Millisecond, DryRun: true, Logger: quiet,
		Protect: guard.Protection{AllowSuperuser: true}, MinInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range runGuard(t, ctx, g, 3*time.Second) {
		if d.Outcome == guard.OutcomeDryRun || d.Outcome == guard.OutcomeActed {
			t.Errorf("would %s session %d (%s); the root %d is idle in transaction, the rest are its victims", d.Action, d.Target.Session, d.Reason, h.id)
		}
	}
}

// Observation 3: with the documented least-privilege account, a session
// of an account holding ALL PRIVILEGES ON *.* is seen as a superuser's:
// without the grants to read the accounts' privileges, Check names them
// and every other account's session is treated as a superuser's (fails
// closed); with them, the superuser's session is, a plain one is not.
func TestSuperuserSeenByLeastPrivilegeGuard(t *testing.T) {
	_, admin, ctx := server(t)
	const mon, su, app = "moirai_guard_mon", "moirai_guard_su", "moirai_guard_app"
	for _, q := range []string{
		"DROP USER IF EXISTS " + mon + "@'%'", "DROP USER IF EXISTS " + su + "@'%'", "DROP USER IF EXISTS " + app + "@'%'",
		"CREATE USER " + mon + "@'%' IDENTIFIED BY 'moirai'", "GRANT PROCESS, CONNECTION ADMIN ON *.* TO " + mon + "@'%'",
		"CREATE USER " + su + "@'%' IDENTIFIED BY 'moirai'", "GRANT ALL PRIVILEGES ON *.* TO " + su + "@'%'",
		"CREATE USER " + app + "@'%' IDENTIFIED BY 'moirai'",
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		for _, u := range []string{mon, su, app} {
			admin.ExecContext(context.Background(), "DROP USER IF EXISTS "+u+"@'%'")
		}
	})
	cfg, _ := ParseDSN(dsn())
	cfg.DBName = ""
	sessionOf := func(user string) *session {
		c := *cfg
		c.User, c.Passwd = user, "moirai"
		pool, err := sql.Open("mysql", c.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pool.Close() })
		s := newSession(t, ctx, pool)
		s.background(ctx, "SELECT SLEEP(20)")
		return s
	}
	sus, apps := sessionOf(su), sessionOf(app)
	superOf := func(wantCheck bool) map[int64]bool {
		c := *cfg
		c.User, c.Passwd = mon, "moirai"
		src, err := Open(ctx, "mysql://"+c.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		_, err = src.Check(ctx)
		var pe *guard.PrivilegeError
		switch {
		case wantCheck && err != nil:
			t.Fatal(err)
		case !wantCheck && (!errors.As(err, &pe) || !strings.Contains(pe.Hint, "mysql.global_priv")):
			t.Fatalf("Check = %v, want the grant to read mysql.global_priv named", err)
		}
		out := map[int64]bool{}
		until(t, ctx, src, "the sessions", func(o *guard.Observation) bool {
			for _, se := range o.Sessions {
				if (se.ID == sus.id || se.ID == apps.id) && se.Active {
					out[se.ID] = se.Superuser
				}
			}
			return len(out) == 2
		})
		return out
	}
	if got := superOf(false); !got[sus.id] || !got[apps.id] {
		t.Errorf("privileges unreadable: superuser %v (su %d, app %d): want both treated as superusers'", got, sus.id, apps.id)
	}
	for _, q := range []string{"GRANT SELECT ON mysql.global_priv TO " + mon + "@'%'", "GRANT SELECT ON mysql.roles_mapping TO " + mon + "@'%'"} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if got := superOf(true); !got[sus.id] || got[apps.id] {
		t.Errorf("privileges readable: superuser %v (su %d, app %d): want su only", got, sus.id, apps.id)
	}
}

// Observation 4 (MariaDB): a guard whose DSN names a database never acts
// in another.
func TestScopeIsTheDSNDatabase(t *testing.T) {
	src, _, ctx := database(t, "scopea")
	_, db, _ := database(t, "scopeb")
	table(t, ctx, db, "t")
	h := newSession(t, ctx, db)
	h.exec(t, ctx, "BEGIN")
	h.exec(t, ctx, "UPDATE t SET v = 1 WHERE id = 1")
	h.background(ctx, "SELECT SLEEP(15)")
	w := newSession(t, ctx, db)
	w.background(ctx, "UPDATE t SET v = 2 WHERE id = 1")
	until(t, ctx, src, "the update waiting", func(o *guard.Observation) bool { _, ok := waitUse(o, w.id); return ok })
	g, err := guard.New(src, guard.Options{Interval: 150 * time.Millisecond, SLO: 300 * time.Millisecond, DryRun: true, Logger: quiet,
		Protect: guard.Protection{AllowSuperuser: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range runGuard(t, ctx, g, 2*time.Second) {
		if d.Outcome == guard.OutcomeDryRun || d.Outcome == guard.OutcomeActed {
			t.Errorf("would act on session %d of another database (%s)", d.Target.Session, d.Reason)
		}
	}
}

// Observation 6: without a metadata lock view, a long read holding the
// table's metadata lock, an ALTER queued behind it and reads queued behind
// the ALTER: the guard infers the reader, the only candidate, and marks
// the decision inferred. The server's views are ignored with
// WithoutMDLView, as on a server without the plugin.
func TestMetadataLockHolderInferred(t *testing.T) {
	src, db, ctx := databaseNamed(t, "moirai_guard2_mdl", WithoutMDLView())
	if src.mdl != "" {
		t.Fatalf("WithoutMDLView: the source reads the view %q", src.mdl)
	}
	if info, err := src.Check(ctx); err != nil || !strings.Contains(strings.Join(info.Features, "; "), "metadata_locks: views ignored") {
		t.Fatalf("Check: features %v, err %v; want the metadata lock views said ignored", info.Features, err)
	}
	table(t, ctx, db, "t")
	r, a, q := newSession(t, ctx, db), newSession(t, ctx, db), newSession(t, ctx, db)
	r.background(ctx, "SELECT SLEEP(15) FROM t LIMIT 1")
	time.Sleep(200 * time.Millisecond)
	a.background(ctx, "ALTER TABLE t ADD COLUMN w INT")
	until(t, ctx, src, "the ALTER waiting", func(o *guard.Observation) bool { _, ok := waitUse(o, a.id); return ok })
	q.background(ctx, "SELECT * FROM t")
	until(t, ctx, src, "the read waiting", func(o *guard.Observation) bool { _, ok := waitUse(o, q.id); return ok })
	g, err := guard.New(src, guard.Options{Interval: 150 * time.Millisecond, SLO: 300 * time.Millisecond, DryRun: true, Logger: quiet,
		Protect: guard.Protection{AllowSuperuser: true}, MinInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	chose := false
	for _, d := range runGuard(t, ctx, g, 3*time.Second) {
		if d.Outcome != guard.OutcomeDryRun {
			continue
		}
		if d.Target.Session != r.id {
			t.Errorf("would cancel %d (%s), want the reader %d", d.Target.Session, d.Reason, r.id)
		}
		if !strings.Contains(d.Reason, "inferred") {
			t.Errorf("decision on the reader not marked inferred: %s", d.Reason)
		}
		chose = true
	}
	if !chose {
		x := g.Explain()
		var b strings.Builder
		x.WriteText(&b)
		t.Errorf("no decision: the reader holding the metadata lock was not inferred; explain:\n%s", b.String())
	}
}

// An acting guard, scoped to the test's database, on an InnoDB row queue
// whose holder runs a long statement in its transaction: it kills the
// holder's statement, never a waiter. Killing a statement does not end
// an InnoDB transaction: the holder, now idle in it, keeps the row, and
// the guard leaves the chain alone and says so (no --terminate-idle).
func TestRowLockQueueActing(t *testing.T) {
	src, db, ctx := database(t, "rowqact")
	table(t, ctx, db, "t")
	h := newSession(t, ctx, db)
	h.exec(t, ctx, "BEGIN")
	h.exec(t, ctx, "UPDATE t SET v = 1 WHERE id = 1")
	held := h.background(ctx, "SELECT SLEEP(15)")
	var waiters []*session
	var done []<-chan error
	for range 3 {
		w := newSession(t, ctx, db)
		done = append(done, w.background(ctx, "UPDATE t SET v = 2 WHERE id = 1"))
		waiters = append(waiters, w)
		time.Sleep(50 * time.Millisecond)
	}
	until(t, ctx, src, "updates waiting", allWaiting(waiters))
	g, err := guard.New(src, guard.Options{Interval: 150 * time.Millisecond, SLO: 300 * time.Millisecond, Logger: quiet,
		Protect: guard.Protection{AllowSuperuser: true}, MinInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var acted, left []guard.Decision
	for start := time.Now(); len(left) == 0 && time.Since(start) < 10*time.Second; time.Sleep(150 * time.Millisecond) {
		ds, err := g.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			switch d.Outcome {
			case guard.OutcomeNoAction:
				left = append(left, d)
			default:
				acted = append(acted, d)
			}
		}
	}
	if len(acted) != 1 || acted[0].Outcome != guard.OutcomeActed || acted[0].Target.Session != h.id || acted[0].Root != h.id {
		t.Fatalf("decisions %+v, want one kill of the holder %d", acted, h.id)
	}
	if err := <-held; err == nil {
		t.Fatal("the holder's statement was not killed")
	}
	if len(left) == 0 || left[0].Root != h.id || left[0].Blocked != guard.BlockedIdle {
		t.Fatalf("no-action decisions %+v, want the idle holder %d", left, h.id)
	}
	h.exec(t, ctx, "ROLLBACK")
	for i, ch := range done {
		if err := <-ch; err != nil {
			t.Fatalf("waiter %d: %v", i, err)
		}
	}
}
