package detect

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// A generated mix of routes, each with the detector's objective, one of
// its own or none, some of them background work, and live requests of
// every route at random ages (each at least 25 % away from its route's
// objective). By construction, the requests late are those of foreground
// routes with an objective older than it; background routes and routes of
// no objective are not samples at all. The detector counts exactly those,
// and fires exactly when they are more than 1 − q of the samples (the
// throughput is flat: no completions).
//
// MOIRAI_OBJECTIVE_SEED replays one seed.
func TestObjectivesPerRouteGenerated(t *testing.T) {
	const def = 100 * ms
	seeds := make([]uint64, 0, 300)
	if v := os.Getenv("MOIRAI_OBJECTIVE_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, s)
	} else {
		for i := range uint64(300) {
			seeds = append(seeds, i+1)
		}
	}
	fired, quiet := 0, 0
	for _, seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 28))
		type route struct {
			objective  time.Duration
			background bool
		}
		routes := make([]route, 2+rng.IntN(8))
		for i := range routes {
			switch x := rng.IntN(6); {
			case x < 2:
			case x == 2:
				routes[i].objective = task.NoObjective
			default:
				routes[i].objective = time.Duration(5+rng.IntN(1995)) * ms
			}
			routes[i].background = rng.IntN(4) == 0
		}
		// How often a request of a route with an objective is late: from
		// rarely to mostly, so that some mixes miss the objective and
		// some do not.
		lateShare := rng.Float64() * 0.05
		if rng.IntN(2) == 0 {
			lateShare = rng.Float64()
		}
		s := &snapshot.Snapshot{At: time.Second, Window: 10 * ms}
		samples, late := 0, 0
		for id := range 20 + rng.IntN(200) {
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
				obj = 50 * ms
			}
			isLate := rng.Float64() < lateShare
			age := time.Duration(float64(obj) * (0.1 + 0.7*rng.Float64()))
			if isLate {
				age = time.Duration(float64(obj) * (1.25 + 3*rng.Float64()))
			}
			s.Tasks = append(s.Tasks, snapshot.Task{ID: uint64(id + 1), Kind: kind, Objective: r.objective, Age: age})
			if kind == task.Request && r.objective >= 0 {
				samples++
				if isLate {
					late++
				}
			}
		}
		d := NewSLO(0.99, def, WithMinSamples(1))
		d.Observe(&snapshot.Snapshot{At: 0})
		d.Observe(s)
		st := d.Status(s)
		if st.Samples != samples || st.Late != float64(late) {
			t.Fatalf("seed %d (replay with MOIRAI_OBJECTIVE_SEED=%d): %d samples, %v late; want %d and %d",
				seed, seed, st.Samples, st.Late, samples, late)
		}
		want := samples > 0 && float64(late) > 0.01*float64(samples)
		got, why := d.Detect(s)
		if got != want {
			t.Fatalf("seed %d (replay with MOIRAI_OBJECTIVE_SEED=%d): fired %v (%s); want %v (%d of %d late)",
				seed, seed, got, why, want, late, samples)
		}
		if got {
			fired++
		} else {
			quiet++
		}
	}
	t.Logf("%d mixes: %d fired, %d quiet, as constructed", len(seeds), fired, quiet)
}
