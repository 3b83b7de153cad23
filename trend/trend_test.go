package trend_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
	"github.com/moirai-go/moirai/trend"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// world is a generated trajectory of one capacity-bounded resource, with
// the ground truth known by construction: which task is a culprit (its
// share eats the victims' part, and their misses or waits rise in
// proportion) and which is honest heavy work (its share fits in the spare
// capacity, and the victims' rate stays at its calm baseline).
type world struct {
	rng  *rand.Rand
	kind resource.Kind
	cap  int64
	free int64 // capacity the victims' working set leaves spare

	tick     time.Duration
	base     float64 // calm miss/wait rate of the victims, per second
	victims  float64 // the victims' rate of misses or waits once their whole part is taken
	culprit  *actor
	heavy    *actor
	deadline time.Duration // the culprit must be cancelled by then (objective missed)

	now      time.Duration
	waits    int64 // cumulative victims' waits
	evicted  int64 // cumulative victims' units the culprit evicted
	acts     []policy.Decision
	cancelAt time.Duration
}

type actor struct {
	id      uint64
	start   time.Duration
	rate    float64 // units per second while growing
	step    bool    // takes all its units at once
	target  int64
	held    int64
	fill    float64 // units grown, fractional
	gone    bool
	culprit bool
}

func (a *actor) advance(now, tick time.Duration) {
	if a == nil || a.gone || now < a.start {
		return
	}
	if a.step {
		a.held = a.target
		return
	}
	a.fill = min(float64(a.target), a.fill+a.rate*tick.Seconds())
	a.held = int64(a.fill)
}

// generate builds a world from seed: mode 0 a culprit alone, 1 a harmless
// heavy task alone, 2 both (the heavy task first), 3 nothing but the load.
func generate(seed uint64) *world {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	w := &world{rng: rng, tick: []time.Duration{5 * time.Millisecond, 10 * time.Millisecond}[rng.IntN(2)]}
	if rng.IntN(3) == 0 {
		w.kind = resource.KindQueue
		w.cap = int64(4 + rng.IntN(61))
	} else {
		w.kind = resource.KindMemory
		w.cap = int64(200 + rng.IntN(20000))
	}
	hot := 0.3 + 0.5*rng.Float64() // the victims' part of the capacity
	w.free = int64(float64(w.cap) * (1 - hot))
	w.base = 20 * rng.Float64()
	w.victims = 500 + 3000*rng.Float64()
	mode := rng.IntN(4)
	if mode == 1 || mode == 2 {
		// Honest heavy work: at least a third of the capacity, all within
		// the spare part.
		tgt := int64(float64(w.free) * (0.6 + 0.4*rng.Float64()))
		w.heavy = &actor{id: 2, start: time.Duration(200+rng.IntN(300)) * time.Millisecond,
			target: tgt, step: w.kind == resource.KindQueue, rate: float64(w.cap) * (1 + 9*rng.Float64())}
	}
	if mode == 0 || mode == 2 {
		// The culprit takes the spare part and then the victims': half
		// of their part is gone t50 after it started eating it.
		t50 := time.Duration(50+rng.IntN(350)) * time.Millisecond
		victimsPart := w.cap - w.free
		rate := 0.5 * float64(victimsPart) / t50.Seconds()
		spare := w.free
		if w.heavy != nil {
			spare -= w.heavy.target
		}
		c := &actor{id: 1, culprit: true, start: time.Duration(1000+rng.IntN(500)) * time.Millisecond,
			target: w.cap, rate: rate, step: w.kind == resource.KindQueue && rng.IntN(2) == 0}
		if c.step {
			// All at once: a parallel request taking most slots.
			c.target = spare + int64(math.Ceil(0.6*float64(victimsPart)))
			w.deadline = c.start + 100*time.Millisecond
		} else {
			w.deadline = c.start + time.Duration(float64(spare)/rate*float64(time.Second)) + t50
		}
		w.culprit = c
	}
	return w
}

// damage is the fraction of the victims' part taken from them now.
func (w *world) damage() float64 {
	used := int64(0)
	for _, a := range []*actor{w.culprit, w.heavy} {
		if a != nil && !a.gone {
			used += a.held
		}
	}
	return min(1, float64(max(used-w.free, 0))/float64(w.cap-w.free))
}

