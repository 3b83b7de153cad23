package cancel

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
)

// TestMixedClassCulpritByOwnProgress: generated timelines (seeded) of one
// lock or queue used by one class whose tasks differ by orders of
// magnitude, as etcd's Range calls do (a range over ten keys and one over
// half the key space are one class): light tasks hold one unit for a step
// or, stretched by the host, for up to ten, and report their progress as
// a walk does, one key of a bound on the walk's length (under 1 %), or
// not at all; heavy tasks take the whole resource for seconds unless
// cancelled and report their progress the same way (keys visited of a
// bound up to twice their length); in half the timelines the first heavy
// task is not cancellable (a maintenance walk, which runs to its end and
// shows the class mixed). Heavy tasks come once light ones have ended: a
// class whose first task to end was heavy looks heavy, which is another
// test's matter. Observed and decided on every 5 ms step as the
// controller's loop does.
//
// By construction every heavy task that holds the resource while others
// wait is the culprit, and no light task ever is. The policy must cancel
// no light task (but for the cold-start limit the stretched-host tests
// allow: one, while the class has no history on the resource, on the
// measured contention and its half-done guess); cancel every heavy task
// that monopolizes the resource;
// and, once it holds the class mixed (its history says nothing of any one
// task), cancel a heavy task at the first step it holds the resource
// while others wait with a progress of its own the estimates need not
// clamp (1 % or more) that leaves at least the minimum gain of use: the
// task is then known heavy by itself, and the measured contention need
// not be waited for.
//
// MOIRAI_OWNPROGRESS_SEED replays one seed; a failure prints its seed.
func TestMixedClassCulpritByOwnProgress(t *testing.T) {
	n := uint64(200)
	if testing.Short() {
		n = 40
	}
	seeds := genSeeds(t, "MOIRAI_OWNPROGRESS_SEED", n)
	var byProgress, measured, cold int
	for _, seed := range seeds {
		bp, m, c, msg := ownProgressCase(seed)
		if msg != "" {
			t.Fatalf("seed %d (replay with MOIRAI_OWNPROGRESS_SEED=%d): %s", seed, seed, msg)
		}
		byProgress += bp
		measured += m
		cold += c
	}
	if byProgress == 0 {
		t.Fatalf("%d timelines: no heavy task was ever known heavy by its own progress: the generator does not reach the rule", len(seeds))
	}
	t.Logf("%d timelines: %d culprits cancelled at the first step their own progress made them known heavy, %d found otherwise (the measured contention, the class not yet mixed); %d cold-start cancellations", len(seeds), byProgress, measured, cold)
}

