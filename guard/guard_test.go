package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/moirai-go/moirai/resource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fake is a scripted server: obs returns the observation of poll n.
type fake struct {
	mu         sync.Mutex
	n          int
	obs        func(n int, at time.Time) *Observation
	cancels    []Target
	terminates []Target
	cancelErr  error
	panics     bool
	// down, when set, makes poll n fail as an unreachable server does.
	down func(n int) bool
	// downErr is the message of a failed poll (default: connection refused).
	downErr string
	// block, when set, makes Cancel wait for ctx (a guard killed while its
	// action is in flight) and fail with ctx's error.
	block bool
}

func (f *fake) Name() string { return "fake" }
func (f *fake) Check(context.Context) (ServerInfo, error) {
	return ServerInfo{Version: "fake 1"}, nil
}
func (f *fake) Poll(ctx context.Context) (*Observation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.panics {
		panic("view changed shape")
	}
	f.n++
	if f.down != nil && f.down(f.n) {
		if f.downErr != "" {
			return nil, errors.New(f.downErr)
		}
		return nil, errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	}
	at := epoch.Add(time.Duration(f.n) * 250 * time.Millisecond)
	return f.obs(f.n, at), nil
}
func (f *fake) Cancel(ctx context.Context, t Target) error {
	if f.block {
		<-ctx.Done()
		return ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancels = append(f.cancels, t)
	return f.cancelErr
}
func (f *fake) Terminate(_ context.Context, t Target) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.terminates = append(f.terminates, t)
	return f.cancelErr
}
func (f *fake) Close() error { return nil }

// cancelled returns the cancels so far (Run may be polling).
func (f *fake) cancelled() []Target {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.cancels)
}

// lockedBuffer is a log sink Run's goroutine writes while a test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var epoch = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// lockTable is pg-lock-table seen from outside: session 10 holds the table
// in a long transaction running a long UPDATE; sessions 20..27 (short
// pgbench-like transactions) wait for it since the culprit took it; 30 is
// an ALTER TABLE queued behind the culprit and 31 waits behind the ALTER
// (soft). Session 40 runs a short statement holding nothing contended.
func lockTable(culprit func(*Session)) func(int, time.Time) *Observation {
	return func(n int, at time.Time) *Observation {
		lockedAt := epoch.Add(-10 * time.Second)
		c := Session{ID: 10, User: "app", Application: "batch", Kind: "client", State: "active", Active: true,
			Query: "UPDATE t SET v = v + 1", XactStart: lockedAt, QueryStart: lockedAt.Add(time.Second)}
		if culprit != nil {
			culprit(&c)
		}
		obs := &Observation{At: at, Sessions: []Session{c},
			Resources: []Resource{{Name: "relation:public.t", Kind: resource.KindLock}, {Name: "relation:public.other", Kind: resource.KindLock}},
			Uses:      []Use{{Session: 10, Resource: "relation:public.t", Mode: "ExclusiveLock", Held: true}}}
		for id := int64(20); id < 28; id++ {
			start := epoch.Add(time.Duration(id-20) * 100 * time.Millisecond)
			obs.Sessions = append(obs.Sessions, Session{ID: id, User: "app", Application: "pgbench", Kind: "client", State: "active",
				Active: true, Query: "UPDATE t SET v = 1 WHERE id = 7", XactStart: start, QueryStart: start})
			obs.Uses = append(obs.Uses, Use{Session: id, Resource: "relation:public.t", Mode: "RowExclusiveLock", Waiting: true,
				BlockedBy: []int64{10}, Since: start})
		}
		obs.Sessions = append(obs.Sessions,
			Session{ID: 30, User: "dba", Kind: "client", State: "active", Active: true, Query: "ALTER TABLE t ADD c int", XactStart: epoch, QueryStart: epoch},
			Session{ID: 31, User: "app", Kind: "client", State: "active", Active: true, Query: "SELECT * FROM t", XactStart: epoch, QueryStart: epoch},
			Session{ID: 40, User: "app", Kind: "client", State: "active", Active: true, Query: "SELECT 1 FROM other", XactStart: at, QueryStart: at})
		obs.Uses = append(obs.Uses,
			Use{Session: 30, Resource: "relation:public.t", Mode: "AccessExclusiveLock", Waiting: true, BlockedBy: []int64{10}, Since: epoch},
			Use{Session: 31, Resource: "relation:public.t", Mode: "AccessShareLock", Waiting: true, BlockedBy: []int64{10}, Soft: true, Since: epoch},
			Use{Session: 40, Resource: "relation:public.other", Held: true})
		return obs
	}
}

