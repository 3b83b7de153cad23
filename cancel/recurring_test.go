package cancel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// TestRecurringCulpritGenerated: generated timelines (seeded) of one lock
// or queue shared by light classes (each task holds one unit for one
// step) and heavy classes (each task takes the whole resource for seconds
// unless cancelled; some report their progress), observed and decided on
// every 5 ms step as the controller's loop does, with an overload
// detector firing throughout.
// The policy's cancellations take effect at the next step, as a task's
// own check of its context does.
//
// By construction every heavy task that holds the resource while others
// wait is the culprit, and no light task ever is. The policy must cancel
// no light task; cancel every heavy task that monopolizes the resource;
// and, for a heavy task of a class whose earlier task it already
// cancelled, cancel it at the first step it holds the resource while
// others wait: the class is known to monopolize the resource although
// none of its tasks ever ended on its own (each was cancelled). That
// holds when the cancelled task's use reached the minimum gain, or the
// use its reported progress implies did: with a floor of 10 ms, well
// under the time the measured contention takes, or when the class
// reports its progress.
//
// MOIRAI_RECURRING_SEED replays one seed; a failure prints its seed.
func TestRecurringCulpritGenerated(t *testing.T) {
	n, recurring, first := sumSeeds(t, "MOIRAI_RECURRING_SEED", 200, recurringCase)
	t.Logf("%d timelines: %d culprits of classes not known to be heavy yet found by the measured contention, %d recurring culprits cancelled at the step they monopolized the resource", n, first, recurring)
}

// simTask is one task of a generated timeline.
type simTask struct {
	id        uint64
	class     string
	heavy     bool
	units     int64
	arrived   int // step
	acquired  int // step; -1 while waiting
	left      int // steps of work left once acquired
	cancelled bool
	contended int // first step it held the resource while others waited; -1 none yet
	decided   int // step of its cancellation; -1 none
	known     bool
	reports   bool // it reports its progress: Done of work steps
	work      int
	fixed     bool // not cancellable
}

// simStep grants the resource to the waiting tasks of live, first come
// first served, updating held, and returns the step's snapshot of the one
// resource "r" (the tasks' progress is the caller's to set) and how many
// wait; it marks the step a task first holds while others wait.
func simStep(live []*simTask, st int, step time.Duration, kind resource.Kind, capacity int64, held *int64) (*snapshot.Snapshot, int) {
	cp := max(capacity, 1)
	for _, tk := range live {
		if tk.acquired >= 0 {
			continue
		}
		if *held+tk.units > cp {
			break
		}
		tk.acquired, *held = st, *held+tk.units
	}
	s := &snapshot.Snapshot{At: time.Duration(st+1) * step, Window: step}
	waiters := 0
	for _, tk := range live {
		if tk.acquired < 0 {
			waiters++
		}
	}
	s.Resources = []snapshot.Resource{{Name: "r", Kind: kind, Capacity: capacity, Held: *held, Waiters: waiters,
		WindowWait: time.Duration(waiters) * step}}
	for i, tk := range live {
		u := task.Usage{}
		if tk.acquired >= 0 {
			u.Held, u.Hold = tk.units, time.Duration(st-tk.acquired+1)*step
		} else {
			u.Waiting = 1
		}
		s.Tasks = append(s.Tasks, snapshot.Task{ID: tk.id, Class: tk.class, Kind: task.Request, Cancellable: !tk.fixed,
			Cancelled: tk.cancelled, Age: time.Duration(st-tk.arrived+1) * step, Exec: step, First: int32(i), N: 1})
		s.Usage = append(s.Usage, snapshot.Usage{Task: int32(i), Res: 0, Usage: u})
		if tk.acquired >= 0 && waiters > 0 && tk.contended < 0 {
			tk.contended = st
		}
	}
	return s, waiters
}

