package guard

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// leasing is a scripted server whose lease another replica may hold.
type leasing struct {
	*fake
	mu       sync.Mutex
	held     bool // the lease is free for this replica
	leases   int
	released bool
}

func (l *leasing) Lease(context.Context, string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leases++
	return l.held, nil
}

func (l *leasing) Release(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.released = true
	return nil
}

// TestStandbyNeverActs: a replica without the lease decides, says once
// what it would do, never acts; once it takes the lease it acts.
func TestStandbyNeverActs(t *testing.T) {
	src := &leasing{fake: &fake{obs: lockTable(nil)}}
	g, err := New(src, Options{AllDatabases: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if st := g.Status(); st.Role != RoleStandby || st.Lease != "moirai-guard:*" {
		t.Fatalf("status %+v: want a standby of lease moirai-guard:*", st)
	}
	ds := steps(t, g, 10)
	if len(src.cancelled()) != 0 {
		t.Fatalf("a standby acted: %+v", src.cancelled())
	}
	if len(ds) != 1 || ds[0].Outcome != OutcomeStandby || ds[0].Target.Session != 10 {
		t.Fatalf("standby decisions %+v: want one standby decision on 10", ds)
	}
	src.mu.Lock()
	src.held = true
	src.mu.Unlock()
	ds = steps(t, g, 2)
	if c := src.cancelled(); len(c) != 1 || c[0].Session != 10 || g.Status().Role != RoleActive {
		t.Fatalf("after taking the lease: cancels %+v, decisions %+v, role %s", c, ds, g.Status().Role)
	}
	if err := g.Release(t.Context()); err != nil || !src.released || g.Status().Role != RoleStandby {
		t.Fatalf("release: %v, released %v, role %s", err, src.released, g.Status().Role)
	}
	dry, _ := New(&leasing{fake: &fake{obs: lockTable(nil)}}, Options{AllDatabases: true, DryRun: true, Logger: quiet})
	if st := dry.Status(); st.Role != RoleDryRun || st.Lease != "" {
		t.Fatalf("dry run status %+v: want no lease", st)
	}
}

// TestReload: a reload applies between polls; one that would leave the
// guard without a scope, or change its lease, is refused and the options
// in force kept.
func TestReload(t *testing.T) {
	f := &fake{obs: lockTable(nil)}
	g, err := New(f, Options{AllDatabases: true, SLO: time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Reload(Options{AllDatabases: true, SLO: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if st := g.Status(); st.SLO != time.Second || st.Reloads != 0 {
		t.Fatalf("before the next poll: %+v, want the old options", st)
	}
	steps(t, g, 1)
	if st := g.Status(); st.SLO != 3*time.Second || st.Reloads != 1 || g.Options().Logger == nil {
		t.Fatalf("after the next poll: %+v, want slo 3s and 1 reload", st)
	}
	for name, bad := range map[string]Options{
		"no scope":      {SLO: time.Second},
		"another lease": {AllDatabases: true, Lease: "other"},
	} {
		if err := g.Reload(bad); err == nil {
			t.Errorf("%s: reload accepted", name)
		}
		steps(t, g, 1)
		if st := g.Status(); st.SLO != 3*time.Second || st.Reloads != 1 || st.ReloadError == "" {
			t.Errorf("%s: after a refused reload %+v: want slo 3s kept and the refusal said", name, st)
		}
	}
	// The reloaded guard still decides: the culprit is cancelled once.
	steps(t, g, 30)
	if c := f.cancelled(); len(c) != 1 || c[0].Session != 10 {
		t.Fatalf("cancels %+v, want one of 10", c)
	}
}

// TestStopFinishesThePoll: Stop during a poll lets it finish, and its
// actions, then Run returns nil.
func TestStopFinishesThePoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inPoll := make(chan struct{})
		base := lockTable(nil)
		f := &fake{}
		f.obs = func(n int, at time.Time) *Observation {
			if n == 6 {
				close(inPoll)
				time.Sleep(time.Second) // a slow poll, under way when Stop comes
			}
			return base(n, at)
		}
		g, _ := New(f, Options{AllDatabases: true, Interval: 250 * time.Millisecond, Logger: quiet})
		done := make(chan error)
		go func() { done <- g.Run(t.Context()) }()
		<-inPoll
		g.Stop()
		g.Stop() // twice is fine
		if err := <-done; err != nil {
			t.Fatalf("Run after Stop: %v, want nil", err)
		}
		if st := g.Status(); st.Polls != 6 {
			t.Fatalf("%d polls completed, want the one in progress finished (6)", st.Polls)
		}
	})
}
