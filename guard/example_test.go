package guard_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/moirai-go/moirai/guard"
	"github.com/moirai-go/moirai/resource"
)

// Protection names the sessions the guard never acts on, and says why.
func ExampleProtection() {
	p := guard.Protection{Users: []string{"backup"}, Queries: regexp.MustCompile(`(?i)^vacuum`)}
	for _, s := range []guard.Session{
		{ID: 1, User: "app", Kind: "client", Query: "UPDATE t SET v = 1"},
		{ID: 2, User: "backup", Kind: "client", Query: "COPY t TO STDOUT"},
		{ID: 3, User: "app", Kind: "client", Query: "VACUUM FULL t"},
		{ID: 4, User: "postgres", Kind: "client", Superuser: true},
		{ID: 5, User: "postgres", Kind: "autovacuum worker"},
	} {
		protected, why := p.Protects(&s)
		fmt.Println(s.ID, protected, why != "")
	}
	// Output:
	// 1 false false
	// 2 true true
	// 3 true true
	// 4 true true
	// 5 true true
}

// server is a scripted Source: session 10 holds a table in a long
// transaction, session 20 has waited for it since the start.
type server struct {
	polls   int
	start   time.Time
	actions []guard.Target
}

func (s *server) Name() string { return "example" }
func (s *server) Check(context.Context) (guard.ServerInfo, error) {
	return guard.ServerInfo{Version: "1"}, nil
}
func (s *server) Close() error { return nil }
func (s *server) Cancel(_ context.Context, t guard.Target) error {
	s.actions = append(s.actions, t)
	return nil
}
func (s *server) Terminate(_ context.Context, t guard.Target) error {
	s.actions = append(s.actions, t)
	return nil
}
func (s *server) Poll(context.Context) (*guard.Observation, error) {
	s.polls++
	at := s.start.Add(time.Duration(s.polls) * 250 * time.Millisecond)
	began := s.start.Add(-5 * time.Second)
	return &guard.Observation{At: at, Skipped: map[string]int{},
		Sessions: []guard.Session{
			{ID: 10, User: "app", Kind: "client", State: "active", Active: true, Query: "UPDATE t SET v = v + 1", XactStart: began, QueryStart: began},
			{ID: 20, User: "app", Kind: "client", State: "active", Active: true, Query: "UPDATE t SET v = 1 WHERE id = 7", XactStart: s.start, QueryStart: s.start},
		},
		Resources: []guard.Resource{{Name: "relation:public.t", Kind: resource.KindLock}},
		Uses: []guard.Use{
			{Session: 10, Resource: "relation:public.t", Mode: "ExclusiveLock", Held: true},
			{Session: 20, Resource: "relation:public.t", Mode: "RowExclusiveLock", Waiting: true, BlockedBy: []int64{10}, Since: s.start},
		}}, nil
}