// recurringCase runs one generated timeline and returns how many
// recurring and first culprits it had, or what went wrong.
func recurringCase(seed uint64) (recurring, first int, msg string) {
	rng := rand.New(rand.NewPCG(seed, 32))
	const step = 5 * ms
	// The minimum gain: well under the time the measured contention
	// takes to find a culprit, or about that time (as with an objective
	// of 50 ms, whose half is the floor).
	floor := []time.Duration{10 * ms, 25 * ms}[rng.IntN(2)]
	a := NewAtropos(MultiObjective, WithMinGain(floor))
	lock := rng.IntN(2) == 0
	capacity := int64(4 + rng.IntN(9))
	kind := resource.KindQueue
	if lock {
		capacity, kind = 0, resource.KindLock
	}
	cp := max(capacity, 1)
	nLight, nHeavy := 1+rng.IntN(3), 1+rng.IntN(2)
	// Light arrivals per step: a load the resource serves with room.
	lightRate := 0.1 + 0.3*rng.Float64()
	if !lock {
		lightRate *= float64(cp) / 2
	}
	steps := 800 + rng.IntN(400) // 4–6 s
	type heavyClass struct {
		name      string
		next      int // step of the next arrival
		every     int
		reports   bool // its tasks report their progress
		cancelled bool // a task of it was cancelled before
	}
	var hcs []*heavyClass
	for i := range nHeavy {
		every := 80 + rng.IntN(100) // 0.4–0.9 s
		hcs = append(hcs, &heavyClass{name: fmt.Sprintf("heavy%d", i), next: 40 + rng.IntN(every), every: every, reports: rng.IntN(2) == 0})
	}
	byName := map[string]*heavyClass{}
	for _, h := range hcs {
		byName[h.name] = h
	}
	var live []*simTask // arrival order: the queue is FIFO
	var all []*simTask
	id := uint64(1)
	held := int64(0)
	for st := range steps {
		// Cancelled tasks let go; finished ones end.
		kept := live[:0]
		for _, tk := range live {
			switch {
			case tk.cancelled:
				if tk.acquired >= 0 {
					held -= tk.units
				}
			case tk.acquired >= 0 && tk.left == 0:
				held -= tk.units
			default:
				kept = append(kept, tk)
			}
		}
		live = kept
		// Arrivals.
		for n := poisson(rng, lightRate); n > 0; n-- {
			tk := &simTask{id: id, class: fmt.Sprintf("light%d", rng.IntN(nLight)), units: 1, arrived: st, acquired: -1, left: 1, contended: -1, decided: -1}
			id++
			live, all = append(live, tk), append(all, tk)
		}
		for _, h := range hcs {
			if st == h.next {
				// Its class is known to be heavy once a task of it was
				// cancelled, if that task's use, or the use its progress
				// implies, reached the floor: it reports its progress,
				// or the floor is well under the time to find it.
				tk := &simTask{id: id, class: h.name, heavy: true, units: cp, arrived: st, acquired: -1, left: 400 + rng.IntN(400), contended: -1, decided: -1,
					known: h.cancelled && (h.reports || floor == 10*ms), reports: h.reports}
				tk.work = tk.left
				id++
				live, all = append(live, tk), append(all, tk)
				h.next += h.every
			}
		}
		s, _ := simStep(live, st, step, kind, capacity, &held)
		for i, tk := range live {
			if tk.reports {
				s.Tasks[i].Done, s.Tasks[i].Total = int64(tk.work-tk.left), int64(tk.work)
			}
		}
		a.Observe(s)
		for _, d := range a.Decide(s) {
			var tk *simTask
			for _, x := range live {
				if x.id == d.Task {
					tk = x
				}
			}
			switch {
			case tk == nil:
				return 0, 0, fmt.Sprintf("step %d: cancelled task %d, not live", st, d.Task)
			case !tk.heavy:
				return 0, 0, fmt.Sprintf("step %d: cancelled light task %d (%s), a victim: %s", st, tk.id, tk.class, d.Reason)
			}
			tk.cancelled, tk.decided = true, st
			byName[tk.class].cancelled = true
		}
		// Work.
		for _, tk := range live {
			if tk.acquired >= 0 && !tk.cancelled && tk.left > 0 {
				tk.left--
			}
		}
	}
	for _, tk := range all {
		if !tk.heavy || tk.contended < 0 || tk.contended > steps-60 {
			continue
		}
		switch {
		case tk.decided < 0:
			return 0, 0, fmt.Sprintf("heavy task %d (%s, acquired at step %d, others waiting from step %d) never cancelled", tk.id, tk.class, tk.acquired, tk.contended)
		case tk.known && tk.decided != tk.contended:
			return 0, 0, fmt.Sprintf("heavy task %d (%s), of a class whose earlier task was cancelled: holds the resource while others wait from step %d, cancelled at step %d, %v later",
				tk.id, tk.class, tk.contended, tk.decided, time.Duration(tk.decided-tk.contended)*step)
		case tk.known:
			recurring++
		default:
			first++
		}
	}
	return recurring, first, ""
}

// poisson draws a Poisson count of the given mean (Knuth's method: the
// means here are small).
func poisson(rng *rand.Rand, mean float64) int {
	n, p := 0, rng.Float64()
	for l := math.Exp(-mean); p > l; n++ {
		p *= rng.Float64()
	}
	return n
}

// genSeeds returns the seeds 1 to n of a generated test, or the one seed
// its environment variable env names (to replay a failure).
func genSeeds(t *testing.T, env string, n uint64) []uint64 {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", env, v, err)
		}
		return []uint64{s}
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(i) + 1
	}
	return seeds
}

// sumSeeds runs one generated timeline per seed of genSeeds(t, env, n)
// and sums the two counts each returns; the first timeline that went
// wrong (a message) fails the test with its seed. It returns the number
// of timelines and the sums.
func sumSeeds(t *testing.T, env string, n uint64, run func(seed uint64) (a, b int, msg string)) (timelines, a, b int) {
	t.Helper()
	seeds := genSeeds(t, env, n)
	for _, seed := range seeds {
		x, y, msg := run(seed)
		if msg != "" {
			t.Fatalf("seed %d (replay with %s=%d): %s", seed, env, seed, msg)
		}
		a += x
		b += y
	}
	return len(seeds), a, b
}