// poisson draws a count of mean m.
func poisson(rng *rand.Rand, m float64) int64 {
	if m > 50 {
		return max(0, int64(math.Round(m+math.Sqrt(m)*rng.NormFloat64())))
	}
	l, k, p := math.Exp(-m), int64(0), 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// snap advances the world by one tick and returns its snapshot.
func (w *world) snap(prevWaits int64) *snapshot.Snapshot {
	w.now += w.tick
	w.culprit.advance(w.now, w.tick)
	w.heavy.advance(w.now, w.tick)
	rate := w.base + w.victims*w.damage()
	w.waits += poisson(w.rng, rate*w.tick.Seconds())
	s := &snapshot.Snapshot{At: w.now, Window: w.tick,
		Resources: []snapshot.Resource{{ID: 1, Name: "pool", Kind: w.kind, Capacity: w.cap,
			Waits: w.waits, WindowWaits: w.waits - prevWaits}}}
	// A few light tasks holding a unit each, as the victims do.
	for i := range 3 {
		s.Tasks = append(s.Tasks, snapshot.Task{ID: uint64(100 + int(w.now/w.tick)*3 + i), Class: "light", Cancellable: true})
	}
	for _, a := range []*actor{w.culprit, w.heavy} {
		if a != nil && !a.gone && a.held > 0 {
			s.Tasks = append(s.Tasks, snapshot.Task{ID: a.id, Class: "heavy", Cancellable: true})
		}
	}
	for i := range s.Tasks {
		t := &s.Tasks[i]
		held, evicted := int64(1), int64(0)
		switch t.ID {
		case 1:
			held = w.culprit.held
			// What it takes beyond the spare part was the victims'
			// (a Memory's evictions; slots are not evicted).
			spare := w.free
			if w.heavy != nil && !w.heavy.gone {
				spare -= w.heavy.held
			}
			if w.kind == resource.KindMemory {
				w.evicted = max(w.evicted, held-spare)
				evicted = w.evicted
			}
		case 2:
			held = w.heavy.held
		}
		t.First, t.N = int32(len(s.Usage)), 1
		s.Usage = append(s.Usage, snapshot.Usage{Task: int32(i), Res: 0,
			Usage: task.Usage{Resource: 1, Held: held, Evictions: evicted}})
	}
	return s
}

// runFor is how long a world runs.
const runFor = 3 * time.Second

// run drives the policy over the world for 3 s, carrying out
// cancellations (the task is gone at the next step) and ignoring
// penalties (the worst case: a penalty that does not slow the culprit).
func (w *world) run(p *trend.Policy) {
	prev := int64(0)
	for w.now < runFor {
		s := w.snap(prev)
		prev = w.waits
		p.Observe(s)
		for _, d := range p.Decide(s) {
			w.acts = append(w.acts, d)
			if d.Action != policy.Cancel {
				continue
			}
			for _, a := range []*actor{w.culprit, w.heavy} {
				if a != nil && a.id == d.Task && !a.gone {
					a.gone = true
					if a.culprit {
						w.cancelAt = w.now
					}
				}
			}
		}
	}
}

func (w *world) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kind %v capacity %d spare %d tick %v calm %.1f/s victims %.0f/s", w.kind, w.cap, w.free, w.tick, w.base, w.victims)
	for _, a := range []*actor{w.culprit, w.heavy} {
		if a != nil {
			fmt.Fprintf(&b, "; task %d culprit=%v from %v to %d units at %.0f/s step=%v", a.id, a.culprit, a.start, a.target, a.rate, a.step)
		}
	}
	if w.culprit != nil {
		fmt.Fprintf(&b, "; deadline %v cancelled at %v", w.deadline, w.cancelAt)
	}
	for _, d := range w.acts {
		fmt.Fprintf(&b, "\n\t%v task %d: %s", d.Action, d.Task, d.Reason)
	}
	return b.String()
}

// TestGenerated checks on generated trajectories that every culprit is
// cancelled before its victims' objective is missed, that honest heavy
// work is never acted on, and that a world without a culprit sees no
// action at all.
func TestGenerated(t *testing.T) {
	const n = 2000
	culprits, caught, wrong := 0, 0, 0
	for seed := uint64(1); seed <= n; seed++ {
		w := generate(seed)
		w.run(trend.New())
		for _, d := range w.acts {
			if d.Task != 1 {
				wrong++
				t.Logf("seed %d: acted on task %d, not the culprit: %v", seed, d.Task, w)
				break
			}
		}
		if w.culprit == nil || w.deadline > runFor-100*time.Millisecond {
			continue // no culprit, or one whose damage comes too late to judge
		}
		culprits++
		switch {
		case w.cancelAt == 0:
			t.Logf("seed %d: culprit never cancelled: %v", seed, w)
		case w.cancelAt > w.deadline:
			t.Logf("seed %d: culprit cancelled after its deadline: %v", seed, w)
		default:
			caught++
		}
	}
	t.Logf("%d worlds, %d with a culprit, %d of them cancelled in time; %d worlds where another task was acted on", n, culprits, caught, wrong)
	// The limits, measured: a culprit that takes half the victims' part
	// within a tick or two of its first damage, and honest heavy work
	// still growing when a culprit starts, are beyond any trajectory.
	if miss := culprits - caught; float64(miss) > 0.02*float64(culprits) {
		t.Errorf("%d of %d culprits not cancelled before their deadline (more than 2 %%); seeds above", miss, culprits)
	}
	if float64(wrong) > 0.002*n {
		t.Errorf("%d of %d worlds saw an action on a task that is not a culprit (more than 0.2 %%); seeds above", wrong, n)
	}
}
