package guard

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moirai-go/moirai/cancel"
	"github.com/moirai-go/moirai/guard/internal/seeds"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
)

// rowQueue is the PostgreSQL row-lock queue seen from outside: session 10
// updated row 1 and sleeps in its transaction (active: pg_sleep); 20 is
// the queue's first waiter, which holds the row's tuple lock while it
// waits for 10's transactionid; 21 and 22 wait for the tuple lock behind
// 20. pg_blocking_pids resolves every wait to the root, 10.
func rowQueue(n int, at time.Time) *Observation {
	began := epoch.Add(-time.Second)
	obs := &Observation{At: at,
		Sessions: []Session{{ID: 10, User: "app", Kind: "client", State: "active", Active: true, Query: "SELECT pg_sleep(15)",
			XactStart: began, QueryStart: began.Add(time.Millisecond)}},
		Resources: []Resource{{Name: "tuple:db.public.t", Kind: resource.KindLock}, {Name: "transactionid:900", Kind: resource.KindLock}},
		Uses:      []Use{{Session: 10, Resource: "transactionid:900", Mode: "ExclusiveLock", Held: true}}}
	for id := int64(20); id < 23; id++ {
		start := epoch.Add(time.Duration(id-20) * 10 * time.Millisecond)
		obs.Sessions = append(obs.Sessions, Session{ID: id, User: "app", Kind: "client", State: "active", Active: true,
			Query: "UPDATE t SET v = 2 WHERE id = 1", XactStart: start, QueryStart: start})
	}
	obs.Uses = append(obs.Uses,
		Use{Session: 20, Resource: "tuple:db.public.t", Mode: "ExclusiveLock", Held: true},
		Use{Session: 20, Resource: "transactionid:900", Mode: "ShareLock", Waiting: true, BlockedBy: []int64{10}, Since: epoch},
		Use{Session: 21, Resource: "tuple:db.public.t", Mode: "ExclusiveLock", Waiting: true, BlockedBy: []int64{10}, Soft: true, Since: epoch},
		Use{Session: 22, Resource: "tuple:db.public.t", Mode: "ExclusiveLock", Waiting: true, BlockedBy: []int64{10}, Soft: true, Since: epoch})
	return obs
}

