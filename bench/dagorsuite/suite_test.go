package dagorsuite

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"

	"github.com/moirai-go/moirai/bench"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSummarize(t *testing.T) {
	tasks := []outcome{
		{calls: 1, completed: 1, ok: true},
		{calls: 2, completed: 1, ok: false}, // one call's work wasted
		{calls: 4, completed: 4, ok: true},
		{calls: 4, completed: 3, ok: false}, // three wasted
	}
	// The tasks ask for 11 calls; M could complete 5.5 of them.
	got := summarize(Suite, "mixed", "dagor", 2, 5.5, tasks)
	want := bench.Row{Suite: Suite, Case: "mixed", Controller: "dagor", FeedRatio: 2,
		SuccessRate: 0.5, OptimalSuccessRate: 0.5, WastedWork: 4.0 / 9,
		SuccessByCalls: []float64{1, 0, 0, 0.5}}
	if d := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-12)); d != "" {
		t.Fatalf("row (-want +got):\n%s", d)
	}
	if r := summarize(Suite, "M1", "none", 0.5, 100, nil); r.SuccessRate != 0 || r.OptimalSuccessRate != 1 || r.SuccessByCalls != nil {
		t.Fatalf("no tasks: %+v", r)
	}
	if r := summarize(Suite, "M4", "none", 0.5, 100, tasks[2:3]); r.OptimalSuccessRate != 1 {
		t.Fatalf("capacity to spare: optimum %v, want 1", r.OptimalSuccessRate)
	}
}

func TestResultCoding(t *testing.T) {
	for _, c := range []struct {
		n  int64
		ok bool
	}{{0, false}, {0, true}, {3, false}, {4, true}} {
		if n, ok := decodeResult(encodeResult(c.n, c.ok)); n != c.n || ok != c.ok {
			t.Errorf("%d %v came back as %d %v", c.n, c.ok, n, ok)
		}
	}
}

func TestBadInput(t *testing.T) {
	for _, cfg := range []ServerConfig{
		{Role: "x", Controller: "none"},
		{Role: RoleM, Controller: "nope", Workers: 1, Service: time.Millisecond},
		{Role: RoleM, Controller: "none"},
		{Role: RoleA, Controller: "dagor"},
	} {
		if err := Serve(t.Context(), cfg, func(string) { t.Fatal("ready with a bad config") }); err == nil {
			t.Errorf("Serve(%+v): no error", cfg)
		}
	}
	if _, err := SelectControllers("dagor,bogus"); !errors.Is(err, bench.ErrUnknown) {
		t.Errorf("unknown controller: %v", err)
	}
	if _, err := ParseFeeds("1,x"); err == nil {
		t.Error("feed x accepted")
	}
	if _, err := Execute(t.Context(), Options{Duration: time.Second}); err == nil {
		t.Error("Execute without Start")
	}
}

