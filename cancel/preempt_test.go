package cancel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// TestPreemptionGenerated: generated timelines (seeded) of one lock shared
// by light classes (each task holds it for one step), one class whose
// tasks are light but now and then heavy (a report of the same route as a
// lookup, once one of its tasks has ended on its own), and heavy classes (each task holds it for seconds unless
// cancelled), observed and decided on every 5 ms step as the controller's
// loop does, with Preempt's orders carried out as the controller does: a
// task of an ordered class that arrives at the lock is cancelled there and
// never holds it. Then the light traffic stops for 10.5 s, one task of each
// heavy class arrives alone, and the traffic resumes.
//
// By construction the heavy classes are recurring culprits and no other
// class is: the policy must never order a light or sometimes-heavy class
// (their tasks end on their own); must order each heavy class once n of
// its tasks were cancelled, so that every later task of it arriving while
// the light tasks still wait now and then is cancelled at the lock; must
// let the heavy tasks that arrive after 10 s without a wait run (they end
// on their own, nobody waiting); and then never order those classes again.
//
// MOIRAI_PREEMPT_SEED replays one seed; a failure prints its seed.
func TestPreemptionGenerated(t *testing.T) {
	n := uint64(200)
	if raceEnabled {
		n = 20
	}
	timelines, preempted, held := sumSeeds(t, "MOIRAI_PREEMPT_SEED", n, preemptCase)
	t.Logf("%d timelines: %d heavy tasks cancelled at the lock, %d cancelled holding it (a class's first, and after its class ended on its own)", timelines, preempted, held)
}

