package locktopo

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/moirai-go/moirai/guard"
)

// TestGenerateReplays: a seed always gives the same scenario, and every
// scenario's ground truth is consistent: each contended object has a
// root and a waiter, each waiter's object has a root.
func TestGenerateReplays(t *testing.T) {
	seen := map[string]int{}
	for _, server := range []string{Postgres, MySQL} {
		for i := range 2000 {
			seed := ScenarioSeed(7, i)
			a, b := Generate(server, seed), Generate(server, seed)
			if a.String() != b.String() || len(a.Steps) != len(b.Steps) {
				t.Fatalf("seed %d: two scenarios:\n%s\n%s", seed, a, b)
			}
			seen[server+"/"+a.Topology]++
			objs := a.Objects()
			waiters := map[int]int{}
			for _, s := range a.Sessions {
				if s.Role == RoleWaiter {
					waiters[s.Object]++
				}
			}
			for o, n := range waiters {
				if len(objs[o]) == 0 || n == 0 {
					t.Fatalf("%s: object %d has %d roots and %d waiters", a, o, len(objs[o]), n)
				}
			}
			for o := range objs {
				if waiters[o] == 0 {
					t.Fatalf("%s: object %d has roots and no waiter", a, o)
				}
			}
			if n := len(a.Sessions); n < 3 || n > 40 {
				t.Fatalf("%s: %d sessions", a, n)
			}
		}
	}
	for _, server := range []string{Postgres, MySQL} {
		for _, topo := range Topologies(server) {
			if seen[server+"/"+topo] == 0 {
				t.Errorf("%s/%s never generated", server, topo)
			}
		}
	}
}

// TestWrongness: every action but one on an actionable root is wrong.
func TestWrongness(t *testing.T) {
	sc := &Scenario{Sessions: []Session{
		{Role: RoleRoot, Kind: RootActive}, {Role: RoleRoot, Kind: RootIdle}, {Role: RoleWaiter},
		{Role: RoleBystander}, {Role: RoleRoot, Kind: RootSuperuser}, {Role: RoleRoot, Kind: RootOtherDB},
	}}
	for i, want := range []bool{false, true, true, true, true, true} {
		if got := wrongness(sc, i, true) != ""; got != want {
			t.Errorf("session %d: wrong %v, want %v", i, got, want)
		}
	}
	if wrongness(sc, 0, false) == "" {
		t.Error("an action outside the scenario is not wrong")
	}
	sc.TerminateIdle = true
	if wrongness(sc, 1, true) != "" {
		t.Error("terminating an idle root with terminate-idle on is wrong")
	}
}

