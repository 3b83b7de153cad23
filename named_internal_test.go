package moirai

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai/penalty"
	"github.com/moirai-go/moirai/resource"
)

// The controller's semaphores and queues name a sole holder of one unit in
// their units word, as its mutexes name their holder, and add the hold to
// the holder's counters when it ends (see resource.Semaphore). A plain
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

func (m semMix) run(ctl *Controller, s *resource.Semaphore) (decisions []string, failed int) {
	var wg sync.WaitGroup
	var fmu sync.Mutex
	fail := func(err error) {
		if err != nil {
			fmu.Lock()
			failed++
			fmu.Unlock()
		}
	}
	wg.Go(func() {
		ctx, tk := ctl.Begin(context.Background(), Spec{Class: "heavy", Cancellable: m.cancellable})
		var err error
		defer func() { tk.End(err); fail(err) }()
		for i := range m.heavyRounds {
			var p resource.Permit
			if p, err = s.Acquire(ctx, 1); err != nil {
				return
			}
			if m.nested {
				time.Sleep(m.heavy / 2)
				var q resource.Permit
				if q, err = s.Acquire(ctx, 1); err != nil {
					_ = p.Release()
					return
				}
				time.Sleep(m.heavy - m.heavy/2)
				_ = q.Release()
			} else {
				time.Sleep(m.heavy)
			}
			if err = p.Release(); err != nil {
				return
			}
			tk.Progress(int64(i+1), int64(m.heavyRounds))
		}
	})
	for i := range m.gap {
		time.Sleep(m.gap[i])
		wg.Go(func() {
			ctx, tk := ctl.Begin(context.Background(), Spec{Class: "light", Cancellable: m.cancellable})
			p, err := s.Acquire(ctx, 1)
			if err == nil {
				time.Sleep(m.light[i])
				err = p.Release()
			}
			tk.End(err)
			fail(err)
		})
	}
	wg.Wait()
	for _, d := range ctl.Decisions() {
		decisions = append(decisions, fmt.Sprintf("%s %v %s %v", d.Policy, d.Action, d.TaskClass, d.Outcome))
	}
	return decisions, failed
}

func TestNamedSemaphoreSameDecisions(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	n := 12
	if testing.Short() {
		n = 4
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	controllers := []struct {
		name string
		opts []Option
	}{
		{"atropos", []Option{WithSLO(0.99, 50*time.Millisecond)}},
		{"pbox", []Option{WithPolicy(penalty.New()), WithTick(20*time.Millisecond, 5*time.Millisecond)}},
	}
	acted := 0
	var count [2]int
	for i := range n {
		mix := semMix{lockMix: randomMix(rng), nested: rng.IntN(2) == 0}
		mix.size = 1
		if mix.nested {
			mix.size = 2 // the heavy task's second unit leaves none free
		}
		for _, c := range controllers {
			var got [2][]string
			var failed [2]int
			for plain := range 2 {
				synctest.Test(t, func(t *testing.T) {
					ctl := New(c.opts...)
					defer ctl.Close()
					s := ctl.Semaphore("pool", mix.size)
					if plain == 1 {
						s = resource.NewSemaphore(ctl.mustRegister("pool:plain", resource.KindQueue, mix.size), mix.size)
					}
					got[plain], failed[plain] = mix.run(ctl, s)
				})
			}
			kinds := func(ds []string) []string { return slices.Compact(slices.Sorted(slices.Values(ds))) }
			first := func(ds []string) string {
				if len(ds) == 0 {
					return ""
				}
				return ds[0]
			}
			if first(got[0]) != first(got[1]) || !slices.Equal(kinds(got[0]), kinds(got[1])) || failed[0] != failed[1] {
				t.Errorf("seed %d, scenario %d (%s, size %d, nested %v, heavy %v): named holder: %d failed, decisions %q; task accounting: %d failed, decisions %q",
					seed, i, c.name, mix.size, mix.nested, mix.heavy, failed[0], got[0], failed[1], got[1])
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
	t.Logf("%d of %d runs led to decisions: %d with the named holder, %d with the task accounting", acted, 2*n, count[0], count[1])
}