// preemptCase runs one generated timeline and returns how many heavy tasks
// were cancelled at the lock and how many held it before their
// cancellation, or what went wrong.
func preemptCase(seed uint64) (preempted, heldFirst int, msg string) {
	rng := rand.New(rand.NewPCG(seed, 41))
	const step = 5 * ms
	after := 1 + rng.IntN(2)
	a := NewAtropos(MultiObjective, WithMinGain([]time.Duration{10 * ms, 25 * ms}[rng.IntN(2)]), WithPreemption(after))
	nLight, nHeavy := 1+rng.IntN(3), 1+rng.IntN(2)
	lightRate := 0.1 + 0.3*rng.Float64()
	busy := 800 + rng.IntN(400) // 4–6 s of traffic
	// Then no traffic until 10.5 s after the last wait (the queue the
	// traffic left drains first): one task of each heavy class arrives
	// alone; 2 s of traffic again from 2 s later.
	const quietSteps = int(10500 * ms / step)
	quiet, resume, lastWait := -1, -1, 0
	steps := busy + 2*quietSteps + 800
	type heavyClass struct {
		name      string
		next      int
		every     int
		cancelled int  // tasks of it cancelled (at the lock or holding it)
		ended     bool // a task of it ended on its own
	}
	var hcs []*heavyClass
	for i := range nHeavy {
		every := 80 + rng.IntN(100)
		hcs = append(hcs, &heavyClass{name: fmt.Sprintf("heavy%d", i), next: 40 + rng.IntN(every), every: every})
	}
	byName := map[string]*heavyClass{}
	for _, h := range hcs {
		byName[h.name] = h
	}
	var orders []string // the classes ordered at the last step
	var prevOrders []policy.Preemption
	// The sometimes-heavy class's tasks are light until one has ended on
	// its own; its heavy ones monopolize the lock as a heavy class's do,
	// and may be cancelled holding it, but never at the lock.
	sometimesEnded := false
	var live []*simTask
	id := uint64(1)
	held := int64(0)
	arrive := func(tk *simTask, st int) {
		if slices.Contains(orders, tk.class) {
			if !tk.heavy {
				msg = fmt.Sprintf("step %d: light task %d (%s) cancelled at the lock", st, tk.id, tk.class)
			}
			tk.cancelled, tk.decided = true, st
			if h := byName[tk.class]; h != nil {
				h.cancelled++
			}
			preempted++
			return
		}
		live = append(live, tk)
	}
	for st := 0; st < steps && msg == ""; st++ {
		kept := live[:0]
		for _, tk := range live {
			switch {
			case tk.cancelled:
				if tk.acquired >= 0 {
					held -= tk.units
				}
			case tk.acquired >= 0 && tk.left == 0:
				held -= tk.units
				if h := byName[tk.class]; h != nil {
					h.ended = true
				}
				sometimesEnded = sometimesEnded || tk.class == "sometimes"
			default:
				kept = append(kept, tk)
			}
		}
		live = kept
		if st >= busy && quiet < 0 && st-lastWait > quietSteps {
			quiet, resume = st, st+400
		}
		traffic := st < busy || (resume >= 0 && st >= resume)
		if traffic {
			for n := poisson(rng, lightRate); n > 0; n-- {
				class := fmt.Sprintf("light%d", rng.IntN(nLight))
				left := 1
				if rng.IntN(4) == 0 {
					class = "sometimes"
					if sometimesEnded && rng.IntN(10) == 0 {
						left = 40 + rng.IntN(80) // its heavy tasks: 0.2–0.6 s
					}
				}
				arrive(&simTask{id: id, class: class, units: 1, arrived: st, acquired: -1, left: left, work: left, contended: -1, decided: -1}, st)
				id++
			}
		}
		for i, h := range hcs {
			alone := quiet >= 0 && st == quiet+150*i // after the previous class's, which takes 100 steps
			if (traffic && st == h.next) || alone {
				tk := &simTask{id: id, class: h.name, heavy: true, units: 1, arrived: st, acquired: -1, left: 400 + rng.IntN(400), contended: -1, decided: -1}
				if alone {
					tk.left = 100 // alone: it ends on its own, nobody waiting
				}
				id++
				before := h.cancelled
				arrive(tk, st)
				switch {
				case quiet >= 0 && st >= quiet && h.cancelled > before:
					msg = fmt.Sprintf("step %d: heavy task %d (%s) cancelled at the lock %s", st, tk.id, h.name,
						map[bool]string{true: "after its class ended on its own", false: "after 10.5 s with nobody waiting"}[st > quiet])
				case st < busy && h.cancelled == before && before >= after && h.ended == false && st > 0:
					// Its class has `after` cancellations: it must be
					// refused at the lock while the light tasks wait now
					// and then (they do, at these rates, well within 10 s).
					msg = fmt.Sprintf("step %d: heavy task %d (%s) let through to the lock after %d of its class were cancelled (preemption after %d)", st, tk.id, h.name, before, after)
				}
				for h.next <= st {
					h.next += h.every
				}
			}
		}
		s, w := simStep(live, st, step, resource.KindLock, 0, &held)
		if w > 0 {
			lastWait = st
		}
		a.Observe(s)
		decided := a.Decide(s)
		for _, d := range decided {
			i := slices.IndexFunc(live, func(x *simTask) bool { return x.id == d.Task })
			if i < 0 {
				return 0, 0, fmt.Sprintf("step %d: cancelled task %d, not live", st, d.Task)
			}
			tk := live[i]
			if !tk.heavy && tk.work <= 1 {
				return 0, 0, fmt.Sprintf("step %d: cancelled light task %d (%s), a victim: %s", st, tk.id, tk.class, d.Reason)
			}
			tk.cancelled, tk.decided = true, st
			if h := byName[tk.class]; h != nil {
				h.cancelled++
				heldFirst++
			}
		}
		got := a.Preempt(s, nil)
		for _, o := range got {
			for _, q := range prevOrders {
				// A step with no cancellation leaves a standing order as
				// it was: the controller sets orders again only when they
				// change.
				if len(decided) == 0 && q.Class == o.Class && q.Reason != o.Reason {
					return 0, 0, fmt.Sprintf("step %d: the order on %s changed its reason from one step to the next (%q, then %q): the controller would set it again each step", st, o.Class, q.Reason, o.Reason)
				}
			}
		}
		prevOrders = got
		orders = orders[:0]
		for _, o := range got {
			if o.Resource != 0 {
				return 0, 0, fmt.Sprintf("step %d: an order on resource %d of 1", st, o.Resource)
			}
			if h := byName[o.Class]; h == nil || h.ended {
				return 0, 0, fmt.Sprintf("step %d: class %q ordered: its tasks end on their own", st, o.Class)
			}
			orders = append(orders, o.Class)
		}
		for _, tk := range live {
			if tk.acquired >= 0 && !tk.cancelled && tk.left > 0 {
				tk.left--
			}
		}
	}
	if msg != "" {
		return 0, 0, msg
	}
	for _, h := range hcs {
		if !h.ended {
			return 0, 0, fmt.Sprintf("class %s: its task alone after the quiet did not end on its own", h.name)
		}
	}
	return preempted, heldFirst, ""
}

