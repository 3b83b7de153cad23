package fence_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai/fence"
)

// curve is a downstream's throughput at concurrency c: linear up to its
// knee, flat after.
func curve(knee int, perWorker float64) func(c float64) float64 {
	return func(c float64) float64 { return math.Min(c, float64(knee)) * perWorker }
}

// levels returns n samples at each concurrency from lo to hi.
func levels(lo, hi, n int, x func(float64) float64, saturated bool) []fence.Sample {
	var out []fence.Sample
	for k := lo; k <= hi; k++ {
		for range n {
			out = append(out, fence.Sample{Concurrency: float64(k), Throughput: x(float64(k)), Saturated: saturated})
		}
	}
	return out
}

func TestSCTEstimate(t *testing.T) {
	knee8 := curve(8, 100)
	stalls := levels(9, 9, 30, func(float64) float64 { return 0 }, true)
	tests := []struct {
		name        string
		samples     []fence.Sample
		current     int
		max         int
		wantPermits int
		wantQLower  int
		wantReason  string
	}{
		{"plateau above the knee shrinks to Q_lower+1", levels(1, 12, 10, knee8, true), 12, 30, 9, 8, "levels off"},
		{"dead band keeps Q_lower+2", levels(1, 12, 10, knee8, true), 10, 30, 10, 8, "dead band"},
		{"a reservation below the knee grows to it", levels(1, 12, 10, knee8, true), 5, 30, 9, 8, "levels off"},
		{"rising at the reservation with waiters explores", levels(1, 4, 10, knee8, true), 4, 30, 5, 4, "explore"},
		{"one level known with waiters probes below", levels(6, 6, 10, knee8, true), 6, 30, 5, 6, "probe"},
		{"flat down to the lowest level known probes below it", levels(9, 12, 10, knee8, true), 12, 30, 8, 9, "probe"},
		{"a gap below a rising top is probed", append(levels(7, 7, 10, knee8, true), levels(10, 10, 10, knee8, true)...), 7, 30, 9, 10, "probe"},
		{"one level known without waiters: no evidence", levels(6, 6, 10, knee8, false), 6, 30, 6, 6, "no evidence"},
		{"exploration grows by a quarter", levels(1, 16, 10, curve(32, 100), true), 16, 30, 20, 16, "explore"},
		{"exploration stops at the maximum", levels(1, 4, 10, knee8, true), 4, 4, 4, 4, "no evidence"},
		{"rising without waiters: no evidence", levels(1, 4, 10, knee8, false), 4, 30, 4, 4, "no evidence"},
		{"rising below the reservation: no evidence", levels(1, 5, 10, knee8, true), 10, 30, 10, 5, "no evidence"},
		{"too few samples", levels(1, 12, 3, knee8, true), 12, 30, 12, 0, "enough samples"},
		{"no samples", nil, 7, 30, 7, 0, "enough samples"},
		{"stalls do not raise the knee", append(levels(1, 8, 10, knee8, true), stalls...), 9, 30, 9, 8, "dead band"},
		{"idle and garbage samples ignored", append(levels(1, 12, 10, knee8, true),
			fence.Sample{Concurrency: 0.2, Throughput: 1e9}, fence.Sample{Concurrency: math.NaN(), Throughput: 5},
			fence.Sample{Concurrency: 3, Throughput: math.Inf(1)}, fence.Sample{Concurrency: 3, Throughput: -1}), 12, 30, 9, 8, "levels off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := fence.SCT{}.Estimate(tt.samples, tt.current, tt.max)
			if e.Permits != tt.wantPermits || e.QLower != tt.wantQLower || !strings.Contains(e.Reason, tt.wantReason) {
				t.Errorf("Estimate = %+v; want permits %d, Q_lower %d, a reason with %q", e, tt.wantPermits, tt.wantQLower, tt.wantReason)
			}
		})
	}
}

// simulate runs the tuner against a scripted path: demand concurrent
// requests, a downstream whose throughput follows x, and noise on both
// the concurrency and the throughput of every 50 ms sample. It returns
// the reservation after each evaluation.
func simulate(t *testing.T, start, demand int, x func(float64) float64, noise float64, evaluations int) []int {
	t.Helper()
	f := mustNew(t, 64, []fence.Reservation{{"d1", start}})
	tu := fence.NewTuner(f)
	rng := rand.New(rand.NewPCG(42, uint64(demand)))
	var trace []int
	for range evaluations {
		for range 10 {
			limit := f.Path("d1").Permits()
			c := float64(min(limit, demand))
			c = math.Max(0, c+(rng.Float64()*2-1)*0.3)
			tput := x(c) * (1 + (rng.Float64()*2-1)*noise)
			tu.Observe("d1", fence.Sample{Concurrency: c, Throughput: tput, Saturated: demand > limit})
		}
		tu.Evaluate()
		trace = append(trace, f.Path("d1").Permits())
	}
	return trace
}