// quiet is the options' logger of the tests.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func steps(t *testing.T, g *Guard, n int) []Decision {
	t.Helper()
	var all []Decision
	for range n {
		ds, err := g.Step(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ds...)
	}
	return all
}

func TestCancelsTheRootHolder(t *testing.T) {
	f := &fake{obs: lockTable(nil)}
	var audit bytes.Buffer
	reg := prometheus.NewRegistry()
	g, err := New(f, Options{AllDatabases: true, Audit: &audit, Registerer: reg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ds := steps(t, g, 6)
	if len(f.cancels) != 1 {
		t.Fatalf("cancels %+v, decisions %+v; want exactly one", f.cancels, ds)
	}
	c := f.cancels[0]
	if c.Session != 10 || !c.QueryStart.Equal(epoch.Add(-9*time.Second)) || !c.XactStart.Equal(epoch.Add(-10*time.Second)) {
		t.Fatalf("cancelled %+v, want the culprit's statement (session 10)", c)
	}
	if len(ds) != 1 || ds[0].Outcome != OutcomeActed || ds[0].Evaluation == nil {
		t.Fatalf("decisions %+v", ds)
	}
	var line map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(audit.Bytes()), &line); err != nil {
		t.Fatalf("audit line %q: %v", audit.String(), err)
	}
	if line["outcome"] != OutcomeActed || line["session"] != float64(10) || line["reason"] == "" {
		t.Fatalf("audit %v", line)
	}
	mfs, _ := reg.Gather()
	if len(mfs) == 0 {
		t.Fatal("no metrics registered")
	}
}

// TestNamedStatementWithJitteringStart is MariaDB's my-ddl-queue: the
// culprit runs outside a transaction, named by its QUERY_ID, and its start
// (the server's clock minus TIME_MS) moves by a fraction of a millisecond
// from poll to poll. It is one task across the polls, so the decision is
// confirmed and the culprit cancelled.
func TestNamedStatementWithJitteringStart(t *testing.T) {
	obs := lockTable(func(c *Session) {
		c.XactStart = time.Time{}
		c.Statement = 4711
	})
	f := &fake{obs: func(n int, at time.Time) *Observation {
		o := obs(n, at)
		o.Sessions[0].QueryStart = o.Sessions[0].QueryStart.Add(time.Duration(n%3) * 300 * time.Microsecond)
		return o
	}}
	g, err := New(f, Options{AllDatabases: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ds := steps(t, g, 6)
	if len(f.cancels) != 1 || f.cancels[0].Session != 10 || f.cancels[0].Statement != 4711 {
		t.Fatalf("cancels %+v, decisions %+v; want one, of statement 4711", f.cancels, ds)
	}
}

func TestDryRunNeverActs(t *testing.T) {
	f := &fake{obs: lockTable(nil)}
	g, _ := New(f, Options{AllDatabases: true, DryRun: true, Logger: quiet})
	ds := steps(t, g, 10)
	if len(f.cancels)+len(f.terminates) != 0 {
		t.Fatalf("a dry run acted: %+v", f.cancels)
	}
	if len(ds) != 1 || ds[0].Outcome != OutcomeDryRun || ds[0].Target.Session != 10 {
		t.Fatalf("dry-run decisions %+v, want one on session 10", ds)
	}
}

func TestProtectedNeverActedOn(t *testing.T) {
	for name, p := range map[string]Protection{
		"user":    {Users: []string{"app"}},
		"app":     {Applications: []string{"batch"}},
		"pattern": {Queries: regexp.MustCompile(`(?i)^update t set v = v`)},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fake{obs: lockTable(nil)}
			g, _ := New(f, Options{AllDatabases: true, Protect: p, Logger: quiet})
			steps(t, g, 10)
			for _, c := range f.cancels {
				if c.Session == 10 {
					t.Fatalf("cancelled the protected culprit")
				}
			}
		})
	}
	f := &fake{obs: lockTable(func(s *Session) { s.Superuser = true })}
	g, _ := New(f, Options{AllDatabases: true, Logger: quiet})
	steps(t, g, 10)
	if len(f.cancels) != 0 {
		t.Fatalf("cancelled %+v with a superuser culprit", f.cancels)
	}
}

func TestIdleInTransaction(t *testing.T) {
	idle := func(s *Session) {
		s.Active, s.IdleInTransaction, s.State = false, true, "idle in transaction"
	}
	f := &fake{obs: lockTable(idle)}
	g, _ := New(f, Options{AllDatabases: true, Logger: quiet})
	steps(t, g, 10)
	if len(f.cancels)+len(f.terminates) != 0 {
		t.Fatalf("acted on an idle-in-transaction culprit without --terminate-idle: %+v %+v", f.cancels, f.terminates)
	}
	f = &fake{obs: lockTable(idle)}
	g, _ = New(f, Options{AllDatabases: true, TerminateIdle: true, Logger: quiet})
	steps(t, g, 10)
	if len(f.terminates) != 1 || f.terminates[0].Session != 10 || len(f.cancels) != 0 {
		t.Fatalf("terminates %+v cancels %+v, want one terminate of 10", f.terminates, f.cancels)
	}
}

func TestVanishedIsNotRetriedElsewhere(t *testing.T) {
	f := &fake{obs: lockTable(nil), cancelErr: ErrVanished}
	g, _ := New(f, Options{AllDatabases: true, MinInterval: time.Hour, Logger: quiet})
	ds := steps(t, g, 12)
	if len(f.cancels) != 1 || f.cancels[0].Session != 10 {
		t.Fatalf("cancels %+v: want one attempt on the culprit only", f.cancels)
	}
	var skipped int
	for _, d := range ds {
		if d.Outcome == OutcomeSkipped && strings.Contains(d.Note, "vanished") {
			skipped++
		}
	}
	if skipped != 1 {
		t.Fatalf("decisions %+v", ds)
	}
}

// stepsEvery steps g n times, interval apart on the (bubble's) clock.
func stepsEvery(t *testing.T, g *Guard, n int, interval time.Duration) {
	t.Helper()
	for range n {
		if _, err := g.Step(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(interval)
	}
}

func TestRateLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Every 8 polls (2 s) show a new culprit: a new transaction of
		// session 10, each XactStart a millisecond later.
		f := &fake{}
		f.obs = func(n int, at time.Time) *Observation {
			return lockTable(func(s *Session) { s.XactStart = s.XactStart.Add(time.Duration(n/8) * time.Millisecond) })(n, at)
		}
		g, _ := New(f, Options{AllDatabases: true, MinInterval: time.Second, MaxPerMinute: 3, Logger: quiet})
		stepsEvery(t, g, 4*60, 250*time.Millisecond) // one minute of polls
		if len(f.cancels) != 3 {
			t.Fatalf("%d cancels in a minute, want 3 (the maximum)", len(f.cancels))
		}
		for i := 1; i < len(f.cancels); i++ {
			if d := f.cancels[i].XactStart.Sub(f.cancels[i-1].XactStart); d < time.Millisecond {
				t.Fatalf("two cancels of the same transaction")
			}
		}
		// The next minute allows three more.
		stepsEvery(t, g, 4*60, 250*time.Millisecond)
		if len(f.cancels) != 6 {
			t.Fatalf("%d cancels in two minutes, want 6", len(f.cancels))
		}
	})
}