// Observation 1 (pure): the first waiter of a row queue holds a granted
// tuple lock; the guard must cancel the transaction it waits for.
func TestRowQueueBlamesTheHolderNotTheFirstWaiter(t *testing.T) {
	f := &fake{obs: rowQueue}
	g, err := New(f, Options{AllDatabases: true, SLO: 500 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ds := steps(t, g, 12)
	for _, d := range ds {
		if d.Target.Session != 10 {
			t.Errorf("decision %s on session %d (%s): a waiter; only the holder 10 may be acted on", d.Outcome, d.Target.Session, d.Reason)
		}
	}
	if c := f.cancelled(); len(c) != 1 || c[0].Session != 10 {
		t.Fatalf("cancels %+v, want one of the holder 10", c)
	}
}

// Observation 7: a short statement of the normal load, in a transaction
// that runs one at every poll, is no culprit of a loss of throughput.
func TestShortStatementIsNoServerCulprit(t *testing.T) {
	h := hogScript{rate: 2000, slowed: 1100, start: 24, hogRunning: false}
	f := &fake{obs: func(n int, at time.Time) *Observation {
		obs := h.obs(n, at)
		xact := epoch.Add(-time.Minute)
		obs.Sessions = append(obs.Sessions, Session{ID: 70, User: "app", Kind: "client", State: "Query", Active: true, Running: true,
			Statement: 70000 + int64(n), Query: "DELETE FROM sbtest1 WHERE id = 5", XactStart: xact,
			QueryStart: at.Add(-time.Millisecond), Age: time.Millisecond})
		return obs
	}}
	g, err := New(f, Options{AllDatabases: true, SLO: 500 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range steps(t, g, 48) {
		t.Errorf("decision %s on session %d (%s): no statement ran the objective", d.Outcome, d.Target.Session, d.Reason)
	}
}

// Observation 8: explain escapes what the server supplies, and the audit
// holds the statement's fingerprint, not its literals.
func TestExplainEscapesAndAuditHoldsFingerprints(t *testing.T) {
	f := &fake{obs: func(n int, at time.Time) *Observation {
		obs := lockTable(func(s *Session) { s.Query = "UPDATE t SET secret = 'hunter2' WHERE id = 12345" })(n, at)
		for i := range obs.Uses {
			obs.Uses[i].Resource = strings.ReplaceAll(obs.Uses[i].Resource, "public.t", "public.t\x1b]0;owned\x07")
			obs.Uses[i].Mode += "\x1b[2J"
		}
		for i := range obs.Resources {
			obs.Resources[i].Name = strings.ReplaceAll(obs.Resources[i].Name, "public.t", "public.t\x1b]0;owned\x07")
		}
		return obs
	}}
	var audit bytes.Buffer
	g, _ := New(f, Options{AllDatabases: true, DryRun: true, Logger: quiet, Audit: &audit})
	steps(t, g, 6)
	x := g.Explain()
	var b bytes.Buffer
	if err := x.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(b.String(), "\x1b\x07") {
		t.Errorf("explain text holds control characters:\n%q", b.String())
	}
	if audit.Len() == 0 || strings.Contains(audit.String(), "hunter2") || strings.Contains(audit.String(), "12345") {
		t.Errorf("audit holds the statement's literals (or nothing):\n%s", audit.String())
	}
}

// topology is a random wait-for graph with its ground truth: roots hold
// locks and wait for nothing; every waiter waits on one resource, behind a
// root or behind another waiter (then it queues, and its blocker, in front
// of it, holds a granted lock on the resource it waits on, as PostgreSQL's
// first row waiter holds the tuple lock); a waiter may also hold a
// resource others wait on (a chain A ← B ← C on two resources).
type topology struct {
	roots       []int64
	rootOf      map[int64][]int64 // waiter → its chain's roots
	cancellable map[int64]bool
	obs         func(at time.Time) *Observation
}

// long: the generator's cases side by side.
func randomTopology(r *rand.Rand) topology {
	tp := topology{rootOf: map[int64][]int64{}, cancellable: map[int64]bool{}}
	nroots := 1 + r.IntN(3)
	var sessions []Session
	var uses []Use
	resOf := map[int64]string{} // a root's (or a waiter's) own resource
	var waiters []int64
	id := int64(100)
	for range nroots {
		id++
		tp.roots = append(tp.roots, id)
		tp.cancellable[id] = r.IntN(4) != 0
		start := epoch.Add(-time.Duration(1+r.IntN(20)) * time.Second)
		root := Session{ID: id, User: "app", Kind: "client", State: "active", Active: true,
			Query: "UPDATE t SET v = v + 1", XactStart: start, QueryStart: start}
		if !tp.cancellable[id] {
			// Protected in one of the ways a root can be.
			switch r.IntN(4) {
			case 0:
				root.Kind = "autovacuum worker"
			case 1:
				root.Superuser = true
			case 2:
				root.User = "batch" // a protected user
			default:
				root.Active, root.IdleInTransaction, root.State = false, true, "idle in transaction"
			}
		}
		sessions = append(sessions, root)
		resOf[id] = fmt.Sprintf("tuple:db.public.t%d", id)
		uses = append(uses, Use{Session: id, Resource: resOf[id], Held: true})
	}
	nw := 2 + r.IntN(29)
	for range nw {
		id++
		// Blocked by a root, or queued behind an earlier waiter.
		var blocker int64
		if len(waiters) > 0 && r.IntN(2) == 0 {
			blocker = waiters[r.IntN(len(waiters))]
		} else {
			blocker = tp.roots[r.IntN(len(tp.roots))]
		}
		roots := []int64{blocker}
		if rt, ok := tp.rootOf[blocker]; ok {
			roots = rt
		}
		res := resOf[blocker]
		if res == "" {
			// The blocker, a waiter, holds a lock of its own that id waits on.
			res = fmt.Sprintf("row:db.public.q%d", blocker)
			resOf[blocker] = res
			uses = append(uses, Use{Session: blocker, Resource: res, Held: true})
		}
		if tp.isRoot(blocker) && len(tp.roots) > 1 && r.IntN(3) == 0 {
			// A lock two roots share (two readers), which id's exclusive
			// request waits for: both are its roots.
			other := tp.roots[r.IntN(len(tp.roots))]
			if other != blocker {
				roots = []int64{blocker, other}
				uses = append(uses, Use{Session: other, Resource: res, Held: true})
			}
		}
		tp.rootOf[id] = roots
		start := epoch.Add(-time.Duration(r.IntN(900)) * time.Millisecond)
		sessions = append(sessions, Session{ID: id, User: "app", Kind: "client", State: "active", Active: true,
			Query: "UPDATE t SET v = 2 WHERE id = 1", XactStart: start, QueryStart: start})
		uses = append(uses, Use{Session: id, Resource: res, Waiting: true, BlockedBy: roots,
			Soft: !tp.isRoot(blocker), Since: start})
		waiters = append(waiters, id)
	}
	tp.obs = func(at time.Time) *Observation {
		obs := &Observation{At: at, Sessions: sessions, Uses: uses}
		seen := map[string]bool{}
		for _, u := range uses {
			if !seen[u.Resource] {
				seen[u.Resource] = true
				obs.Resources = append(obs.Resources, Resource{Name: u.Resource, Kind: resource.KindLock})
			}
		}
		return obs
	}
	return tp
}

func (tp *topology) isRoot(id int64) bool {
	for _, r := range tp.roots {
		if r == id {
			return true
		}
	}
	return false
}

// TestRandomTopologiesBlameOnlyRoots: on random wait-for graphs with known
// roots, the builder's snapshot marks every waiter blocked, makes only
// roots the holders of a contended resource, and the library's policy
// never offers a waiter as a candidate. MOIRAI_SEED replays one graph.
//
// long: the oracle's checks, one after the other.
func TestRandomTopologiesBlameOnlyRoots(t *testing.T) {
	seeds := seeds.Of(t, 300)
	for _, seed := range seeds {
		tp := randomTopology(rand.New(rand.NewPCG(seed, 27)))
		b := NewBuilder()
		prot := Protection{Users: []string{"batch"}}
		b.Cancellable = func(s *Session) bool { p, _ := prot.Protects(s); return !p && s.Active }
		pol := cancel.NewAtropos(cancel.MultiObjective, cancel.WithConfirmation(0))
		var snap *snapshot.Snapshot
		for n := range 4 {
			snap, _ = b.Build(tp.obs(epoch.Add(time.Duration(n) * 250 * time.Millisecond)))
			pol.Observe(snap)
		}
		session := func(ti int) int64 {
			tg, _, _ := b.Target(snap.Tasks[ti].ID)
			return tg.Session
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d (replay: MOIRAI_SEED=%d): %s", seed, seed, fmt.Sprintf(format, args...))
		}
		contended := map[int32]bool{}
		for _, u := range snap.Usage {
			if u.Waiting > 0 {
				contended[u.Res] = true
			}
		}
		for ti := range snap.Tasks {
			id := session(ti)
			_, waits := tp.rootOf[id]
			if snap.Tasks[ti].Blocked != waits {
				fail("session %d: blocked %v, waits %v", id, snap.Tasks[ti].Blocked, waits)
			}
		}
		for _, u := range snap.Usage {
			if u.Held > 0 && contended[u.Res] && !tp.isRoot(session(int(u.Task))) {
				fail("session %d, a waiter, holds contended %s in the snapshot", session(int(u.Task)), snap.Resources[u.Res].Name)
			}
		}
		ev := pol.Evaluate(snap)
		for _, c := range ev.Candidates {
			ti := snap.TaskByID(c.Task)
			if id := session(ti); !tp.isRoot(id) {
				fail("waiter %d offered as a candidate", id)
			}
		}
		for _, d := range pol.Decide(snap) {
			id := session(snap.TaskByID(d.Task))
			if !tp.isRoot(id) || !tp.cancellable[id] {
				fail("decided on %d: not an actionable root", id)
			}
		}

		// The guard, acting, over the same graph: actions only on
		// actionable roots, at least one when a root is actionable, and
		// every chain of an unactionable root reported, never acted on.
		f := &fake{obs: func(_ int, at time.Time) *Observation { return tp.obs(at) }}
		g, err := New(f, Options{AllDatabases: true, SLO: 300 * time.Millisecond, Logger: quiet, Protect: prot, MinInterval: time.Nanosecond, MaxPerMinute: 100})
		if err != nil {
			t.Fatal(err)
		}
		reported := map[int64]bool{}
		for _, d := range steps(t, g, 12) {
			switch {
			case d.Outcome == OutcomeNoAction:
				if !tp.isRoot(d.Root) || tp.cancellable[d.Root] {
					fail("no-action on %d (%s): not an unactionable root", d.Root, d.Blocked)
				}
				reported[d.Root] = true
			case !tp.isRoot(d.Target.Session) || !tp.cancellable[d.Target.Session]:
				fail("%s %s on %d: not an actionable root", d.Action, d.Outcome, d.Target.Session)
			}
		}
		actionable := 0 // roots some session waits for, that can be acted on
		for _, roots := range tp.rootOf {
			for _, rt := range roots {
				if tp.cancellable[rt] {
					actionable++
				}
			}
		}
		if cancels := f.cancelled(); actionable > 0 && len(cancels) == 0 {
			fail("no action, with %d actionable roots", actionable)
		}
		for _, roots := range tp.rootOf {
			for _, rt := range roots {
				if !tp.cancellable[rt] && !reported[rt] {
					fail("the chain of the unactionable root %d is not reported", rt)
				}
			}
		}
	}
}

// When the root cannot be acted on, the guard acts on nobody in its
// chain, and says why once: a no-action decision naming the root, in the
// decisions, the audit, the explanation and the metric.
func TestUnactionableRootLeavesTheChainAlone(t *testing.T) {
	for _, tc := range []struct {
		name    string
		root    func(*Session)
		opt     Options
		blocked string
	}{
		{"idle in transaction", func(s *Session) { s.Active, s.IdleInTransaction, s.State = false, true, "idle in transaction" }, Options{AllDatabases: true}, BlockedIdle},
		{"protected user", func(s *Session) { s.User = "batch" }, Options{AllDatabases: true, Protect: Protection{Users: []string{"batch"}}}, BlockedProtected},
		{"superuser", func(s *Session) { s.Superuser = true }, Options{AllDatabases: true}, BlockedSuperuser},
		{"another database", func(s *Session) { s.Database = "other" }, Options{Database: "db"}, BlockedScope},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fake{obs: func(n int, at time.Time) *Observation {
				obs := rowQueue(n, at)
				for i := range obs.Sessions {
					obs.Sessions[i].Database = "db"
				}
				tc.root(&obs.Sessions[0])
				return obs
			}}
			var audit bytes.Buffer
			reg := prometheus.NewRegistry()
			opt := tc.opt
			opt.SLO, opt.Logger, opt.Audit, opt.Registerer = 500*time.Millisecond, quiet, &audit, reg
			g, err := New(f, opt)
			if err != nil {
				t.Fatal(err)
			}
			ds := steps(t, g, 16)
			if len(f.cancelled()) != 0 || len(f.terminates) != 0 {
				t.Fatalf("acted: cancels %+v terminates %+v", f.cancelled(), f.terminates)
			}
			// Two chains: 20 waits for 10's transactionid, 21 and 22
			// for the tuple lock behind 20; each reported once.
			waiters := 0
			for _, d := range ds {
				if d.Outcome != OutcomeNoAction || d.Root != 10 || d.Blocked != tc.blocked {
					t.Fatalf("decision %+v: want a no-action on the root 10 (%s)", d, tc.blocked)
				}
				waiters += len(d.Waiters)
			}
			if len(ds) != 2 || waiters != 3 {
				t.Fatalf("decisions %+v: want two chains, 3 waiters", ds)
			}
			if !strings.Contains(audit.String(), `"outcome":"no-action"`) || !strings.Contains(audit.String(), `"blocked":"`+tc.blocked+`"`) {
				t.Errorf("audit: %s", audit.String())
			}
			x := g.Explain()
			var b bytes.Buffer
			x.WriteText(&b)
			if x.Would != 0 || !strings.Contains(b.String(), "no action on tuple:db.public.t (root 10, 2 waiting)") {
				t.Errorf("explain:\n%s", b.String())
			}
			mfs, _ := reg.Gather()
			found := false
			for _, mf := range mfs {
				if mf.GetName() == "moirai_guard_chains_not_acted_total" {
					for _, m := range mf.GetMetric() {
						for _, l := range m.GetLabel() {
							found = found || l.GetName() == "reason" && l.GetValue() == tc.blocked && m.GetCounter().GetValue() == 2
						}
					}
				}
			}
			if !found {
				t.Error("moirai_guard_chains_not_acted_total does not count the chain")
			}
		})
	}
}

// A chain that crosses the scope: the root is in the guard's database,
// one of its waiters in another. The guard acts on nothing in it and
// reports it; a chain wholly in another database is not reported.
func TestChainCrossingTheScopeIsReported(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dbs      map[int64]string
		reported bool
	}{
		{"a waiter outside", map[int64]string{10: "db", 20: "db", 21: "other", 22: "db"}, true},
		{"wholly outside", map[int64]string{10: "other", 20: "other", 21: "other", 22: "other"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fake{obs: func(n int, at time.Time) *Observation {
				obs := rowQueue(n, at)
				for i := range obs.Sessions {
					obs.Sessions[i].Database = tc.dbs[obs.Sessions[i].ID]
				}
				return obs
			}}
			g, err := New(f, Options{SLO: 500 * time.Millisecond, Logger: quiet, Database: "db"})
			if err != nil {
				t.Fatal(err)
			}
			ds := steps(t, g, 16)
			if len(f.cancelled()) != 0 {
				t.Fatalf("acted: %+v", f.cancelled())
			}
			scoped := 0
			for _, d := range ds {
				if d.Outcome != OutcomeNoAction || d.Root != 10 || d.Blocked != BlockedScope {
					t.Fatalf("decision %+v: want a no-action on the root 10 (scope)", d)
				}
				scoped++
			}
			if (scoped > 0) != tc.reported {
				t.Fatalf("%d chains reported, want reported %v", scoped, tc.reported)
			}
		})
	}
}

// scopedFake is a source connected to a database (or to none).
type scopedFake struct {
	fake
	db string
}

func (s *scopedFake) Database() string { return s.db }

// The scope defaults to the source's database; a source connected to none
// is refused unless the guard may act in every database.
func TestScopeDefaultsToTheSourceDatabase(t *testing.T) {
	scope := func(src Source, opt Options) (string, error) {
		opt.Logger = quiet
		g, err := New(src, opt)
		if err != nil {
			return "", err
		}
		return g.Scope(), nil
	}
	for _, tc := range []struct {
		db, opt string
		all     bool
		want    string
	}{
		{db: "app", want: "app"},
		{db: "", all: true, want: ""},
		{db: "app", opt: "other", want: "other"},
	} {
		got, err := scope(&scopedFake{db: tc.db}, Options{Database: tc.opt, AllDatabases: tc.all})
		if err != nil || got != tc.want {
			t.Errorf("source %q, options %q/%v: scope %q, err %v; want %q", tc.db, tc.opt, tc.all, got, err, tc.want)
		}
	}
	if _, err := scope(&scopedFake{}, Options{}); err == nil || !strings.Contains(err.Error(), "all-databases") {
		t.Fatalf("New with no database: err %v, want one naming --all-databases", err)
	}
}

// A source that does not say which database it guards (a wrapper that
// does not implement Scoped) is refused unless the scope is named or
// every database allowed: it never silently acts everywhere.
func TestUnscopedSourceFailsClosed(t *testing.T) {
	f := &fake{obs: func(int, time.Time) *Observation { return &Observation{} }}
	if _, err := New(f, Options{Logger: quiet}); err == nil || !strings.Contains(err.Error(), "AllDatabases") {
		t.Fatalf("New with an unscoped source: err %v, want one naming AllDatabases", err)
	}
	for _, opt := range []Options{{Database: "app"}, {AllDatabases: true}} {
		opt.Logger = quiet
		g, err := New(f, opt)
		if err != nil || g.Scope() != opt.Database {
			t.Errorf("New with %+v: scope %q, err %v; want %q", opt, g.Scope(), err, opt.Database)
		}
	}
}