func changes(trace []int) int {
	n := 0
	for i := 1; i < len(trace); i++ {
		if trace[i] != trace[i-1] {
			n++
		}
	}
	return n
}

func TestTunerConvergesAndHoldsUnderNoise(t *testing.T) {
	// noise is the uniform relative noise of each sample's throughput
	// (±20 % is about the Poisson noise of 40 completions per sample);
	// lo..hi the band the reservation must stay in once settled: probes
	// go below the knee, the dead band and noisy explorations above.
	for _, tt := range []struct {
		noise  float64
		lo, hi int
	}{{0, 7, 10}, {0.1, 6, 11}, {0.2, 6, 16}} {
		trace := simulate(t, 2, 40, curve(8, 100), tt.noise, 400)
		final := trace[len(trace)-1]
		if final < 8 || final > tt.hi {
			t.Errorf("noise %.0f%%: final reservation %d, want 8 to %d (knee 8); trace %v", tt.noise*100, final, tt.hi, trace)
		}
		for i, v := range trace[50:] {
			if v < tt.lo || v > tt.hi {
				t.Errorf("noise %.0f%%: evaluation %d: reservation %d, outside %d..%d; trace %v", tt.noise*100, 50+i, v, tt.lo, tt.hi, trace[50:])
				break
			}
		}
		// No oscillation: the reservation holds still between the probes
		// that follow the forgetting of old levels (every 60 evaluations).
		if n := changes(trace[50:]); n > 6*(len(trace)-50)/60 {
			t.Errorf("noise %.0f%%: %d changes in %d evaluations of steady load; trace %v", tt.noise*100, n, len(trace)-50, trace[50:])
		}
	}
}

func TestTunerHoldsWithoutEvidence(t *testing.T) {
	// The demand (4) never reaches the reservation (10): nothing is known
	// above 4, so nothing changes.
	trace := simulate(t, 10, 4, curve(8, 100), 0.1, 100)
	if n := changes(trace); n != 0 {
		t.Errorf("%d changes with the demand below the reservation; trace %v", n, trace)
	}
}

func TestTunerRespectsLimits(t *testing.T) {
	f := mustNew(t, 10, []fence.Reservation{{"d1", 4}, {"d2", 4}})
	tu := fence.NewTuner(f, fence.WithLimits(2, 0))
	for range 3 {
		for _, s := range levels(1, 4, 10, curve(32, 10), true) {
			tu.Observe("d1", s)
		}
		tu.Evaluate()
	}
	// The pool (10) minus d2 (4) minus the local minimum (2) leaves 4.
	if got := f.Path("d1").Permits(); got != 4 {
		t.Errorf("d1 permits %d, want 4: the pool bounds the exploration", got)
	}
	if f.Local().Permits() != 2 {
		t.Errorf("local permits %d, want 2", f.Local().Permits())
	}
	if tu.Observe("nowhere", fence.Sample{}) || tu.Observe("local", fence.Sample{}) {
		t.Error("Observe accepted a path the tuner does not tune")
	}
}

// TestTunerRunFindsTheKnee runs the tuner on a live fence whose path's
// downstream serves 4 requests at a time, 10 ms each, under 12 closed-
// loop clients: the reservation starts at 2 and settles just above 4.
func TestTunerRunFindsTheKnee(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := mustNew(t, 32, []fence.Reservation{{"d1", 2}})
		var mu sync.Mutex
		var log []string
		tu := fence.NewTuner(f, fence.OnChange(func(path string, from, to int, e fence.Estimate) {
			mu.Lock()
			log = append(log, e.Reason)
			mu.Unlock()
			if path == "panic" {
				panic("never")
			}
		}))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go tu.Run(ctx)
		downstream := make(chan struct{}, 4)
		d1 := f.Path("d1")
		var wg sync.WaitGroup
		for range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					p, err := f.Acquire(ctx, d1)
					if err != nil {
						return
					}
					downstream <- struct{}{}
					time.Sleep(10 * time.Millisecond)
					<-downstream
					p.Release()
				}
			}()
		}
		time.Sleep(30 * time.Second)
		got := d1.Permits()
		e := tu.Estimates()["d1"]
		cancel()
		wg.Wait()
		if got < 5 || got > 6 {
			t.Errorf("d1 permits %d after 30 s, want 5 or 6 (knee 4); last estimate %+v; changes %q", got, e, log)
		}
		if e.QLower != 4 || math.Abs(e.Peak-400) > 40 {
			t.Errorf("estimate %+v, want Q_lower 4 at about 400/s", e)
		}
		if tu.Errors() != 0 {
			t.Errorf("tuner errors %d", tu.Errors())
		}
	})
}
