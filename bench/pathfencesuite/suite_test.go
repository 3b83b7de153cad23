package pathfencesuite

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"

	"github.com/moirai-go/moirai/bench"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSummarize(t *testing.T) {
	o := Options{Warmup: time.Second, Duration: 2 * time.Second, Step: time.Second}
	ms := time.Millisecond
	results := []result{
		{path: 0, at: 500 * ms, end: 510 * ms, ok: true},    // warm-up: in the series only
		{path: 0, at: 1100 * ms, end: 1120 * ms, ok: true},  // 20 ms
		{path: 0, at: 1200 * ms, end: 1240 * ms, ok: true},  // 40 ms
		{path: 0, at: 1300 * ms, end: 2300 * ms, ok: false}, // dropped
		{path: 1, at: 2000 * ms, end: 2005 * ms, ok: true},
	}
	stalls := []bench.Event{{T: 1500 * ms, Kind: "stall", Delay: 300 * ms}}
	rows, runs := summarize(o, Case{Name: "c", Stalls: true}, "shared", results, stalls)
	want := []bench.Row{
		{Suite: Suite, Case: "c", Controller: "shared", Path: PathAffected, MeanMs: 30, P99Ms: 40, Sent: 3, Dropped: 1, Throughput: 1},
		{Suite: Suite, Case: "c", Controller: "shared", Path: PathUnaffected, MeanMs: 5, P99Ms: 5, Sent: 1, Throughput: 0.5},
		{Suite: Suite, Case: "c", Controller: "shared", Path: PathLocal},
	}
	if d := cmp.Diff(want, rows, cmpopts.EquateApprox(0, 1e-9)); d != "" {
		t.Errorf("rows (-want +got):\n%s", d)
	}
	if len(runs) != 3 || len(runs[0].Series) != 3 || runs[0].Path != PathAffected || len(runs[0].Events) != 1 {
		t.Fatalf("runs: %+v", runs)
	}
	// The affected path's buckets: one success ending in [0,1), two in [1,2).
	if got := []float64{runs[0].Series[0].Throughput, runs[0].Series[1].Throughput, runs[0].Series[2].Throughput}; !cmp.Equal(got, []float64{1, 2, 0}) {
		t.Errorf("affected series throughput %v, want [1 2 0]", got)
	}
	if runs[0].Series[1].P99Ms != 40 {
		t.Errorf("bucket p99 %v, want 40", runs[0].Series[1].P99Ms)
	}
}

func TestBadInput(t *testing.T) {
	for _, cfg := range []ServerConfig{
		{Role: "x"},
		{Role: RoleD},
		{Role: RoleU, Controller: "nope", Pool: 8, D1: "a", D2: "b", Backlog: 1, Permits: 2},
		{Role: RoleU, Controller: "shared", Pool: 8, D1: "a", Backlog: 1, Permits: 2},
		{Role: RoleU, Controller: "shared", Pool: 8, D1: "a", D2: "b", Backlog: 1, Permits: 4},
		{Role: RoleU, Controller: "fixed-0", Pool: 8, D1: "a", D2: "b", Backlog: 1, Permits: 2},
		{Role: RoleU, Controller: "static", Pool: 8, D1: "127.0.0.1:1", D2: "127.0.0.1:2", Backlog: 1, Permits: 2},  // no limiter
		{Role: RoleU, Controller: "fixed-9", Pool: 8, D1: "127.0.0.1:1", D2: "127.0.0.1:2", Backlog: 1, Permits: 2}, // above the pool
	} {
		if err := Serve(t.Context(), cfg, func(string) { t.Fatal("ready with a bad config") }); err == nil {
			t.Errorf("Serve(%+v): no error", cfg)
		}
	}
	if _, err := SelectControllers("shared,bogus"); !errors.Is(err, bench.ErrUnknown) {
		t.Errorf("unknown controller: %v", err)
	}
	got, err := SelectControllers("fixed-4,pathfence-sct,limit-16,fixed-12")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got {
		names = append(names, c.Name)
	}
	if d := cmp.Diff([]string{"pathfence-sct", "fixed-4", "limit-16", "fixed-12"}, names); d != "" {
		t.Errorf("controllers (-want +got):\n%s", d)
	}
	if _, err := SelectControllers("limit-0"); err == nil {
		t.Error("limit-0: no error")
	}
	l := newFixedLimit(2)
	d1, ok1 := l.Acquire(t.Context())
	_, ok2 := l.Acquire(t.Context())
	if _, ok3 := l.Acquire(t.Context()); !ok1 || !ok2 || ok3 {
		t.Errorf("limit of 2: acquired %v, %v, %v", ok1, ok2, ok3)
	}
	d1(true)
	if _, ok := l.Acquire(t.Context()); !ok {
		t.Error("limit of 2: no room after a release")
	}
	if all, _ := SelectControllers("all"); len(all) != len(controllers) {
		t.Errorf("all: %d controllers", len(all))
	}
	if _, err := Execute(t.Context(), Options{Duration: 10 * time.Millisecond}); err == nil {
		t.Error("Execute with a 10 ms duration: no error")
	}
}

