package postgres

import (
	"context"
	"fmt"
	"slices"
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

// bg runs sql on c in the background and reports its error when it ends;
// the test's cleanup waits for it before c is closed.
func bg(t *testing.T, ctx context.Context, c *pgx.Conn, sql string) <-chan error {
	out := make(chan error, 1)
	fin := make(chan struct{})
	go func() {
		defer close(fin)
		_, err := c.Exec(ctx, sql)
		out <- err
	}()
	t.Cleanup(func() { <-fin })
	return out
}

// allWaiting is a condition of until: every one of pids waits.
func allWaiting(pids []int64) func(*guard.Observation) bool {
	return func(o *guard.Observation) bool {
		for _, p := range pids {
			if _, ok := waitingUse(o, p); !ok {
				return false
			}
		}
		return true
	}
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
	return runGuardUntil(t, g, d, nil)
}

// runGuardUntil steps g every 50 ms for at most d, until a decision
// satisfies stop (nil: never), and returns its decisions.
func runGuardUntil(t *testing.T, g *guard.Guard, d time.Duration, stop func(guard.Decision) bool) []guard.Decision {
	t.Helper()
	var all []guard.Decision
	for start := time.Now(); time.Since(start) < d; time.Sleep(50 * time.Millisecond) {
		ds, err := g.Step(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ds...)
		if stop != nil && slices.ContainsFunc(ds, stop) {
			break
		}
	}
	return all
}

// queue is observation 1's scenario in a database: c (holder) updated
// row 1 of t; held is its pg_sleep's end when it sleeps in its
// transaction (nil when it is idle in it); waiters update row 1, in
// order, and done reports their ends.
type queue struct {
	c       *pgx.Conn
	holder  int64
	held    <-chan error
	waiters []int64
	done    []<-chan error
}

// rowQueue starts a queue of n waiters in the database of d, the holder
// sleeping in its transaction or idle in it.
func rowQueue(t *testing.T, ctx context.Context, d string, n int, sleeps bool) queue {
	t.Helper()
	q := queue{c: clientOf(t, d)}
	exec(t, q.c, "CREATE TABLE t (id int PRIMARY KEY, v int); INSERT INTO t SELECT g, 0 FROM generate_series(1, 10) g")
	q.holder = pid(t, q.c)
	exec(t, q.c, "BEGIN; UPDATE t SET v = 1 WHERE id = 1")
	if sleeps {
		q.held = bg(t, ctx, q.c, "SELECT pg_sleep(15)")
	}
	for range n {
		w := clientOf(t, d)
		q.waiters = append(q.waiters, pid(t, w))
		q.done = append(q.done, bg(t, ctx, w, "UPDATE t SET v = 2 WHERE id = 1"))
		time.Sleep(20 * time.Millisecond) // a queue in a known order
	}
	return q
}

// queued starts a queue of three waiters in the database
// moirai_guard_<name> and returns the guard's source on it once they all
// wait.
func queued(t *testing.T, name string, sleeps bool) (*Source, queue) {
	t.Helper()
	d := database(t, name)
	s := sourceOf(t, d)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	q := rowQueue(t, ctx, d, 3, sleeps)
	t.Cleanup(cancel) // before the statements' ends are waited for
	until(t, s, "updates waiting", allWaiting(q.waiters))
	return s, q
}

// release rolls the holder back and checks that every waiter completes.
func (q queue) release(t *testing.T) {
	t.Helper()
	exec(t, q.c, "ROLLBACK")
	for i, ch := range q.done {
		if err := <-ch; err != nil {
			t.Fatalf("waiter %d: %v", i, err)
		}
	}
}

// Observation 1: in a row-lock queue, the guard blames the transaction
// holding the row, never a waiting UPDATE (dry run: decisions only).
func TestRowLockQueueBlamesTheHolder(t *testing.T) {
	s, q := queued(t, "rowq", true)
	holder := q.holder
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
	bg(t, ctx, c, "SELECT pg_sleep(15)")
	var waiters []int64
	for range 3 {
		w := clientOf(t, db)
		waiters = append(waiters, pid(t, w))
		bg(t, ctx, w, "UPDATE t SET v = 2 WHERE id = 1")
	}
	until(t, s, "updates waiting", allWaiting(waiters))
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
	bg(t, ctx, other, "SELECT pg_sleep(15)")
	time.Sleep(300 * time.Millisecond) // other is the older
	exec(t, culprit, "SELECT pg_advisory_lock(1, 42)")
	bg(t, ctx, culprit, "SELECT pg_sleep(15)")
	bg(t, ctx, waiter, "SELECT pg_advisory_lock(1, 42)")
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
	s, q := queued(t, "rowqact", true)
	holder := q.holder
	g, err := guard.New(s, guard.Options{Interval: 50 * time.Millisecond, SLO: 300 * time.Millisecond, Logger: quiet,
		Protect: guard.Protection{AllowSuperuser: true}})
	if err != nil {
		t.Fatal(err)
	}
	var acted []guard.Decision
	for _, d := range runGuardUntil(t, g, 10*time.Second, func(d guard.Decision) bool {
		return d.Outcome == guard.OutcomeActed || d.Outcome == guard.OutcomeFailed
	}) {
		if d.Outcome == guard.OutcomeActed || d.Outcome == guard.OutcomeFailed {
			acted = append(acted, d)
		}
	}
	if len(acted) != 1 || acted[0].Target.Session != holder || acted[0].Root != holder {
		t.Fatalf("acted %+v, want one cancel of the holder %d", acted, holder)
	}
	if err := <-q.held; err == nil || !strings.Contains(err.Error(), "canceling statement") {
		t.Fatalf("holder's statement ended with %v, want a cancel", err)
	}
	q.release(t)
}

// A holder idle in transaction (no --terminate-idle): the acting guard
// acts on nobody in its queue, and reports the chain with its root.
func TestRowLockQueueIdleHolderLeftAlone(t *testing.T) {
	s, q := queued(t, "rowqidle", false)
	holder, waiters := q.holder, q.waiters
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
	q.release(t)
}