// ownProgressCase runs one generated timeline and returns how many heavy
// tasks were cancelled as known heavy by their own progress and how many
// otherwise, whether a light task was cancelled at the cold start, or
// what went wrong.
func ownProgressCase(seed uint64) (byProgress, measured, cold int, msg string) {
	rng := rand.New(rand.NewPCG(seed, 61))
	const step = 5 * ms
	const class = "/KV/Range range"
	// The minimum gain: half an objective of 50 or 100 ms, well above the
	// light tasks' typical use (a step, some stretched to ten), so that
	// the class is light by its history and mixed by its heavy tasks (a
	// floor near the light tasks' typical use makes the class heavy by its
	// history once a maintenance walk ends, which is another rule's
	// matter).
	floor := []time.Duration{25 * ms, 50 * ms}[rng.IntN(2)]
	a := NewAtropos(MultiObjective, WithMinGain(floor))
	lock := rng.IntN(2) == 0
	capacity := int64(4 + rng.IntN(9))
	kind := resource.KindQueue
	if lock {
		capacity, kind = 0, resource.KindLock
	}
	cp := max(capacity, 1)
	lightRate := 0.1 + 0.3*rng.Float64()
	if !lock {
		lightRate *= float64(cp) / 2
	}
	lightReports := rng.IntN(2) == 0
	stretched := 0.05 * rng.Float64() // share of light tasks the host stretches
	const bound = 400_000             // the walks' bound on their length, in keys
	keysPerStep := 2_000 + rng.IntN(8_000)
	every := 80 + rng.IntN(120) // a heavy task every 0.4–1 s
	nextHeavy := 20 + rng.IntN(every)
	maintenance := rng.IntN(2) == 0 // the first heavy task is not cancellable
	steps := 800 + rng.IntN(400)

	type tk struct {
		simTask
		walk, bound int // keys it visits, and the bound on them it reports its progress against
		qualified   int // first step known heavy by its own progress while others waited; -1 none
	}
	var live, all []*tk
	lightEnded := false
	id := uint64(1)
	held := int64(0)
	for st := range steps {
		kept := live[:0]
		for _, x := range live {
			switch {
			case x.cancelled:
				if x.acquired >= 0 {
					held -= x.units
				}
			case x.acquired >= 0 && x.left == 0:
				held -= x.units
				lightEnded = lightEnded || !x.heavy
			default:
				kept = append(kept, x)
			}
		}
		live = kept
		for n := poisson(rng, lightRate); n > 0; n-- {
			left := 1
			if rng.Float64() < stretched {
				left = 2 + rng.IntN(9)
			}
			x := &tk{simTask: simTask{id: id, class: class, units: 1, arrived: st, acquired: -1, left: left, contended: -1, decided: -1, reports: lightReports},
				walk: 1 + rng.IntN(10), bound: bound, qualified: -1}
			id++
			live, all = append(live, x), append(all, x)
		}
		if st == nextHeavy && !lightEnded {
			nextHeavy++
		} else if st == nextHeavy {
			work := 80 + rng.IntN(320) // 0.4–2 s
			x := &tk{simTask: simTask{id: id, class: class, heavy: true, units: cp, arrived: st, acquired: -1, left: work, contended: -1, decided: -1, reports: true, work: work, fixed: maintenance},
				walk: work * keysPerStep, qualified: -1}
			maintenance = false
			x.bound = x.walk + rng.IntN(x.walk+1)
			id++
			live, all = append(live, x), append(all, x)
			nextHeavy += every
		}
		sims := make([]*simTask, len(live))
		for i, x := range live {
			sims[i] = &x.simTask
		}
		s, waiters := simStep(sims, st, step, kind, capacity, &held)
		for i, x := range live {
			if x.reports && x.acquired >= 0 {
				// A walk reports the keys it visited of its bound; a
				// light one reports its first key, the rest of its few
				// keys visited before the next report.
				done := 1
				if x.heavy {
					done = min((st-x.acquired+1)*keysPerStep, x.walk)
				}
				s.Tasks[i].Done, s.Tasks[i].Total = int64(done), int64(x.bound)
			}
		}
		a.Observe(s)
		if a.mixed(class) && waiters > 0 {
			for i, x := range live {
				if !x.heavy || x.fixed || x.qualified >= 0 || x.acquired < 0 || x.cancelled {
					continue
				}
				p := float64(s.Tasks[i].Done) / float64(s.Tasks[i].Total)
				if hold := s.Usage[i].Hold.Seconds(); p >= 0.01 && p < 1 && hold*(1-p)/p >= floor.Seconds() {
					x.qualified = st
				}
			}
		}
		for _, d := range a.Decide(s) {
			if d.Action != policy.Cancel {
				continue // the diagnosis that the class is mixed
			}
			var x *tk
			for _, y := range live {
				if y.id == d.Task {
					x = y
				}
			}
			_, history := a.uses.Typical(class, "r")
			switch {
			case x == nil:
				return 0, 0, 0, fmt.Sprintf("step %d: cancelled task %d, not live", st, d.Task)
			case !x.heavy && !history && cold == 0 && strings.Contains(d.Reason, "(half-done)"):
				cold++
			case !x.heavy:
				return 0, 0, 0, fmt.Sprintf("step %d: cancelled light task %d (held %d steps, reports %v; class history %v), a victim: %s",
					st, x.id, st-x.acquired, x.reports, history, d.Reason)
			}
			x.cancelled, x.decided = true, st
		}
		for _, x := range live {
			if x.acquired >= 0 && !x.cancelled && x.left > 0 {
				x.left--
			}
		}
	}
	for _, x := range all {
		if !x.heavy || x.fixed || x.contended < 0 || x.contended > steps-60 {
			continue
		}
		switch {
		case x.decided < 0:
			return 0, 0, 0, fmt.Sprintf("heavy task %d (acquired at step %d, others waiting from step %d) never cancelled", x.id, x.acquired, x.contended)
		case x.qualified >= 0 && x.decided > x.qualified:
			return 0, 0, 0, fmt.Sprintf("heavy task %d: known heavy by its own progress while others waited at step %d, cancelled at step %d, %v later",
				x.id, x.qualified, x.decided, time.Duration(x.decided-x.qualified)*step)
		case x.qualified >= 0:
			byProgress++
		default:
			measured++
		}
	}
	return byProgress, measured, cold, ""
}