// TestExecuteInProcess runs a short millibottleneck case with every
// server in this process: the rows and runs must be whole.
func TestExecuteInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real servers for a few seconds")
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	start := func(ctx context.Context, cfg ServerConfig) (string, func() error, error) {
		ctx, cancel := context.WithCancel(ctx)
		addr := make(chan string, 1)
		errc := make(chan error, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- Serve(ctx, cfg, func(a string) { addr <- a })
		}()
		select {
		case a := <-addr:
			return a, func() error { cancel(); return <-errc }, nil
		case err := <-errc:
			cancel()
			return "", nil, err
		}
	}
	ctls, _ := SelectControllers("shared,pathfence-sct")
	cs, _ := SelectCases("millibottleneck")
	res, err := Execute(t.Context(), Options{Cases: cs, Controllers: ctls, Warmup: 500 * time.Millisecond, Duration: time.Second,
		Period: 600 * time.Millisecond, StallMin: 100 * time.Millisecond, StallMax: 200 * time.Millisecond, Start: start})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 6 || len(res.Runs) != 6 {
		t.Fatalf("%d rows and %d runs, want 6 and 6", len(res.Rows), len(res.Runs))
	}
	for _, r := range res.Rows {
		if fenced := r.Controller == "pathfence-sct"; fenced != (r.Permits > 0) {
			t.Errorf("row %s/%s: permits %d at the end", r.Controller, r.Path, r.Permits)
		}
		if r.Error != "" || r.Sent == 0 || r.Throughput <= 0 || r.P99Ms <= 0 || r.MeanMs <= 0 || r.P99Ms < r.MeanMs*0.5 {
			t.Errorf("row %+v", r)
		}
	}
	for _, run := range res.Runs {
		if len(run.Series) == 0 || !slices.Contains([]string{PathAffected, PathUnaffected, PathLocal}, run.Path) {
			t.Errorf("run %s/%s/%s: %d points", run.Case, run.Controller, run.Path, len(run.Series))
		}
		if len(run.Events) == 0 || run.Events[0].Kind != "stall" {
			t.Errorf("run %s/%s: no stall recorded", run.Controller, run.Path)
		}
	}
}

func TestPackPermits(t *testing.T) {
	if l, a, b := unpackPermits(packPermits(12, 9, 999)); l != 12 || a != 9 || b != 999 {
		t.Errorf("unpacked %d %d %d", l, a, b)
	}
}

func TestStaticSetting(t *testing.T) {
	got, err := SelectControllers("static,static@3/6/0.5,static@sweep,static@1/2/0.2/16")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got {
		names = append(names, c.Name)
	}
	// static@3/6/0.5 is in the grid too: once; the defaults (3/6/1) are
	// static itself, left out of the grid.
	want := []string{"static", "static@3/6/0.5", "static@1/2/1", "static@1/2/0.5", "static@1/2/0.2", "static@3/6/0.2",
		"static@6/12/1", "static@6/12/0.5", "static@6/12/0.2", "static@1/2/0.2/16"}
	if d := cmp.Diff(want, names); d != "" {
		t.Errorf("controllers (-want +got):\n%s", d)
	}
	for _, c := range []struct {
		name string
		want Vegas
	}{
		{"static", DefaultVegas},
		{"static@1/2/0.2", Vegas{Alpha: 1, Beta: 2, Smoothing: 0.2}},
		{"static@6/12/1/24", Vegas{Alpha: 6, Beta: 12, Smoothing: 1, Max: 24}},
	} {
		v, ok := StaticVegas(c.name)
		if !ok || v != c.want {
			t.Errorf("StaticVegas(%q) = %+v, %v; want %+v", c.name, v, ok, c.want)
		}
		if s := "static@" + v.String(); c.name != "static" && s != c.name {
			t.Errorf("%q came back as %q", c.name, s)
		}
	}
	if _, ok := StaticVegas("limit-8"); ok {
		t.Error("limit-8 taken for a static controller")
	}
	for _, bad := range []string{"static@3/6", "static@3/6/0", "static@3/6/1.5", "static@6/3/1", "static@0/6/1", "static@3/200/1",
		"static@x/6/1", "static@3/6/1/0", "static@3/6/1/2000", "static@3/6/1/8/9", "static@"} {
		_, err := SelectControllers(bad)
		if err == nil || !strings.Contains(err.Error(), "ALPHA/BETA/SMOOTHING") {
			t.Errorf("%q: error %v, want one naming ALPHA/BETA/SMOOTHING", bad, err)
		}
	}
	// A tuned static needs the benchmark module's limiter as static does.
	cfg := ServerConfig{Role: RoleU, Controller: "static@1/2/0.5", Pool: 8, D1: "127.0.0.1:1", D2: "127.0.0.1:2", Backlog: 1, Permits: 2}
	if err := Serve(t.Context(), cfg, func(string) { t.Fatal("ready without a limiter") }); err == nil || !strings.Contains(err.Error(), "limiter") {
		t.Errorf("static@1/2/0.5 without a limiter: %v", err)
	}
}
