// Package replicas tests two replicas of an acting guard on one real
// server: whatever happens to the active one — killed (its connections
// closed, as when its process dies) or cut off (its lease's connection
// ended by the server) at any point of an incident — no incident is acted
// on twice, and the standby takes over and acts.
//
// Each source's test gives a [Server]: how to open a replica's source,
// build an incident (a holder running a statement, waiters queued behind
// it) and cut a source's lease connection. [Run] steps both replicas in
// turn, one poll each per interval, in one goroutine (so the order of
// their polls is known), and counts.
package replicas

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/moirai-go/moirai/guard"
)

// Server is what a source's test provides.
type Server struct {
	// Open opens a replica's source, scoped to the test's database.
	Open func(ctx context.Context) (guard.Source, error)
	// Incident builds an incident: a holder running a statement, waiters
	// queued behind it, all waiting when it returns. It returns the
	// holder's session; cleanup ends its sessions.
	Incident func(ctx context.Context, t *testing.T) (holder int64, cleanup func())
	// Cut ends src's lease connection on the server (a replica that lost
	// its connection while alive).
	Cut func(ctx context.Context, src guard.Source) error
	// Interval is the guard's poll interval.
	Interval time.Duration
}

// ownOnly is a replica's source as the test gives it: it carries out
// only actions on the incident's holder (never on another test's
// session of the shared server), and forwards the lease.
type ownOnly struct {
	guard.Source
	mine *sync.Map
}

func (o ownOnly) Database() string { return o.Source.(guard.Scoped).Database() }

func (o ownOnly) Lease(ctx context.Context, name string) (bool, error) {
	return o.Source.(guard.Leaser).Lease(ctx, name)
}

func (o ownOnly) Release(ctx context.Context) error { return o.Source.(guard.Leaser).Release(ctx) }

func (o ownOnly) Cancel(ctx context.Context, t guard.Target) error {
	if _, ok := o.mine.Load(t.Session); !ok {
		return fmt.Errorf("replicas: refused: session %d is not the test's", t.Session)
	}
	return o.Source.Cancel(ctx, t)
}

func (o ownOnly) Terminate(ctx context.Context, t guard.Target) error {
	if _, ok := o.mine.Load(t.Session); !ok {
		return fmt.Errorf("replicas: refused: session %d is not the test's", t.Session)
	}
	return o.Source.Terminate(ctx, t)
}

// Mode is what happens to the active replica.
type Mode string

const (
	Kill Mode = "kill" // its source closed: the process died
	Cut  Mode = "cut"  // its lease connection ended by the server; it goes on
)

// Result is one run.
type Result struct {
	// DoubleActions counts the incidents acted on by more than one
	// action (both replicas, or one twice).
	DoubleActions int
	// Acted: the incident's holder was acted on (by either replica).
	Acted bool
	// ActedBy is the replica that acted ("A", "B").
	ActedBy string
	// TakeoverPolls is the polls from the fault until a replica held the
	// lease again (-1: never): B, or A when it was cut off and took it
	// back first; Holder says which.
	TakeoverPolls int
	Holder        string
	// ActPolls is the standby's polls from the first it could act at
	// (the later of the fault and the first poll at which the active
	// would have) to its action (-1: it did not act; 0 when A acted).
	ActPolls int
}