// TestLocktopo is the CI-sized run: LOCKTOPO_SCENARIOS (default 44)
// scenarios per server from seed LOCKTOPO_SEED (default 1) against the
// local servers, or only LOCKTOPO_REPLAY's seeds (comma-separated). It
// skips without the servers, except under CI=true.
func TestLocktopo(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no servers")
	}
	opt := Options{Scenarios: 44, Seed: 1, Log: testWriter{t}}
	if v := os.Getenv("LOCKTOPO_SCENARIOS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("LOCKTOPO_SCENARIOS=%q", v)
		}
		opt.Scenarios = n
	}
	if v := os.Getenv("LOCKTOPO_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("LOCKTOPO_SEED=%q", v)
		}
		opt.Seed = n
	}
	if v := os.Getenv("LOCKTOPO_REPLAY"); v != "" {
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil {
				t.Fatalf("LOCKTOPO_REPLAY=%q", v)
			}
			opt.Replay = append(opt.Replay, n)
		}
	}
	if v := os.Getenv("LOCKTOPO_REPLICAS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("LOCKTOPO_REPLICAS=%q", v)
		}
		opt.Replicas = n
	}
	if v := os.Getenv("LOCKTOPO_SERVERS"); v != "" {
		opt.Servers = strings.Split(v, ",")
	}
	if !reachable(t, opt) {
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	start := time.Now()
	rep, err := Run(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	WriteTable(&b, Counts(rep.Results))
	t.Logf("seed %d, %v:\n%s", opt.Seed, time.Since(start).Round(time.Second), b.String())
	for _, c := range Counts(rep.Results) {
		if c.Topology != "all" {
			continue
		}
		if c.WrongActions > 0 {
			t.Errorf("%s: %d wrong actions in %d scenarios (seeds above)", c.Server, c.WrongActions, c.WrongScenarios)
		}
		if c.Doubles > 0 {
			t.Errorf("%s: %d sessions acted on twice (seeds above)", c.Server, c.Doubles)
		}
		// Roots acted on in time (the objective plus two polls) in ≥ 99 %
		// of the actionable scenarios is the long run's target (moirai
		// bench run --suite locktopo --scenarios 500 fails below it, on
		// a server nothing else uses). Here, go test runs the other
		// packages' database tests beside this one on the same servers
		// (their sessions make id-less lock holders and metadata-lock
		// holders ambiguous, and load delays polls), so a missed root is
		// reported; a wrong action, which nothing excuses, fails.
		if c.RootActed+c.RootLate < c.Actionable {
			t.Logf("%s: roots acted on in %d of %d actionable scenarios (%d in time; seeds above)", c.Server, c.RootActed+c.RootLate, c.Actionable, c.RootActed)
		} else if c.RootLate > 0 {
			t.Logf("%s: %d of %d actionable scenarios' roots acted on late", c.Server, c.RootLate, c.Actionable)
		}
		if c.BuildFailed > 0 {
			t.Errorf("%s: %d scenarios could not be built", c.Server, c.BuildFailed)
		}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// reachable reports whether the servers of opt answer on their ports; if
// not, it skips t (fails it under CI=true).
func reachable(t *testing.T, opt Options) bool {
	t.Helper()
	opt.defaults()
	for _, s := range opt.Servers {
		addr := "127.0.0.1:5432"
		if s == MySQL {
			addr = "127.0.0.1:3306"
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true and %s unreachable: %v", s, err)
			}
			t.Skipf("%s unreachable (%v)", s, err)
			return false
		}
		c.Close()
	}
	return true
}

func init() {
	// A killed connection's driver logs "unexpected EOF": the scenarios
	// kill their sessions on purpose.
	mysql.SetLogger(log.New(io.Discard, "", 0))
}

// fakeSource counts the actions it carried out.
type fakeSource struct {
	guard.Source // nil: only Cancel and Terminate are called
	done         []int64
}

func (f *fakeSource) Cancel(_ context.Context, t guard.Target) error {
	f.done = append(f.done, t.Session)
	return nil
}

func (f *fakeSource) Terminate(_ context.Context, t guard.Target) error {
	f.done = append(f.done, -t.Session)
	return nil
}

// TestRecorderActsOnlyOnItsOwn: the guard's source in a scenario records
// every action, and carries out only those on the scenario's sessions.
func TestRecorderActsOnlyOnItsOwn(t *testing.T) {
	f := &fakeSource{}
	r := &recorder{Source: f, mine: map[int64]int{10: 0}, acts: &actions{}}
	ctx := context.Background()
	if err := r.Cancel(ctx, guard.Target{Session: 99}); !errors.Is(err, errNotMine) {
		t.Errorf("cancel of another session: %v, want errNotMine", err)
	}
	if err := r.Terminate(ctx, guard.Target{Session: 98}); !errors.Is(err, errNotMine) {
		t.Errorf("terminate of another session: %v, want errNotMine", err)
	}
	if err := r.Cancel(ctx, guard.Target{Session: 10}); err != nil {
		t.Fatal(err)
	}
	if len(f.done) != 1 || f.done[0] != 10 {
		t.Errorf("carried out %v, want only the cancel of 10", f.done)
	}
	if got := r.snapshot(); len(got) != 3 || got[0].session != 99 || got[1].verb != "terminate" {
		t.Errorf("recorded %+v, want all three", got)
	}
	if r.Database() != "" {
		t.Errorf("a source that names no database gave %q", r.Database())
	}
}

// TestRootsActed: a scenario's actionable roots are done when every root
// of its fully actionable objects was acted on; the others don't count.
func TestRootsActed(t *testing.T) {
	sc := &Scenario{Sessions: []Session{
		{Role: RoleRoot, Kind: RootActive, Object: 0}, {Role: RoleRoot, Kind: RootActive, Object: 0},
		{Role: RoleRoot, Kind: RootProtUser, Object: 1}, {Role: RoleWaiter, Object: 0}, {Role: RoleWaiter, Object: 1},
	}}
	t0 := time.Now()
	ids := map[int64]int{100: 0, 101: 1, 102: 2, 103: 3, 104: 4}
	acts := []recorded{{at: t0.Add(300 * time.Millisecond), session: 100}}
	if _, ok := rootsActed(sc, acts, ids, t0); ok {
		t.Error("one of two shared roots acted on: not done")
	}
	acts = append(acts, recorded{at: t0.Add(1400 * time.Millisecond), session: 101})
	if last, ok := rootsActed(sc, acts, ids, t0); !ok || last != 1400*time.Millisecond {
		t.Errorf("both roots: %v %v, want done at 1.4s", last, ok)
	}
	if got := sc.ActionableObjects(); len(got) != 1 || got[0] != 0 {
		t.Errorf("actionable objects %v, want [0]", got)
	}
}