// TestRateLimitsIgnoreServerClockSteps: the server's clock stepping an
// hour back and forth (every poll's At) neither lifts nor tightens the
// limits, which run on the guard's monotonic clock.
func TestRateLimitsIgnoreServerClockSteps(t *testing.T) {
	for _, step := range []time.Duration{-time.Hour, time.Hour} {
		synctest.Test(t, func(t *testing.T) {
			f := &fake{}
			f.obs = func(n int, at time.Time) *Observation {
				o := lockTable(func(s *Session) { s.XactStart = s.XactStart.Add(time.Duration(n/8) * time.Millisecond) })(n, at)
				if n%2 == 0 {
					o.At = o.At.Add(step)
				}
				return o
			}
			g, _ := New(f, Options{AllDatabases: true, MinInterval: 5 * time.Second, MaxPerMinute: 3, Logger: quiet})
			stepsEvery(t, g, 4*60, 250*time.Millisecond)
			if len(f.cancels) != 3 {
				t.Fatalf("server clock stepping %v: %d cancels in a minute, want 3", step, len(f.cancels))
			}
		})
	}
}

func TestPanickingSource(t *testing.T) {
	f := &fake{obs: lockTable(nil), panics: true}
	g, _ := New(f, Options{AllDatabases: true, Logger: quiet})
	if _, err := g.Step(t.Context()); err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("Step with a panicking source: %v", err)
	}
}

