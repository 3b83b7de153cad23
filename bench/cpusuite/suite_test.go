package cpusuite

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/moirai-go/moirai/cpu"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

// workerEnv makes the test binary a worker process: the suite's Execute
// re-executes it with the configuration in this variable.
const workerEnv = "MOIRAI_CPUSUITE_WORKER"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(workerEnv); cfg != "" {
		var c WorkerConfig
		if err := json.Unmarshal([]byte(cfg), &c); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		r, err := Worker(context.Background(), c)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		json.NewEncoder(os.Stdout).Encode(r)
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func TestFib(t *testing.T) {
	if got := Fib(20); got != 6765 {
		t.Errorf("Fib(20) = %d", got)
	}
}

// TestCalibrateParallel: an item's time with every CPU running one is a
// time (not less than a tenth of the lone item's, as no CPU runs faster
// beside another).
func TestCalibrateParallel(t *testing.T) {
	alone, par := Calibrate(20), CalibrateParallel(20, 2)
	if par <= 0 || par < alone/10 {
		t.Fatalf("fib(20): %v alone, %v on each of 2 CPUs at once", alone, par)
	}
}

func TestQuantile(t *testing.T) {
	xs := []int32{5000, 1000, 3000, 2000, 4000}
	for _, tt := range []struct {
		q    float64
		want float64
	}{{0, 1}, {0.5, 3}, {0.99, 5}, {1, 5}} {
		if got := quantile(append([]int32(nil), xs...), tt.q); got != tt.want {
			t.Errorf("quantile(%v) = %v ms, want %v", tt.q, got, tt.want)
		}
	}
	if quantile(nil, 0.99) != 0 {
		t.Error("quantile of nothing is not 0")
	}
}

func TestMerge(t *testing.T) {
	rs := []*WorkerResult{
		{Work: []int32{1000, 2000}, Queue: []int32{0, 10000}, Completed: 20, Measured: 2, ActiveMean: 1},
		{Work: []int32{3000}, Queue: []int32{500}, Completed: 10, Measured: 2, ActiveMean: 1.5},
		// A second round of the same pair.
		{Work: []int32{4000}, Queue: []int32{0}, Completed: 30, Measured: 2, ActiveMean: 1},
		{Work: []int32{}, Queue: []int32{0}, Completed: 10, Measured: 2, ActiveMean: 0.5},
	}
	row := merge(Case{Name: "k2", K: 2}, Controller{Name: "friendly-o1"}, 50, 2, rs)
	got := [...]float64{row.P99Ms, row.MaxMs, row.QueueP99Ms, row.Throughput, row.Offered, row.ActiveMean}
	// Round 1: p99 3, max 3, queue p99 10; round 2: 4, 4, 0. Medians of
	// two: their means.
	want := [...]float64{3.5, 3.5, 5, 17.5, 100, 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("merge (-want +got):\n%s", diff)
	}
	// The processes' CPU time per item, round by round.
	rs[0].CPUTime, rs[0].Ran = 80*time.Millisecond, 20
	rs[1].CPUTime, rs[1].Ran = 40*time.Millisecond, 10
	rs[2].CPUTime, rs[2].Ran = 150*time.Millisecond, 30
	_, pr := mergeRounds(Case{Name: "k2", K: 2}, Controller{Name: "friendly-o1"}, 50, 2, rs)
	if diff := cmp.Diff([]float64{4, 5}, pr.cpu); diff != "" {
		t.Errorf("CPU per item (-want +got):\n%s", diff)
	}
}

func TestMedian(t *testing.T) {
	for _, tt := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tt.xs); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
}

// TestCaseSizes: the optimal pool and the rate of each case.
func TestCaseSizes(t *testing.T) {
	for _, tt := range []struct {
		c       Case
		cpus    float64
		optimal int
		rate    float64 // at a load of 0.9 and items of 10 ms
	}{
		{Case{K: 1}, 2, 2, 180},
		{Case{K: 2}, 2, 1, 90},
		{Case{K: 3}, 2, 1, 60},
		{Case{K: 4}, 2, 1, 45},
		{Case{K: 1, Hogs: 1}, 2, 1, 90},
		{Case{K: 1, Rogues: 1}, 2, 1, 90},
		{Case{K: 1, Hogs: 1}, 8, 7, 630},
	} {
		if got := tt.c.optimal(tt.cpus); got != tt.optimal {
			t.Errorf("%+v on %v CPUs: optimal %d, want %d", tt.c, tt.cpus, got, tt.optimal)
		}
		if got := tt.c.rate(0.9, tt.cpus, 10*time.Millisecond); math.Abs(got-tt.rate) > 1e-9 {
			t.Errorf("%+v on %v CPUs: rate %v, want %v", tt.c, tt.cpus, got, tt.rate)
		}
	}
}