// TestPreemptBounded: classes named by requests cannot grow the culprit
// count past maxCulprits, and an order names a resource of the snapshot.
func TestPreemptBounded(t *testing.T) {
	a := NewAtropos(MultiObjective, WithPreemption(1))
	s := &snapshot.Snapshot{At: time.Second, Window: 5 * ms,
		Resources: []snapshot.Resource{{Name: "r", Kind: resource.KindLock, Waiters: 1, WindowWaits: 1}}}
	for i := range 3 * maxCulprits {
		s.Tasks = []snapshot.Task{{ID: uint64(i + 1), Class: fmt.Sprint("c", i), Cancellable: true, First: 0, N: 1}}
		s.Usage = []snapshot.Usage{{Task: 0, Res: 0, Usage: task.Usage{Held: 1}}}
		a.countCulprit(s, 0)
		if len(a.culprits) > maxCulprits {
			t.Fatalf("%d classes counted; want at most %d", len(a.culprits), maxCulprits)
		}
	}
	if got := NewAtropos(MultiObjective).Preempt(s, nil); len(got) != 0 {
		t.Errorf("orders without WithPreemption: %v", got)
	}
}

// TestPreemptedTaskTeachesNothing: a task cancelled at the lock on the
// policy's orders, seen live by one snapshot before its cancellation and
// gone by the next, is told to the policy (Preempted) before that next
// snapshot: its end is a cancelled task's, which teaches its class
// nothing. Taken for one that ended on its own, it would lower the class's
// learned use of the lock by a quarter each time.
func TestPreemptedTaskTeachesNothing(t *testing.T) {
	res := []snapshot.Resource{{Name: "r", Kind: resource.KindLock}}
	snap := func(at time.Duration, tasks ...snapshot.Task) *snapshot.Snapshot {
		s := &snapshot.Snapshot{At: at, Window: 5 * ms, Resources: res}
		for i, tk := range tasks {
			tk.First, tk.N = int32(i), 1
			s.Tasks = append(s.Tasks, tk)
			u := task.Usage{}
			if tk.ID == 1 {
				u.Held, u.Hold = 1, time.Second
			}
			s.Usage = append(s.Usage, snapshot.Usage{Task: int32(i), Res: 0, Usage: u})
		}
		return s
	}
	learn := func(tell bool) float64 {
		a := NewAtropos(MultiObjective, WithPreemption(1))
		// A culprit cancelled holding the lock for a second, then gone.
		a.Observe(snap(5*ms, snapshot.Task{ID: 1, Class: "report", Cancellable: true, Cancelled: true}))
		a.Observe(snap(10 * ms))
		if !a.uses.AtLeast("report", "r") {
			t.Fatal("the cancelled culprit taught no bound")
		}
		// The class's next task, seen live, then cancelled at the lock.
		a.Observe(snap(15*ms, snapshot.Task{ID: 2, Class: "report", Cancellable: true}))
		if tell {
			a.Preempted([]uint64{2})
		}
		a.Observe(snap(20 * ms))
		typical, _ := a.uses.Typical("report", "r")
		if tell && !a.uses.AtLeast("report", "r") {
			t.Error("the class is no longer known only by its bound")
		}
		return typical
	}
	told, untold := learn(true), learn(false)
	if told < 0.99 {
		t.Errorf("the class's learned use of the lock: %.3f s after a preempted task; want 1 s, as before it", told)
	}
	if untold >= told {
		t.Errorf("a preempted task taken for an ended one changed nothing (%.3f s): the test shows nothing", untold)
	}
}
