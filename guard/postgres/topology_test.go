package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/moirai-go/moirai/guard"
)

// database creates the database moirai_guard_<name> for one test and
// returns its DSN; it is dropped (its sessions ended) after the test.
func database(t *testing.T, name string) string {
	t.Helper()
	server(t) // skips without a server
	db := "moirai_guard_" + name
	drop := "DROP DATABASE IF EXISTS " + db + " WITH (FORCE)"
	c := client(t)
	exec(t, c, drop)
	exec(t, c, "CREATE DATABASE "+db)
	t.Cleanup(func() { cleanup(drop) })
	cfg, err := pgx.ParseConfig(dsn())
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, db)
}

// clientOf is one client connection to the database of d.
func clientOf(t *testing.T, d string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// sourceOf opens the guard's source on d.
func sourceOf(t *testing.T, d string) *Source {
	t.Helper()
	s, err := Open(t.Context(), d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// runGuard steps g every 50 ms for d and returns its decisions.
func runGuard(t *testing.T, g *guard.Guard, d time.Duration) []guard.Decision {
	t.Helper()
	var all []guard.Decision
	for start := time.Now(); time.Since(start) < d; time.Sleep(50 * time.Millisecond) {
		ds, err := g.Step(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ds...)
	}
	return all
}

// rowQueue starts observation 1's scenario in the database of d: c holds
// row 1 of t and sleeps in its transaction; n sessions update row 1.
func rowQueue(t *testing.T, ctx context.Context, d string, n int) (holder int64, waiters []int64) {
	t.Helper()
	c := clientOf(t, d)
	exec(t, c, "CREATE TABLE t (id int PRIMARY KEY, v int); INSERT INTO t SELECT g, 0 FROM generate_series(1, 10) g")
	holder = pid(t, c)
	exec(t, c, "BEGIN; UPDATE t SET v = 1 WHERE id = 1")
	background(ctx, c, "SELECT pg_sleep(15)")
	for range n {
		w := clientOf(t, d)
		waiters = append(waiters, pid(t, w))
		background(ctx, w, "UPDATE t SET v = 2 WHERE id = 1")
		time.Sleep(20 * time.Millisecond) // a queue in a known order
	}
	return holder, waiters
}

// Observation 1: in a row-lock queue, the guard blames the transaction
// holding the row, never a waiting UPDATE (dry run: decisions only).
func TestRowLockQueueBlamesTheHolder(t *testing.T) {
	d := database(t, "rowq")
	s := sourceOf(t, d)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	holder, waiters := rowQueue(t, ctx, d, 3)
	until(t, s, "updates waiting", func(o *guard.Observation) bool {
		for _, p := range waiters {
			if _, ok := waitingUse(o, p); !ok {
				return false
			}
		}
		return true
	})
	g, err := guard.New(s, guard.Options{Interval: 50 * time.Millisecond, SLO: 500 * time.Millisecond, DryRun: true, Logger: quiet,
		Protect: guard.Protection{AllowSuperuser: true}, MinInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ds := runGuard(t, g, 3*time.Second)
	chose := false
	for _, d := range ds {
		if d.Outcome != guard.OutcomeDryRun {
			continue
		}
		if d.Target.Session != holder {
			t.Errorf("would cancel session %d (%s), a waiter; the holder is %d", d.Target.Session, d.Reason, holder)
		}
		chose = true
	}
	if !chose {
		t.Errorf("no decision on the holder %d: %+v", holder, ds)
	}
	x := g.Explain()
	if x.Would != 0 && x.Would != holder {
		t.Errorf("explain would cancel %d, a waiter", x.Would)
	}
}

// Observation 4: a guard whose DSN names database a never acts in b.
func TestScopeIsTheDSNDatabase(t *testing.T) {
	da, db := database(t, "scopea"), database(t, "scopeb")
	s := sourceOf(t, da)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := clientOf(t, db)
	exec(t, c, "CREATE TABLE t (id int PRIMARY KEY, v int); INSERT INTO t VALUES (1, 0)")
	exec(t, c, "BEGIN; LOCK TABLE t IN EXCLUSIVE MODE")
	background(ctx, c, "SELECT pg_sleep(15)")
	var waiters []int64
	for range 3 {
		w := clientOf(t, db)
		waiters = append(waiters, pid(t, w))
		background(ctx, w, "UPDATE t SET v = 2 WHERE id = 1")
	}
	until(t, s, "updates waiting", func(o *guard.Observation) bool {
		for _, p := range waiters {
			if _, ok := waitingUse(o, p); !ok {
				return false
			}
		}
		return true
	})
	g, err := guard.New(s, guard.Options{Interval: 50 * time.Millisecond, SLO: 300 * time.Millisecond, DryRun: true, Logger: quiet,
		Protect: guard.Protection{AllowSuperuser: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range runGuard(t, g, 2*time.Second) {
		if d.Outcome == guard.OutcomeDryRun || d.Outcome == guard.OutcomeActed {
			t.Errorf("would act on session %d of another database (%s)", d.Target.Session, d.Reason)
		}
	}
}

// Observation 5: advisory locks (1,42) and (2,42) are two resources; the
// holder of the uncontended one is never chosen.
func TestAdvisoryLocksKeepEveryField(t *testing.T) {
	d := database(t, "advisory")
	s := sourceOf(t, d)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	other, culprit, waiter := clientOf(t, d), clientOf(t, d), clientOf(t, d)
	op, cp, wp := pid(t, other), pid(t, culprit), pid(t, waiter)
	exec(t, other, "SELECT pg_advisory_lock(2, 42)")
	background(ctx, other, "SELECT pg_sleep(15)")
	time.Sleep(300 * time.Millisecond) // other is the older
	exec(t, culprit, "SELECT pg_advisory_lock(1, 42)")
	background(ctx, culprit, "SELECT pg_sleep(15)")
	background(ctx, waiter, "SELECT pg_advisory_lock(1, 42)")
	obs := until(t, s, "the waiter waiting", func(o *guard.Observation) bool { _, ok := waitingUse(o, wp); return ok })
	w, _ := waitingUse(obs, wp)
	for _, u := range usesOf(obs, op) {
		if u.Resource == w.Resource {
			t.Errorf("the lock (2,42) of %d and the lock (1,42) waited for are one resource %q", op, u.Resource)
		}
	}
	if !strings.Contains(w.Resource, "moirai_guard_advisory") {
		t.Errorf("advisory lock %q does not name its database", w.Resource)
	}
	g, err := guard.New(s, guard.Options{Interval: 50 * time.Millisecond, SLO: 300 * time.Millisecond, DryRun: true, Logger: quiet,
		Protect: guard.Protection{AllowSuperuser: true}, MinInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range runGuard(t, g, 2*time.Second) {
		if d.Outcome == guard.OutcomeDryRun && d.Target.Session != cp {
			t.Errorf("would cancel %d, want the holder of (1,42) %d (%s)", d.Target.Session, cp, d.Reason)
		}
	}
}

// An acting guard, scoped to the test's database, cancels the row's
// holder in a row-lock queue, and reports its decision with the root; a
// holder idle in transaction is left alone and reported.
func TestRowLockQueueActing(t *testing.T) {
	d := database(t, "rowqact")
	s := sourceOf(t, d)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := clientOf(t, d)
	exec(t, c, "CREATE TABLE t (id int PRIMARY KEY, v int); INSERT INTO t SELECT g, 0 FROM generate_series(1, 10) g")
	holder := pid(t, c)
	exec(t, c, "BEGIN; UPDATE t SET v = 1 WHERE id = 1")
	held := background(ctx, c, "SELECT pg_sleep(15)")
	var waiters []int64
	var done []<-chan error
	for range 3 {
		w := clientOf(t, d)
		waiters = append(waiters, pid(t, w))
		done = append(done, background(ctx, w, "UPDATE t SET v = 2 WHERE id = 1"))
	}
	until(t, s, "updates waiting", func(o *guard.Observation) bool {
		for _, p := range waiters {
			if _, ok := waitingUse(o, p); !ok {
				return false
			}
		}
		return true
	})
	g, err := guard.New(s, guard.Options{Interval: 50 * time.Millisecond, SLO: 300 * time.Millisecond, Logger: quiet,
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
			if d.Outcome == guard.OutcomeActed || d.Outcome == guard.OutcomeFailed {
				acted = append(acted, d)
			}
		}
	}
	if len(acted) != 1 || acted[0].Target.Session != holder || acted[0].Root != holder {
		t.Fatalf("acted %+v, want one cancel of the holder %d", acted, holder)
	}
	if err := <-held; err == nil || !strings.Contains(err.Error(), "canceling statement") {
		t.Fatalf("holder's statement ended with %v, want a cancel", err)
	}
	// PostgreSQL releases an aborted transaction's locks: the waiters
	// go through.
	exec(t, c, "ROLLBACK")
	for i, ch := range done {
		if err := <-ch; err != nil {
			t.Fatalf("waiter %d: %v", i, err)
		}
	}
}

// A holder idle in transaction (no --terminate-idle): the acting guard
// acts on nobody in its queue, and reports the chain with its root.
func TestRowLockQueueIdleHolderLeftAlone(t *testing.T) {
	d := database(t, "rowqidle")
	s := sourceOf(t, d)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := clientOf(t, d)
	exec(t, c, "CREATE TABLE t (id int PRIMARY KEY, v int); INSERT INTO t SELECT g, 0 FROM generate_series(1, 10) g")
	holder := pid(t, c)
	exec(t, c, "BEGIN; UPDATE t SET v = 1 WHERE id = 1")
	var waiters []int64
	var done []<-chan error
	for range 3 {
		w := clientOf(t, d)
		waiters = append(waiters, pid(t, w))
		done = append(done, background(ctx, w, "UPDATE t SET v = 2 WHERE id = 1"))
		time.Sleep(20 * time.Millisecond)
	}
	until(t, s, "updates waiting", func(o *guard.Observation) bool {
		for _, p := range waiters {
			if _, ok := waitingUse(o, p); !ok {
				return false
			}
		}
		return true
	})
	g, err := guard.New(s, guard.Options{Interval: 50 * time.Millisecond, SLO: 300 * time.Millisecond, Logger: quiet,
		Protect: guard.Protection{AllowSuperuser: true}, MinInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var left []guard.Decision
	for _, d := range runGuard(t, g, 2*time.Second) {
		switch d.Outcome {
		case guard.OutcomeNoAction:
			left = append(left, d)
		default:
			t.Errorf("decision %s on %d (%s): the root is idle, the rest are its victims", d.Outcome, d.Target.Session, d.Reason)
		}
	}
	waiting := 0
	for _, d := range left {
		if d.Root != holder || d.Blocked != guard.BlockedIdle {
			t.Errorf("no-action %+v, want the idle holder %d", d, holder)
		}
		waiting += len(d.Waiters)
	}
	if waiting != len(waiters) {
		t.Errorf("no-action decisions %+v cover %d waiters, want %d", left, waiting, len(waiters))
	}
	exec(t, c, "ROLLBACK")
	for i, ch := range done {
		if err := <-ch; err != nil {
			t.Fatalf("waiter %d: %v", i, err)
		}
	}
}