func TestSelect(t *testing.T) {
	cs, err := SelectCases("k1,k4")
	if err != nil || len(cs) != 2 || cs[1].K != 4 {
		t.Errorf("SelectCases = %v, %v", cs, err)
	}
	if _, err := SelectCases("k9"); err == nil || !strings.Contains(err.Error(), "valid: k1, k2, k3, k4, hog, rogue") {
		t.Errorf("SelectCases(k9) = %v", err)
	}
	ks, err := SelectControllers("friendly-o2")
	if err != nil || len(ks) != 1 || ks[0].Overcommit != 2 {
		t.Errorf("SelectControllers = %v, %v", ks, err)
	}
	if all, _ := SelectControllers("all"); len(all) != 4 {
		t.Errorf("%d controllers, want 4", len(all))
	}
}

func TestWorkerBadConfig(t *testing.T) {
	for _, c := range []WorkerConfig{
		{Pool: "friendly", K: 0, Rate: 1, Fib: 10, Duration: time.Second},
		{Pool: "friendly", K: 1, Rate: 0, Fib: 10, Duration: time.Second},
		{Pool: "friendly", K: 1, Rate: 1, Fib: 99, Duration: time.Second},
		{Pool: "friendly", K: 1, Rate: 1, Fib: 10, Duration: time.Second, Warmup: time.Second},
		{Pool: "nope", K: 1, Rate: 1, Fib: 10, Duration: time.Second},
	} {
		if _, err := Worker(context.Background(), c); err == nil {
			t.Errorf("Worker(%+v) succeeded", c)
		}
	}
}

// TestWorkerSmoke runs one short process of each pool in this process:
// items arrive, run and are measured, and the run stops by itself.
func TestWorkerSmoke(t *testing.T) {
	for _, pool := range []string{"ignorant", "optimal", "friendly"} {
		c := WorkerConfig{Pool: pool, Overcommit: 1, K: 2, Seed: 1, Rate: 200, Fib: 18,
			StartAt: time.Now().UnixNano(), Duration: 150 * time.Millisecond, Warmup: 20 * time.Millisecond}
		r, err := Worker(context.Background(), c)
		if err != nil {
			t.Fatalf("%s: %v", pool, err)
		}
		if r.Completed == 0 || len(r.Work) == 0 || r.Sent == 0 || r.ActiveMean < 1 {
			t.Errorf("%s: %+v", pool, r)
		}
		// The suite's friendly controllers run the library's default grow
		// margin: a controller's Tolerance of 0 means the default (it was
		// passed on as a margin of 0, so that friendly-o1 grew at a free
		// CPU of n + 0 and ran three threads on two CPUs at K = 2).
		if pool == "friendly" && r.Tolerance != cpu.DefaultGrow {
			t.Errorf("friendly pool's grow margin %v; want the default %v", r.Tolerance, cpu.DefaultGrow)
		}
		// A friendly pool's loop is summed up over the measured part.
		if l := r.Loop; (pool == "friendly") != (l != nil) || (l != nil && (l.RunQueue < 0 || l.Share < 0 || l.Grows < 0)) {
			t.Errorf("%s: loop summary %+v", pool, l)
		}
	}
}

// TestExecuteSmoke runs the suite end to end for a few hundred
// milliseconds: two worker processes (this test binary re-executed) per
// run, two controllers.
func TestExecuteSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	cases, _ := SelectCases("k2,hog,rogue")
	ctls, _ := SelectControllers("optimal,friendly-o1")
	res, err := Execute(context.Background(), Options{
		Cases: cases, Controllers: ctls, Duration: 300 * time.Millisecond, Warmup: 50 * time.Millisecond, Rounds: 1,
		Seed: 1, Fib: 16, Load: 0.3, startLead: 100 * time.Millisecond,
		Command: func(ctx context.Context, c WorkerConfig) *exec.Cmd {
			b, _ := json.Marshal(c)
			cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), workerEnv+"="+string(b))
			return cmd
		},
		calibrated: time.Millisecond,
		loopCost:   time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 6 {
		t.Fatalf("%d rows, want 6", len(res.Rows))
	}
	for _, r := range res.Rows {
		if r.Error != "" || r.Throughput <= 0 || r.P99Ms <= 0 || r.Suite != "cpu" {
			t.Errorf("row %+v", r)
		}
	}
	for _, k := range []string{"loop k2 friendly-o1", "loop hog friendly-o1"} {
		if !strings.Contains(res.Params[k], "round") {
			t.Errorf("params[%q] = %q", k, res.Params[k])
		}
	}
}

func TestExecuteBadOptions(t *testing.T) {
	for _, o := range []Options{
		{Duration: 50 * time.Millisecond, Fib: 10, Load: 1},
		{Duration: time.Second, Warmup: time.Second, Fib: 10, Load: 1},
		{Duration: time.Second, Fib: 0, Load: 1},
		{Duration: time.Second, Fib: 10, Load: 0},
	} {
		if _, err := Execute(context.Background(), o); err == nil {
			t.Errorf("Execute(%+v) succeeded", o)
		}
	}
	// A process that fails fails its row, not the invocation.
	cases, _ := SelectCases("k1")
	ctls, _ := SelectControllers("optimal")
	res, err := Execute(context.Background(), Options{
		Cases: cases, Controllers: ctls, Duration: time.Second, Fib: 10, Load: 0.1,
		Command: func(ctx context.Context, c WorkerConfig) *exec.Cmd {
			return exec.CommandContext(ctx, "/nonexistent/moirai-worker")
		},
		calibrated: time.Millisecond,
		loopCost:   time.Millisecond,
	})
	if err != nil || len(res.Rows) != 1 || res.Rows[0].Error == "" {
		t.Errorf("Execute with a missing program = %v, %+v", err, res)
	}
}

