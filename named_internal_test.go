package moirai

import (
	"context"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai/resource"
)

// The controller's semaphores and queues name their holders of one unit
// in their units word and holder slots, as its mutexes name their holder,
// and add the hold to the holder's counters when it ends (see
// resource.Semaphore). A plain
// resource.NewSemaphore accounts every unit in the tasks' own counters,
// as all semaphores did before. TestNamedSemaphoreSameDecisions runs
// random scenarios (lockMix on a semaphore of 1 unit, or of 2 units with
// the heavy task taking the second for the second half of each hold, which
// moves its named unit to its counters) on each of the two and checks that the
// controller's decisions are the same, as TestCoarseHoldsSameDecisions
// does for the mutex's clock.

// semMix is a lockMix on a semaphore of size units; nested: the heavy task
// takes a second unit for the second half of each hold.
type semMix struct {
	lockMix
	size   int64
	nested bool
}

// hold is lockMix.run's hold on s.
func (m semMix) hold(s *resource.Semaphore) func(ctx context.Context, heavy bool, d time.Duration) error {
	return func(ctx context.Context, heavy bool, d time.Duration) error {
		p, err := s.Acquire(ctx, 1)
		if err != nil {
			return err
		}
		if heavy && m.nested {
			time.Sleep(d / 2)
			q, err := s.Acquire(ctx, 1)
			if err != nil {
				_ = p.Release()
				return err
			}
			time.Sleep(d - d/2)
			_ = q.Release()
		} else {
			time.Sleep(d)
		}
		return p.Release()
	}
}

func TestNamedSemaphoreSameDecisions(t *testing.T) {
	seed := decisionSeed(t)
	n := 12
	if testing.Short() {
		n = 4
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	acted, edges := 0, 0
	var count [2]int
	for i := range n {
		mix := semMix{lockMix: randomMix(rng), nested: rng.IntN(2) == 0}
		mix.size = 1
		if mix.nested {
			mix.size = 2 // the heavy task's second unit leaves none free
		}
		for _, c := range decisionControllers {
			run := func(plain int, lm lockMix) (got []string, failed int) {
				m := mix
				m.lockMix = lm
				synctest.Test(t, func(t *testing.T) {
					ctl := New(c.opts...)
					defer ctl.Close()
					s := ctl.Semaphore("pool", m.size)
					if plain == 1 {
						s = resource.NewSemaphore(ctl.mustRegister("pool:plain", resource.KindQueue, m.size), m.size)
					}
					got, failed = m.run(ctl, m.hold(s))
				})
				return got, failed
			}
			got, failed, ok, edge := agree(run, mix.lockMix)
			if !ok {
				t.Errorf("seed %d, scenario %d (%s, size %d, nested %v, heavy %v): named holder: %d failed, decisions %q; task accounting: %d failed, decisions %q, and none of it with arrivals shifted by %v",
					seed, i, c.name, mix.size, mix.nested, mix.heavy, failed[0], got[0], failed[1], got[1], edgeShifts)
			}
			if edge {
				edges++
				t.Logf("seed %d, scenario %d (%s, heavy %v): on a knife's edge: the task accounting decides as the named holder with arrivals shifted by a few µs", seed, i, c.name, mix.heavy)
			}
			if len(got[0]) > 0 {
				acted++
			}
			count[0] += len(got[0])
			count[1] += len(got[1])
		}
	}
	if acted == 0 {
		t.Errorf("seed %d: no scenario led to a decision: the test compares nothing", seed)
	}
	t.Logf("%d of %d runs led to decisions: %d with the named holder, %d with the task accounting; %d on a knife's edge", acted, 2*n, count[0], count[1], edges)
}
