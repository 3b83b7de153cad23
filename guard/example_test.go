package guard_test

import (
	"context"
	"fmt"
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
	g, err := guard.New(src, guard.Options{DryRun: true, SLO: time.Second})
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

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
