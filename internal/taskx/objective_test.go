package taskx_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/task"
)

// route is a generated route: its objective (0: the default, NoObjective:
// none, else its own) and whether it is background work.
type route struct {
	objective  time.Duration
	background bool
}

// genRoutes draws n routes: a third on the default objective, a sixth
// with none, the rest with their own between 5 ms and 2 s; a fifth of
// them background.
func genRoutes(rng *rand.Rand, n int) []route {
	rs := make([]route, n)
	for i := range rs {
		switch x := rng.IntN(6); {
		case x < 2:
		case x == 2:
			rs[i].objective = task.NoObjective
		default:
			rs[i].objective = time.Duration(5+rng.IntN(1995)) * time.Millisecond
		}
		rs[i].background = rng.IntN(5) == 0
	}
	return rs
}

// seeds returns the seeds a generated test runs: env's one to replay, or
// 1..n.
func seeds(t *testing.T, env string, n int) []uint64 {
	if v := os.Getenv(env); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return []uint64{s}
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// Ended tasks' latencies land in the totals' histogram scaled to the
// default objective: read against it, the histogram counts exactly the
// tasks that missed their own objective; background tasks and tasks of no
// objective are not in it. Each task's latency is drawn at least 25 %
// away from its objective, farther than the histogram's bucket width, so
// the count is exact by construction.
//
// MOIRAI_OBJECTIVE_SEED replays one seed.
func TestLatencyScaledToTheObjectiveGenerated(t *testing.T) {
	const def = 100 * time.Millisecond
	for _, seed := range seeds(t, "MOIRAI_OBJECTIVE_SEED", 50) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 28))
			routes := genRoutes(rng, 2+rng.IntN(8))
			reg := task.NewRegistry(task.Options{Objective: def})
			type run struct {
				t   *task.Task
				lat time.Duration
			}
			var runs []run
			wantLate, wantIn := 0, 0
			for range 20 + rng.IntN(80) {
				r := routes[rng.IntN(len(routes))]
				kind := task.Request
				if r.background {
					kind = task.Background
				}
				obj := r.objective
				if obj == 0 {
					obj = def
				}
				if obj < 0 {
					obj = time.Duration(5+rng.IntN(1995)) * time.Millisecond // none: any latency
				}
				late := rng.IntN(2) == 0
				lat := time.Duration(float64(obj) * (0.1 + 0.7*rng.Float64()))
				if late {
					lat = time.Duration(float64(obj) * (1.25 + 3*rng.Float64()))
				}
				_, tk := reg.Begin(context.Background(), task.Spec{Class: fmt.Sprint(r), Kind: kind, Objective: r.objective})
				runs = append(runs, run{tk, lat})
				if kind == task.Request && r.objective >= 0 {
					wantIn++
					if late {
						wantLate++
					}
				}
			}
			slices.SortFunc(runs, func(a, b run) int { return int(a.lat - b.lat) })
			var slept time.Duration
			for _, r := range runs {
				time.Sleep(r.lat - slept)
				slept = r.lat
				r.t.End(nil)
			}
			var tot task.Totals
			reg.TotalsInto(&tot)
			if tot.Ended != uint64(len(runs)) || tot.Latency.Count() != uint64(wantIn) {
				t.Fatalf("seed %d (replay with MOIRAI_OBJECTIVE_SEED=%d): %d ended, %d in the histogram; want %d and %d",
					seed, seed, tot.Ended, tot.Latency.Count(), len(runs), wantIn)
			}
			if got := tot.Latency.Above(def); got != float64(wantLate) {
				t.Fatalf("seed %d (replay with MOIRAI_OBJECTIVE_SEED=%d): %v above the default objective; want the %d that missed their own",
					seed, seed, got, wantLate)
			}
		})
	}
}

// Refine replaces a live task's spec, which the cancellation's check then
// reads; a cancelled or ended task keeps its own.
func TestRefine(t *testing.T) {
	reg := task.NewRegistry(task.Options{})
	_, tk := reg.Begin(context.Background(), task.Spec{Class: "outer", Cancellable: true})
	if !taskx.Refine(tk, task.Spec{Class: "inner", Kind: task.Background, Objective: time.Second}) {
		t.Fatal("refine of a live task refused")
	}
	if sp := tk.Spec(); sp.Class != "inner" || sp.Kind != task.Background || sp.Objective != time.Second || sp.Goal != task.DefaultGoal {
		t.Errorf("spec %+v; want the refined one, defaults applied", sp)
	}
	if err := taskx.Cancel(tk, "x"); err == nil {
		t.Error("cancelled a task refined to not cancellable")
	}
	taskx.Refine(tk, task.Spec{Class: "inner", Cancellable: true})
	if err := taskx.Cancel(tk, "x"); err != nil {
		t.Fatal(err)
	}
	if taskx.Refine(tk, task.Spec{Class: "late"}) || tk.Spec().Class != "inner" {
		t.Errorf("a cancelled task was refined: %+v", tk.Spec())
	}
	tk.End(nil)
	if taskx.Parent(tk) != context.Background() {
		t.Error("Parent is not the context the task was begun from")
	}
}
