package cancel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/task"
)

// The minimum gain follows the objectives of the tasks waiting for the
// contended resource. Generated: per seed, classes with random
// objectives (the process default, none, background, or 5 ms – 4 s of
// their own), a few of them waiting for a lock held by a culprit whose
// future use is drawn away from the ground truth's threshold: half the
// tightest objective among the waiters whose misses count (the default
// objective's half, the policy's minimum gain, for a waiter of the
// default; the policy's minimum gain when none counts). A culprit above
// it is chosen; one below it is left out for no gain.
func TestMinGainFollowsWaiters(t *testing.T) {
	const def = 50 * ms // the process objective
	type class struct {
		name      string
		kind      task.Kind
		objective time.Duration
	}
	seeds := 300
	if testing.Short() {
		seeds = 60
	}
	var above, below int
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 28))
		classes := make([]class, 1+rng.IntN(5))
		for i := range classes {
			c := class{name: fmt.Sprintf("c%d", i), kind: task.Request}
			switch rng.IntN(5) {
			case 0: // the process default
			case 1:
				c.objective = task.NoObjective
			case 2:
				c.kind = task.Background
			default:
				c.objective = time.Duration(5e6 + rng.Int64N(int64(4*time.Second)))
			}
			classes[i] = c
		}
		floor := time.Duration(-1)
		b := newBuilder(0).res("lock", resource.KindLock, 0, 0.8, 0)
		waiters := 1 + rng.IntN(6)
		for w := range waiters {
			c := classes[rng.IntN(len(classes))]
			b.task(uint64(10+w), c.name, true, 0, 0, 5*ms, use{res: 0, waiting: true})
			b.s.Tasks[len(b.s.Tasks)-1].Kind = c.kind
			b.s.Tasks[len(b.s.Tasks)-1].Objective = c.objective
			if c.kind != task.Request || c.objective < 0 {
				continue
			}
			f := def / 2
			if c.objective > 0 {
				f = c.objective / 2
			}
			if floor < 0 || f < floor {
				floor = f
			}
		}
		if floor < 0 {
			floor = def / 2
		}
		b.s.Resources[0].Waiters = waiters
		// Progress 0.5 reported: the culprit's future use is its hold.
		worth := rng.IntN(2) == 0
		factor := 0.2 + 0.6*rng.Float64()
		if worth {
			factor = 1.2 + 3*rng.Float64()
		}
		future := time.Duration(factor * float64(floor))
		b.task(1, "culprit", true, 50, 100, future, use{res: 0, held: 1, hold: future})
		s := b.build()
		a := NewAtropos(MultiObjective, WithConfirmation(0), WithMinGain(def/2))
		ev := a.Evaluate(s)
		if got := ev.Levels[0].MinGain; got != floor {
			t.Errorf("seed %d: min gain %v, want %v", seed, got, floor)
		}
		chosen := ev.Chosen >= 0 && ev.Candidates[ev.Chosen].Task == 1
		if chosen != worth {
			t.Errorf("seed %d: culprit with future use %v, waiters' floor %v (classes %+v): chosen %v, want %v; reason %q",
				seed, future, floor, classes, chosen, worth, ev.Reason)
			continue
		}
		if worth {
			above++
		} else {
			below++
			if !slices.ContainsFunc(ev.NoGainTasks, func(x Excluded) bool { return x.Task == 1 }) {
				t.Errorf("seed %d: culprit below the floor not listed for no gain: %+v", seed, ev.NoGainTasks)
			}
		}
	}
	if above == 0 || below == 0 {
		t.Fatalf("generator drew %d culprits above the floor and %d below: want both", above, below)
	}
}
