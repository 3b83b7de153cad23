package bench_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/bench"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The "test" suite: one case whose culprit holds a lock the light requests
// need, small enough for a one-second run.
func init() {
	bench.Register(bench.Case{
		Suite: "test", Name: "lock", Models: "test", SLO: 20 * time.Millisecond,
		Build: func(env *bench.Env) (*bench.Service, error) {
			mu := env.Ctl.Mutex("lock")
			return &bench.Service{
				Rate: 100,
				Light: func(ctx context.Context, _ int) error {
					if err := mu.Lock(ctx); err != nil {
						return err
					}
					mu.Unlock()
					return nil
				},
				Culprit: func(ctx context.Context) error {
					if err := mu.Lock(ctx); err != nil {
						return err
					}
					defer mu.Unlock()
					t := time.NewTimer(400 * time.Millisecond)
					defer t.Stop()
					select {
					case <-t.C:
						return nil
					case <-ctx.Done():
						return context.Cause(ctx)
					}
				},
			}, nil
		},
	})
	bench.Register(bench.Case{
		Suite: "test", Name: "broken", Models: "test",
		Build: func(*bench.Env) (*bench.Service, error) { return nil, errors.New("cannot start") },
	})
	bench.RegisterController(bench.Controller{
		Name: "test-told",
		Options: func(slo time.Duration) []moirai.Option {
			told.Store(int64(slo))
			return []moirai.Option{moirai.WithoutMechanisms()}
		},
	})
	bench.RegisterController(bench.Controller{
		Name: "test-panics",
		Options: func(time.Duration) []moirai.Option {
			panic("controller bug")
		},
	})
}

func TestSelect(t *testing.T) {
	if _, err := bench.SelectCases("test", "lock,nope"); !errors.Is(err, bench.ErrUnknown) || !strings.Contains(err.Error(), "valid: lock, broken") {
		t.Errorf("unknown case: %v", err)
	}
	if _, err := bench.SelectCases("nosuch", "all"); !errors.Is(err, bench.ErrUnknown) {
		t.Errorf("unknown suite: %v", err)
	}
	if _, err := bench.SelectControllers("none,nope"); !errors.Is(err, bench.ErrUnknown) || !strings.Contains(err.Error(), "none") {
		t.Errorf("unknown controller: %v", err)
	}
	tuned, err := bench.SelectControllers("codel,codel@sweep,breakwater@2ms,protego@2x,codel@10ms/100ms")
	var names []string
	for _, c := range tuned {
		names = append(names, c.Name)
	}
	want := []string{"codel", "codel@1ms/50ms", "codel@10ms/100ms", "codel@20ms/200ms", "breakwater@2ms", "protego@2x"}
	if err != nil || !slices.Equal(names, want) {
		t.Errorf("tuned controllers = %v, %v; want %v", names, err, want)
	}
	for _, c := range tuned {
		if strings.Contains(c.Name, "@") && (c.Tune != nil || c.Admitter == nil && c.Name != "protego@2x") {
			t.Errorf("%s: Tune %v, Admitter %v", c.Name, c.Tune != nil, c.Admitter != nil)
		}
	}
	for _, bad := range []string{"none@1ms", "codel@fast", "codel@-1ms/100ms", "breakwater@0s", "protego@2", "protego@0x", "nope@sweep"} {
		if _, err := bench.SelectControllers(bad); err == nil {
			t.Errorf("SelectControllers(%q): no error", bad)
		}
	}
	cs, err := bench.SelectCases("test", "lock")
	if err != nil || len(cs) != 1 || cs[0].Name != "lock" {
		t.Errorf("SelectCases = %v, %v", cs, err)
	}
	if _, err := bench.Execute(context.Background(), bench.Options{Cases: cs, Duration: 10 * time.Millisecond}); err == nil || !strings.Contains(err.Error(), "minimum") {
		t.Errorf("short duration: %v", err)
	}
}