// A guard in dry run decides which session to cancel, and records why,
// without acting. guard.Open(ctx, dsn) opens the real sources
// (postgres://, mysql://).
func ExampleGuard() {
	src := &server{start: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	g, err := guard.New(src, guard.Options{AllDatabases: true, DryRun: true, SLO: time.Second})
	if err != nil {
		panic(err)
	}
	for range 8 {
		for _, d := range must(g.Step(context.Background())) {
			fmt.Println(d.Outcome, d.Action, d.Target.Session)
		}
	}
	fmt.Println(len(src.actions), "actions")
	// Output:
	// dry-run cancel 10
	// 0 actions
}

// quiet is the examples' logger.
var quiet = slog.New(slog.DiscardHandler)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Explain shows who waits for whom in the last poll and what the guard
// would do now: `moirai guard explain` prints it.
func ExampleExplanation() {
	src := &server{start: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	g, _ := guard.New(src, guard.Options{AllDatabases: true, DryRun: true, Logger: quiet})
	// One poll: the guard confirms its choice on the next (and would not
	// offer again a session it chose).
	must(g.Step(context.Background()))
	x := g.Explain()
	for _, e := range x.Edges {
		fmt.Println(e.Waiter, "waits for", e.Holder, "on", e.Resource)
	}
	fmt.Println("roots", x.Roots, "sessions", len(x.Sessions), "would cancel", x.Would)
	// Output:
	// 20 waits for 10 on relation:public.t
	// roots [10] sessions 2 would cancel 10
}

// Options: the poll interval, the wait tolerated before looking for a
// culprit, dry run, protection, and the rate limits.
func ExampleOptions() {
	src := &server{start: time.Now()}
	g, err := guard.New(src, guard.Options{
		AllDatabases: true, // the example's source names no database (see Scoped)
		Interval:     500 * time.Millisecond,
		SLO:          2 * time.Second,
		DryRun:       true,
		Protect:      guard.Protection{Users: []string{"replicator"}},
		MinInterval:  5 * time.Second,
		MaxPerMinute: 3,
		Logger:       quiet,
	})
	fmt.Println(err, g != nil)
	// Output: <nil> true
}

// A Source is what a server looks like to the guard; Register makes a DSN
// scheme open one (guard/postgres and guard/mysql register theirs), Open
// picks it by the DSN.
func ExampleOpener() {
	guard.Register("example", func(ctx context.Context, dsn string) (guard.Source, error) {
		return &server{start: time.Now()}, nil
	})
	src, err := guard.Open(context.Background(), "example://anything")
	fmt.Println(err, src.Name())
	_, err = guard.Open(context.Background(), "oracle://db")
	fmt.Println(err != nil)
	// Output:
	// <nil> example
	// true
}

// A Builder turns a source's Observation into the snapshot the policy
// reads (the same policy code as the library's), and maps the policy's
// tasks back to sessions and the statements to act on.
func ExampleBuilder() {
	src := &server{start: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	b := guard.NewBuilder()
	obs := must(src.Poll(context.Background()))
	snap, ignored := b.Build(obs)
	fmt.Println(len(snap.Tasks), len(snap.Resources), ignored)
	for _, t := range snap.Tasks {
		target, s, _ := b.Target(t.ID)
		fmt.Println(target.Session, s.User, target.Query)
	}
	// Output:
	// 2 1 0
	// 10 app UPDATE t SET v = v + 1
	// 20 app UPDATE t SET v = 1 WHERE id = 7
}

// An Observation is one poll: sessions, the resources they hold or wait
// for, and the uses linking them.
func ExampleObservation() {
	obs := must((&server{start: time.Now()}).Poll(context.Background()))
	for _, u := range obs.Uses {
		fmt.Println(u.Session, u.Resource, u.Held, u.Waiting, u.BlockedBy)
	}
	// Output:
	// 10 relation:public.t true false []
	// 20 relation:public.t false true [10]
}

// A Session is a backend (PostgreSQL) or a connection thread (MariaDB).
func ExampleSession() {
	s := guard.Session{ID: 4242, User: "app", Kind: "client", State: "active", Active: true, Query: "SELECT pg_sleep(60)"}
	p := guard.Protection{}
	protected, _ := p.Protects(&s)
	fmt.Println(s.ID, protected)
	// Output: 4242 false
}

// A Use says a session holds, or waits for, a resource (BlockedBy the
// sessions it waits for, Soft when it queues behind another waiter).
func ExampleUse() {
	u := guard.Use{Session: 31, Resource: "relation:public.t", Mode: "AccessShareLock", Waiting: true, BlockedBy: []int64{10}, Soft: true}
	fmt.Println(u.Waiting, u.Soft, u.BlockedBy)
	// Output: true true [10]
}

// A Resource is a lock (relation, row, transaction, metadata lock, global
// read lock) or a counted resource (connection slots, the buffer pool).
func ExampleResource() {
	r := guard.Resource{Name: "relation:public.orders", Kind: resource.KindLock}
	fmt.Println(r.Name, r.Kind)
	// Output: relation:public.orders lock
}

// A Target names the statement to cancel precisely enough that the cancel
// cannot hit another one: the pid with its query_start and xact_start on
// PostgreSQL, the QUERY_ID on MariaDB.
func ExampleTarget() {
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	t := guard.Target{Session: 10, QueryStart: at, XactStart: at.Add(-time.Second), Query: "UPDATE t SET v = v + 1"}
	fmt.Println(t.Session, t.QueryStart.Format(time.TimeOnly))
	// Output: 10 12:00:00
}

// Decisions are recorded with their outcome, target and reasons (also as
// JSON lines with Options.Audit).
func ExampleDecision() {
	src := &server{start: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	g, _ := guard.New(src, guard.Options{AllDatabases: true, DryRun: true, Logger: quiet})
	for range 8 {
		must(g.Step(context.Background()))
	}
	for _, d := range g.Decisions() {
		fmt.Println(d.Action, d.Outcome, d.Target.Session, d.User, d.Reason != "")
	}
	// Output: cancel dry-run 10 app true
}

// SessionInfo is a session as an explanation shows it.
func ExampleSessionInfo() {
	src := &server{start: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	g, _ := guard.New(src, guard.Options{AllDatabases: true, DryRun: true, Logger: quiet})
	must(g.Step(context.Background()))
	si := g.Explain().Sessions[10]
	fmt.Println(si.User, si.State, si.Query)
	// Output: app active UPDATE t SET v = v + 1
}

// Check reports the server's version, what the source will use, and
// whether the guard's role lacks privileges (a PrivilegeError).
func ExampleServerInfo() {
	info := must((&server{}).Check(context.Background()))
	fmt.Println(info.Version, info.Superuser)
	// Output: 1 false
}

// A PrivilegeError names what the guard's role lacks and the GRANT that
// fixes it; moirai guard stops on it unless --skip-privilege-check.
func ExamplePrivilegeError() {
	var err error = &guard.PrivilegeError{User: "guard", Missing: []string{"pg_signal_backend"}, Hint: "GRANT pg_signal_backend TO guard"}
	var pe *guard.PrivilegeError
	fmt.Println(errors.As(err, &pe), pe.Missing)
	// Output: true [pg_signal_backend]
}

// A Source is one server: the scripted one above, or guard/postgres and
// guard/mysql.
func ExampleSource() {
	var src guard.Source = &server{start: time.Now()}
	obs, err := src.Poll(context.Background())
	fmt.Println(src.Name(), err, len(obs.Sessions))
	// Output: example <nil> 2
}

// An Edge is one "waits for" of the wait-for graph; Soft marks a session
// queued behind another waiter (a lock queue behind a waiting DDL),
// attributed to the root holder.
func ExampleEdge() {
	e := guard.Edge{Waiter: 31, Holder: 10, Resource: "relation:public.t", Mode: "AccessShareLock", Soft: true, Waited: 2 * time.Second}
	fmt.Println(e.Waiter, "waits for", e.Holder, "soft:", e.Soft, e.Waited)
	// Output: 31 waits for 10 soft: true 2s
}