func TestSelectControllers(t *testing.T) {
	got, err := SelectControllers("dagor, codel@10ms/200ms,codel-rfc@sweep,codel,codel@10ms/200ms")
	if err != nil {
		t.Fatal(err)
	}
	n := len(SweepTargets) * len(SweepIntervals)
	if len(got) != 3+n {
		t.Fatalf("%d controllers, want %d", len(got), 3+n)
	}
	if c := got[1]; c.Name != "codel@10ms/200ms" || c.Base() != "codel" || c.Target != 10*time.Millisecond || c.Interval != 200*time.Millisecond {
		t.Errorf("tuned codel: %+v", c)
	}
	if c := got[2]; c.Base() != "codel-rfc" || c.Target != SweepTargets[0] || c.Interval != SweepIntervals[0] {
		t.Errorf("first of the sweep: %+v", c)
	}
	if c := got[len(got)-1]; c.Name != "codel" || c.Target != 0 {
		t.Errorf("default codel: %+v", c)
	}
	sre, err := SelectControllers("sre,sre@sweep,sre@1.5")
	if err != nil || len(sre) != 1+len(SweepK) || sre[0].K != 0 || sre[1].Name != "sre@1.1" || sre[1].Base() != "sre" || sre[2].K != 1.5 {
		t.Errorf("sre settings: %+v, %v", sre, err)
	}
	for _, bad := range []string{"dagor@1ms/1ms", "codel@1ms", "codel@x/1ms", "codel@0s/1ms", "codel@1ms/20s", "nope@sweep", "sre@0.5", "sre@x", "sre@1ms/1ms"} {
		if _, err := SelectControllers(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if err := Serve(t.Context(), ServerConfig{Role: RoleA, Controller: "sre", Downstream: "127.0.0.1:1", SREK: 0.5}, func(string) { t.Fatal("ready with K 0.5") }); err == nil {
		t.Error("sre's K 0.5 accepted")
	}
	cfg := ServerConfig{Role: RoleM, Controller: "codel", Workers: 1, Service: time.Millisecond, CoDelTarget: -1}
	if err := Serve(t.Context(), cfg, func(string) { t.Fatal("ready with a negative target") }); err == nil {
		t.Error("negative CoDel target accepted")
	}
}

func TestSelectRandom(t *testing.T) {
	got, err := SelectControllers("random,random@50ms/10ms,random@sweep")
	if err != nil {
		t.Fatal(err)
	}
	// random@50ms/10ms is in the grid too: it appears once.
	if n := 1 + len(SweepWindows)*len(SweepThresholds); len(got) != n {
		t.Fatalf("%d controllers, want %d", len(got), n)
	}
	if c := got[0]; c.Name != "random" || c.Window != 0 || c.Threshold != 0 {
		t.Errorf("default random: %+v", c)
	}
	if c := got[1]; c.Name != "random@50ms/10ms" || c.Base() != "random" || c.Window != 50*time.Millisecond || c.Threshold != 10*time.Millisecond {
		t.Errorf("tuned random: %+v", c)
	}
	if c := got[len(got)-1]; c.Window != SweepWindows[len(SweepWindows)-1] || c.Threshold != SweepThresholds[len(SweepThresholds)-1] {
		t.Errorf("last of the sweep: %+v", c)
	}
	for _, bad := range []string{"random@100ms", "random@x/20ms", "random@100ms/y", "random@0s/20ms", "random@100ms/0s", "random@100us/20ms", "random@20s/20ms", "random@100ms/11s", "random@1.5"} {
		_, err := SelectControllers(bad)
		if err == nil || !strings.Contains(err.Error(), "random@") {
			t.Errorf("%q: error %v, want one naming random@WINDOW/THRESHOLD", bad, err)
		}
	}
}

// TestRandomSetting checks that a tuned random's setting reaches M's
// configuration, its window's request count scaled with the window.
func TestRandomSetting(t *testing.T) {
	var got []ServerConfig
	start := func(_ context.Context, cfg ServerConfig) (string, func() error, error) {
		got = append(got, cfg)
		return "", nil, errors.New("not started")
	}
	o := Options{Start: start}
	o.defaults()
	c, err := TunedRandom(200*time.Millisecond, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := startPair(t.Context(), o, c); err == nil {
		t.Fatal("startPair: no error from a failing start")
	}
	if len(got) != 1 || got[0].Controller != "random" || got[0].Window != 200*time.Millisecond || got[0].WindowCount != 2*DefaultWindowCount || got[0].Threshold != 5*time.Millisecond {
		t.Errorf("M's configuration: %+v", got)
	}
	got = nil
	def, _ := controllerByName("random")
	startPair(t.Context(), o, def)
	if len(got) != 1 || got[0].Window != DefaultWindow || got[0].WindowCount != DefaultWindowCount || got[0].Threshold != DefaultThreshold {
		t.Errorf("default random's configuration: %+v", got)
	}
}

// inProcess starts the servers as goroutines of the test.
func inProcess(ctx context.Context, cfg ServerConfig) (string, func() error, error) {
	ctx, cancel := context.WithCancel(ctx)
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, func(a string) { addr <- a }) }()
	select {
	case a := <-addr:
		return a, func() error { cancel(); return <-done }, nil
	case err := <-done:
		cancel()
		return "", nil, err
	}
}

// TestExecute runs the whole pipeline briefly, in one process: it checks
// the plumbing (every row present, sane fractions), not the figures,
// which `moirai bench run --suite dagor` measures.
func TestExecute(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gRPC servers")
	}
	cases, _ := SelectCases("M2,mixed")
	ctls, _ := SelectControllers("none,dagor,sre,codel@2ms/50ms")
	// Four workers keep the calibration's load (1.25 C, 1,000 calls/s)
	// within what the race detector on a loaded machine can carry.
	res, err := Execute(t.Context(), Options{Cases: cases, Controllers: ctls, Feeds: []float64{0.5},
		Duration: 200 * time.Millisecond, Service: 5 * time.Millisecond, Workers: 4, Start: inProcess})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 8 {
		t.Fatalf("%d rows, want 8", len(res.Rows))
	}
	for _, r := range res.Rows {
		// The optimum comes from M's saturated rate as measured here, which
		// a loaded machine (the race detector, parallel packages) can put
		// anywhere below the capacity: only its range is checked.
		if r.Error != "" || r.SuccessRate <= 0 || r.SuccessRate > 1 || r.WastedWork < 0 || r.WastedWork > 1 || r.OptimalSuccessRate <= 0 || r.OptimalSuccessRate > 1 {
			t.Errorf("row %+v", r)
		}
		if (r.Case == "mixed") != (len(r.SuccessByCalls) == 4) {
			t.Errorf("row %s: success by calls %v", r.Case, r.SuccessByCalls)
		}
	}
}