// TestRoundParams: each round's figures and the friendly pool's ratios
// to the static pools of the same round, with their median and min–max.
func TestRoundParams(t *testing.T) {
	params := map[string]string{}
	prs := map[string]perRound{
		"ignorant":    {p99: []float64{20, 30}, tput: []float64{400, 400}, back: []float64{0.1, 0.2}},
		"optimal":     {p99: []float64{10, 10}, tput: []float64{420, 440}, back: []float64{0.1, 0.1}},
		"friendly-o1": {p99: []float64{11, 14}, tput: []float64{400, 380}, back: []float64{0, 0}},
	}
	ctls, _ := SelectControllers("ignorant,optimal,friendly-o1")
	roundParams(params, Case{Name: "k2", K: 2}, ctls, prs)
	got := params["rounds k2 friendly-o1"]
	for _, want := range []string{"p99 11, 14 ms (median 12.5, 11–14)", "p99 / optimal's 1.1, 1.4 (median 1.25, 1.1–1.4)",
		"p99 / ignorant's 0.55, 0.467", "throughput / ignorant's 1, 0.95 (median 0.975, 0.95–1)"} {
		if !strings.Contains(got, want) {
			t.Errorf("params lack %q: %q", want, got)
		}
	}
	if !strings.HasSuffix(params["check k2"], "does NOT hold in every round") {
		t.Errorf("check k2: %q", params["check k2"])
	}
	if strings.Contains(params["rounds k2 optimal"], "optimal's") || len(params) != 4 {
		t.Errorf("params %v", params)
	}
}

// TestCheck: the targets are checked round by round, against the static
// pools of the same round; one round out of target is enough to fail.
func TestCheck(t *testing.T) {
	opt := perRound{p99: []float64{6, 6, 6}, tput: []float64{430, 430, 430}}
	ign := perRound{p99: []float64{14, 14, 14}, tput: []float64{440, 440, 440}}
	for _, tt := range []struct {
		name string
		c    Case
		pr   perRound
		want string
	}{
		{"k2 every round", Case{Name: "k2", K: 2}, perRound{p99: []float64{6, 7, 7.8}, tput: []float64{430, 420, 401}},
			"friendly-o1: p99 ÷ optimal's ≤ 1.3 in 3 of 3 rounds (median 1.17, 1–1.3); throughput ÷ ignorant's ≥ 0.909 in 3 of 3 rounds (median 0.955, 0.911–0.977): holds in every round"},
		{"k2 one round out", Case{Name: "k2", K: 2}, perRound{p99: []float64{6, 8, 7}, tput: []float64{430, 420, 380}},
			"friendly-o1: p99 ÷ optimal's ≤ 1.3 in 2 of 3 rounds (median 1.17, 1–1.33); throughput ÷ ignorant's ≥ 0.909 in 2 of 3 rounds (median 0.955, 0.864–0.977): does NOT hold in every round"},
		{"hog: no throughput target", Case{Name: "hog", K: 1, Hogs: 1}, perRound{p99: []float64{6, 7, 7}, tput: []float64{100, 100, 100}},
			"friendly-o1: p99 ÷ optimal's ≤ 1.3 in 3 of 3 rounds (median 1.17, 1–1.17): holds in every round"},
		{"k1 against ignorant", Case{Name: "k1", K: 1}, perRound{p99: []float64{14, 14.5, 15}, tput: []float64{440, 430, 440}},
			"friendly-o1: p99 ÷ ignorant's ≤ 1.05 in 2 of 3 rounds (median 1.04, 1–1.07); throughput ÷ ignorant's ≥ 0.95 in 3 of 3 rounds (median 1, 0.977–1): does NOT hold in every round" +
				" (the same static pool run as optimal and as ignorant, round by round: p99 ratio 0.429–0.429, throughput ratio 0.977–0.977)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := check(tt.c, tt.pr, opt, ign)
			if !ok || got != tt.want {
				t.Errorf("check = %q, %v\nwant %q", got, ok, tt.want)
			}
		})
	}
	if _, ok := check(Case{Name: "k2", K: 2}, opt, perRound{}, ign); ok {
		t.Error("check without optimal's rounds")
	}
}

func TestSelectStatic(t *testing.T) {
	got, err := SelectControllers("optimal,static-3,static-1")
	if err != nil || len(got) != 3 || got[0].Name != "optimal" || got[1].Pool != "static" || got[1].Fixed != 3 || got[2].Fixed != 1 {
		t.Fatalf("SelectControllers = %+v, %v", got, err)
	}
	for _, bad := range []string{"static-0", "static-x", "static-65", "nope"} {
		if _, err := SelectControllers(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