// TestExecute runs the test suite once: the culprit degrades the light
// requests, a panicking controller and a case that cannot start fail their
// rows, and the other rows still run.
func TestExecute(t *testing.T) {
	cs, err := bench.SelectCases("test", "all")
	if err != nil {
		t.Fatal(err)
	}
	ctls, err := bench.SelectControllers("none,test-panics")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var steps []string
	res, err := bench.Execute(context.Background(), bench.Options{
		Suite: "test", Cases: cs, Controllers: ctls, Duration: time.Second, Seed: 7,
		Progress: func(done, total int, what string) {
			mu.Lock()
			steps = append(steps, what)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 4 {
		t.Fatalf("%d rows, want 4 (2 cases × 2 controllers)", len(res.Rows))
	}
	none, boom, broken := res.Rows[0], res.Rows[1], res.Rows[2]
	if none.Error != "" || none.Degraded == nil || !*none.Degraded || none.P99Norm < 2 {
		t.Errorf("none row: %+v", none)
	}
	if none.VictimMeanUncontrolledMs != none.VictimMeanMs || none.VictimMeanNormalMs <= 0 || none.VictimMeanMs <= none.VictimMeanNormalMs {
		t.Errorf("victim means: %+v", none)
	}
	if !strings.Contains(boom.Error, "panicked: controller bug") {
		t.Errorf("panicking controller's row: %+v", boom)
	}
	if !strings.Contains(broken.Error, "cannot start") {
		t.Errorf("broken case's row: %+v", broken)
	}
	var normal, uncontrolled *bench.Run
	for i := range res.Runs {
		switch r := &res.Runs[i]; {
		case r.Case == "lock" && r.Controller == "normal":
			normal = r
		case r.Case == "lock" && r.Controller == "none":
			uncontrolled = r
		}
	}
	if normal == nil || uncontrolled == nil {
		t.Fatalf("runs: %+v", res.Runs)
	}
	if normal.WithCulprit || normal.Culprit.Sent != 0 || normal.Light.Sent < 50 {
		t.Errorf("normal run: %+v", normal)
	}
	if !uncontrolled.WithCulprit || uncontrolled.Culprit.Sent != 1 || uncontrolled.InjectedAt != 250*time.Millisecond {
		t.Errorf("uncontrolled run: culprit %+v injected at %v", uncontrolled.Culprit, uncontrolled.InjectedAt)
	}
	if len(uncontrolled.Series) != 4 || uncontrolled.Events[0].Kind != "culprit" {
		t.Errorf("series %d points, events %+v", len(uncontrolled.Series), uncontrolled.Events)
	}
	if len(steps) == 0 || steps[len(steps)-1] != "done" {
		t.Errorf("progress steps = %q", steps)
	}
}

// TestSameSeedSameSchedule: two runs with the same seed send the same
// number of requests.
func TestSameSeedSameSchedule(t *testing.T) {
	cs, _ := bench.SelectCases("test", "lock")
	ctls, _ := bench.SelectControllers("none")
	var sent []int
	for range 2 {
		res, err := bench.Execute(context.Background(), bench.Options{Suite: "test", Cases: cs, Controllers: ctls, Duration: time.Second, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, res.Runs[0].Light.Sent)
	}
	if sent[0] != sent[1] {
		t.Errorf("light requests sent: %v, want equal", sent)
	}
}

// TestExecuteWithMetrics: a run with metrics exported and scraped ends
// like one without (its rows), and says so in its parameters.
func TestExecuteWithMetrics(t *testing.T) {
	cs, err := bench.SelectCases("test", "lock")
	if err != nil {
		t.Fatal(err)
	}
	ctls, err := bench.SelectControllers("atropos")
	if err != nil {
		t.Fatal(err)
	}
	res, err := bench.Execute(t.Context(), bench.Options{Suite: "test", Cases: cs, Controllers: ctls, Duration: bench.MinDuration, Seed: 1,
		Metrics: true, MetricsEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Params["metrics"] == "" {
		t.Errorf("params %v: the metrics are not recorded", res.Params)
	}
	if len(res.Rows) == 0 {
		t.Fatal("no rows")
	}
	for _, r := range res.Rows {
		if r.Error != "" {
			t.Errorf("row %s/%s failed: %s", r.Case, r.Controller, r.Error)
		}
	}
}

// The "test-stream" suite: one case with a noisy client whose requests
// hold the lock the light requests need for 20 ms each.
func init() {
	bench.Register(bench.Case{
		Suite: "test-stream", Name: "lock", Models: "test", SLO: 20 * time.Millisecond,
		Build: func(env *bench.Env) (*bench.Service, error) {
			mu := env.Ctl.Mutex("lock")
			hold := func(ctx context.Context, d time.Duration) error {
				if err := mu.Lock(ctx); err != nil {
					return err
				}
				defer mu.Unlock()
				t := time.NewTimer(d)
				defer t.Stop()
				select {
				case <-t.C:
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
			return &bench.Service{
				Rate:    100,
				Light:   func(ctx context.Context, _ int) error { return hold(ctx, time.Millisecond) },
				Culprit: func(ctx context.Context) error { return hold(ctx, 400*time.Millisecond) },
				Noisy:   func(ctx context.Context, _ int) error { return hold(ctx, 20*time.Millisecond) },
			}, nil
		},
	})
}

// TestExecuteStream: with Options.Stream the noisy client replaces the
// one culprit request, its requests count as the culprit's, and pbox
// penalizes them.
func TestExecuteStream(t *testing.T) {
	cs, err := bench.SelectCases("test-stream", "all")
	if err != nil {
		t.Fatal(err)
	}
	ctls, err := bench.SelectControllers("none,pbox")
	if err != nil {
		t.Fatal(err)
	}
	res, err := bench.Execute(context.Background(), bench.Options{
		Suite: "test-stream", Cases: cs, Controllers: ctls, Duration: time.Second, Seed: 7, Stream: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Params["culprit"], "stream") {
		t.Errorf("params %v do not say the culprit was a stream", res.Params)
	}
	for _, r := range res.Runs {
		switch r.Controller {
		case "normal":
			if r.Culprit.Sent != 0 {
				t.Errorf("normal run sent %d noisy requests", r.Culprit.Sent)
			}
		default:
			// 4 clients for half a second, 20 ms a request at best.
			if r.Culprit.Sent < 8 || r.Culprit.Sent > 100 {
				t.Errorf("%s run: %d noisy requests", r.Controller, r.Culprit.Sent)
			}
		}
	}
	if len(res.Rows) != 2 || res.Rows[1].Controller != "pbox" {
		t.Fatalf("rows %+v", res.Rows)
	}
	if pb := res.Rows[1]; pb.Penalties == 0 || pb.VictimsCancelled != 0 {
		t.Errorf("pbox row: %d penalties, %d victims cancelled", pb.Penalties, pb.VictimsCancelled)
	}
}

// told is the objective the last run told controller test-told.
var told atomic.Int64

// TestSLOScale: the objective a controller is told is the case's times
// the scale; the metrics keep the case's.
func TestSLOScale(t *testing.T) {
	cs, err := bench.SelectCases("test", "lock")
	if err != nil {
		t.Fatal(err)
	}
	ctls, err := bench.SelectControllers("test-told")
	if err != nil {
		t.Fatal(err)
	}
	for _, scale := range []float64{0, 0.25} {
		res, err := bench.Execute(context.Background(), bench.Options{
			Suite: "test", Cases: cs, Controllers: ctls, Duration: time.Second, Seed: 7, SLOScale: scale,
		})
		if err != nil {
			t.Fatal(err)
		}
		want := cs[0].SLO
		if want == 0 {
			want = 50 * time.Millisecond
		}
		if scale > 0 {
			want = time.Duration(float64(want) * scale)
			if res.Params["objective told the controllers"] == "" {
				t.Errorf("params %v do not name the scale", res.Params)
			}
		}
		if got := time.Duration(told.Load()); got != want {
			t.Errorf("scale %v: controller told %v, want %v", scale, got, want)
		}
	}
}