// TestRunStopsWithContext: Run polls at Interval while nothing waits, at
// AlertInterval while a session waits for a lock, and returns ctx's cause
// when ctx ends.
func TestRunStopsWithContext(t *testing.T) {
	for _, tc := range []struct {
		name    string
		waiting bool
		refresh time.Duration // Observation.Refresh
		polls   int
		cancels int
	}{
		{"quiet", false, 0, 9, 0},                                     // at 0, 250ms, …, 2s
		{"waiting", true, 0, 21, 1},                                   // at 0, 100ms, …, 2s
		{"waiting, stale views", true, 100 * time.Millisecond, 19, 1}, // at 0, 110ms, …, 1.98s
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				obs := lockTable(nil)
				f := &fake{obs: func(n int, at time.Time) *Observation {
					o := obs(n, at)
					if !tc.waiting {
						o.Uses = slices.DeleteFunc(o.Uses, func(u Use) bool { return u.Waiting })
					}
					o.Refresh = tc.refresh
					return o
				}}
				g, _ := New(f, Options{AllDatabases: true, Interval: 250 * time.Millisecond, Logger: quiet})
				ctx, cancel := context.WithCancelCause(t.Context())
				done := make(chan error)
				go func() { done <- g.Run(ctx) }()
				time.Sleep(2 * time.Second)
				synctest.Wait()
				stop := errors.New("shutdown")
				cancel(stop)
				if err := <-done; !errors.Is(err, stop) {
					t.Fatalf("Run returned %v", err)
				}
				if f.n != tc.polls {
					t.Fatalf("%d polls in 2s, want %d", f.n, tc.polls)
				}
				if len(f.cancels) != tc.cancels {
					t.Fatalf("cancels %+v, want %d", f.cancels, tc.cancels)
				}
			})
		})
	}
}

func TestExplain(t *testing.T) {
	f := &fake{obs: lockTable(func(s *Session) { s.Query = "UPDATE t SET v = v + 1 \x1b[2J" })}
	g, _ := New(f, Options{AllDatabases: true, DryRun: true, Logger: quiet})
	steps(t, g, 2)
	x := g.Explain()
	if len(x.Roots) != 1 || x.Roots[0] != 10 || x.Would != 10 {
		t.Fatalf("roots %v would %d (%s)", x.Roots, x.Would, x.WouldReason)
	}
	soft := 0
	for _, e := range x.Edges {
		if e.Soft {
			soft++
		}
		if e.Holder == 30 {
			t.Fatalf("the queued ALTER is blamed: %+v", e)
		}
	}
	if soft != 1 {
		t.Fatalf("%d soft edges, want 1", soft)
	}
	var b bytes.Buffer
	if err := x.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "\x1b") || !strings.Contains(b.String(), "would cancel session 10") {
		t.Fatalf("explain text:\n%s", b.String())
	}
	if _, err := json.Marshal(x); err != nil {
		t.Fatal(err)
	}
}