// long: one loop steps both replicas, applies the fault and counts.
//
// Run runs one incident with two replicas, A (which takes the lease
// first) and B, and applies mode to A at its poll faultAt (counted from
// the incident's start; a fault after A acted is a fault mid-incident
// too: the waiters are still draining).
func Run(t *testing.T, srv Server, mode Mode, faultAt int) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The tests' sessions are a superuser's; the wrapper below keeps the
	// guard's actions to the incident's own sessions.
	opt := guard.Options{Interval: srv.Interval, AlertInterval: srv.Interval, SLO: 4 * srv.Interval, MinInterval: srv.Interval, Logger: quiet,
		Protect: guard.Protection{AllowSuperuser: true}}
	var holder int64
	var mine sync.Map
	var srcs [2]guard.Source
	var gs [2]*guard.Guard
	for i := range srcs {
		src, err := srv.Open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		srcs[i] = src
		defer src.Close()
		if gs[i], err = guard.New(ownOnly{src, &mine}, opt); err != nil {
			t.Fatal(err)
		}
	}
	// A takes the lease (the last run's holder may take a moment to be
	// gone from the server), B stands by.
	for range 20 {
		if _, err := gs[0].Step(ctx); err != nil {
			t.Fatal(err)
		}
		if gs[0].Status().Role == guard.RoleActive {
			break
		}
		time.Sleep(srv.Interval)
	}
	if _, err := gs[1].Step(ctx); err != nil {
		t.Fatal(err)
	}
	if a, b := gs[0].Status().Role, gs[1].Status().Role; a != guard.RoleActive || b != guard.RoleStandby {
		t.Fatalf("roles A %s, B %s: want active, standby", a, b)
	}
	holder, cleanup := srv.Incident(ctx, t)
	defer cleanup()
	mine.Store(holder, true)
	res := Result{TakeoverPolls: -1, ActPolls: -1}
	acts := map[string]int{} // by statement
	aAlive := true
	faultB := -1 // B's polls before the fault
	var faultTime time.Time
	wouldAt := -1 // B's poll that first would have acted (standby) or acted
	bPolls := 0
	for poll := 0; poll < 60; poll++ {
		if aAlive && faultB < 0 && poll == faultAt {
			faultB, faultTime = bPolls, time.Now()
			switch mode {
			case Kill:
				srcs[0].Close()
				aAlive = false
			case Cut:
				if err := srv.Cut(ctx, srcs[0]); err != nil {
					t.Fatalf("cutting A's lease connection: %v", err)
				}
			}
		}
		for i, g := range gs {
			if i == 0 && !aAlive {
				continue
			}
			ds, err := g.Step(ctx)
			if err != nil && ctx.Err() != nil {
				t.Fatal(err)
			}
			if err != nil {
				t.Logf("poll %d replica %c: %v", poll, 'A'+i, err)
			}
			if i == 1 {
				bPolls++
			}
			// The lease is held again: by B, or by A (cut, alive) once it
			// has lost it and taken it back.
			if st := g.Status(); faultB >= 0 && res.TakeoverPolls < 0 && st.Role == guard.RoleActive && st.RoleSince.After(faultTime) {
				res.TakeoverPolls, res.Holder = bPolls-faultB, string(rune('A'+i))
				if i == 0 {
					res.TakeoverPolls++ // A polls before B in a round
				}
			}
			for _, d := range ds {
				t.Logf("poll %d replica %c: %s %s session %d (holder %d): %s %s", poll, 'A'+i, d.Outcome, d.Action, d.Target.Session, holder, d.Note, d.Reason)
				if i == 1 && wouldAt < 0 && (d.Outcome == guard.OutcomeStandby || d.Outcome == guard.OutcomeActed) && d.Target.Session == holder {
					wouldAt = bPolls
				}
				if d.Outcome != guard.OutcomeActed {
					continue
				}
				acts[fmt.Sprint(d.Target.Session, d.Target.Statement, d.Target.QueryStart.Format(time.RFC3339Nano))]++
				if d.Target.Session != holder || res.Acted {
					continue
				}
				res.Acted, res.ActedBy, res.ActPolls = true, string(rune('A'+i)), 0
				if i == 1 {
					res.ActPolls = bPolls - max(wouldAt, faultB+1) + 1
				}
			}
		}
		if res.Acted && faultB >= 0 && res.TakeoverPolls >= 0 {
			break
		}
		time.Sleep(srv.Interval)
	}
	for _, n := range acts {
		if n > 1 {
			res.DoubleActions++
		}
	}
	if len(acts) > 1 {
		res.DoubleActions += len(acts) - 1 // one incident, one holder: more than one statement acted on
	}
	return res
}