// renamed returns obs with session from renamed to to, everywhere.
func renamed(obs *Observation, from, to int64) *Observation {
	for i := range obs.Sessions {
		if obs.Sessions[i].ID == from {
			obs.Sessions[i].ID = to
		}
	}
	for i := range obs.Uses {
		u := &obs.Uses[i]
		if u.Session == from {
			u.Session = to
		}
		for j, b := range u.BlockedBy {
			if b == from {
				u.BlockedBy[j] = to
			}
		}
	}
	return obs
}

// TestServerRestart: the server goes away after one poll (its culprit
// seen once, not yet confirmed), polls fail for two seconds, and it comes back
// with its session ids reused: 10, the old culprit's id, is now an
// innocent short session, and the table's holder is a new session 50.
// The guard logs the failed polls, acts on nothing it saw before the
// restart, never signals the new 10, and cancels the new culprit once.
func TestServerRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		restarted := epoch.Add(5 * time.Second)
		f := &fake{down: func(n int) bool { return n >= 2 && n < 10 }}
		f.obs = func(n int, at time.Time) *Observation {
			if n < 10 {
				return lockTable(nil)(n, at)
			}
			o := renamed(lockTable(func(s *Session) { s.XactStart, s.QueryStart = restarted, restarted })(n, at), 10, 50)
			for i := range o.Uses {
				o.Uses[i].Since = restarted
			}
			o.Sessions = append(o.Sessions, Session{ID: 10, User: "app", Kind: "client", State: "active", Active: true,
				Query: "SELECT 1", XactStart: at, QueryStart: at})
			return o
		}
		var logged lockedBuffer
		g, _ := New(f, Options{AllDatabases: true, Interval: 250 * time.Millisecond, SLO: time.Second, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- g.Run(ctx) }()
		time.Sleep(2*time.Second + 100*time.Millisecond) // polls 1..9: one good, eight failed
		synctest.Wait()
		if c := f.cancelled(); len(c) != 0 {
			t.Fatalf("acted %+v across the outage", c)
		}
		if n := strings.Count(logged.String(), "poll failed"); n != 8 {
			t.Fatalf("%d failed polls logged, want 8:\n%s", n, logged.String())
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		stop()
		<-done
		if c := f.cancelled(); len(c) != 1 || c[0].Session != 50 || !c[0].XactStart.Equal(restarted) {
			t.Fatalf("cancels %+v, want one of the new culprit 50", c)
		}
	})
}

// TestKilledMidAction: a guard killed while its cancel is in flight
// records the action as failed and returns; a new guard on the same
// server confirms afresh and cancels the same statement, once.
func TestKilledMidAction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{obs: lockTable(nil), block: true}
		g1, _ := New(f, Options{AllDatabases: true, Interval: 250 * time.Millisecond, Logger: quiet})
		ctx, kill := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- g1.Run(ctx) }()
		time.Sleep(2 * time.Second)
		synctest.Wait() // g1 is blocked in Cancel
		kill()
		<-done
		ds := g1.Decisions()
		if len(ds) != 1 || ds[0].Outcome != OutcomeFailed || ds[0].Target.Session != 10 {
			t.Fatalf("killed guard's decisions %+v, want one failed cancel of 10", ds)
		}
		f.mu.Lock()
		f.block = false
		f.mu.Unlock()
		g2, _ := New(f, Options{AllDatabases: true, Interval: 250 * time.Millisecond, MinInterval: time.Hour, Logger: quiet})
		stepsEvery(t, g2, 12, 250*time.Millisecond)
		if c := f.cancelled(); len(c) != 1 || c[0] != ds[0].Target {
			t.Fatalf("restarted guard's cancels %+v, want the killed guard's target %+v once", c, ds[0].Target)
		}
	})
}
