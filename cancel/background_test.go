package cancel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// A generated contended queue (a pool or a semaphore) filled by a few
// heavy holders (old, holding several units each for seconds: every one a
// candidate) beside light holders of a class that holds a unit for a few
// milliseconds (never a candidate) and light waiters. Some heavy holders
// and some light ones are marked background. By construction:
//
//   - when a heavy holder is background, the choice is a background heavy
//     holder (the only one, when only one is);
//   - a light background task, which frees nothing worth a cancellation,
//     is never chosen;
//   - when no heavy holder is background, the choice is the one the
//     policy makes with every task foreground: background marks on tasks
//     that are not candidates change nothing.
//
// MOIRAI_BACKGROUND_SEED replays one seed.
func TestBackgroundFirstGenerated(t *testing.T) {
	seeds := genSeeds(t, "MOIRAI_BACKGROUND_SEED", 400)
	var withBG, withoutBG int
	for _, seed := range seeds {
		msg, bg := backgroundCase(seed)
		if msg != "" {
			t.Fatalf("seed %d (replay with MOIRAI_BACKGROUND_SEED=%d): %s", seed, seed, msg)
		}
		if bg {
			withBG++
		} else {
			withoutBG++
		}
	}
	t.Logf("%d situations: %d with a background candidate, chosen; %d without, the foreground choice unchanged", len(seeds), withBG, withoutBG)
}

func backgroundCase(seed uint64) (msg string, bg bool) {
	rng := rand.New(rand.NewPCG(seed, 28))
	const floor = 25 * ms
	capacity := int64(6 + rng.IntN(12))
	nHeavy := 1 + rng.IntN(4)
	units := make([]int64, nHeavy)
	left := capacity - int64(1+rng.IntN(3)) // room for light holders
	for i := range units {
		units[i] = 2
		left -= 2
	}
	for left > 0 {
		units[rng.IntN(nHeavy)]++
		left--
	}
	var heavyUnits int64
	for _, u := range units {
		heavyUnits += u
	}
	lights := int(capacity - heavyUnits)
	level := 0.2 + 0.7*rng.Float64()
	waiters := 1 + rng.IntN(20)
	bgHeavy := map[uint64]bool{}
	bgLight := map[uint64]bool{}
	build := func(labels bool) *snapshot.Snapshot {
		b := newBuilder(0).res("pool", resource.KindQueue, capacity, level, waiters)
		b.s.Resources[0].Held = capacity
		r := rand.New(rand.NewPCG(seed, 29)) // the same tasks for both labellings
		id := uint64(1)
		for i, u := range units {
			age := time.Duration(1+r.IntN(8)) * time.Second
			b.task(id, fmt.Sprintf("heavy%d", i), true, 0, 0, age, use{res: 0, held: u, hold: age})
			if labels && bgHeavy[id] {
				b.s.Tasks[len(b.s.Tasks)-1].Kind = task.Background
			}
			id++
		}
		for range lights {
			b.task(id, "light", true, 0, 0, 2*ms, use{res: 0, held: 1, hold: 2 * ms})
			if labels && bgLight[id] {
				b.s.Tasks[len(b.s.Tasks)-1].Kind = task.Background
			}
			id++
		}
		for range waiters {
			b.task(id, "light", true, 0, 0, time.Duration(1+r.IntN(50))*ms, use{res: 0, waiting: true})
			id++
		}
		return b.build()
	}
	// Which tasks are background: each heavy holder with probability ½ in
	// half the situations, none in the others; each light holder with ½.
	markHeavy := rng.IntN(2) == 0
	for i := range nHeavy {
		if markHeavy && rng.IntN(2) == 0 {
			bgHeavy[uint64(i+1)] = true
		}
	}
	for i := range lights {
		if rng.IntN(2) == 0 {
			bgLight[uint64(nHeavy+i+1)] = true
		}
	}
	policy := func() *Atropos {
		a := NewAtropos(MultiObjective, WithConfirmation(0), WithMinGain(floor))
		var at time.Duration
		teach(a, &at, "light", "pool", capacity, 1, 3*ms)
		return a
	}
	ev := policy().Evaluate(build(true))
	if ev.Chosen < 0 {
		return fmt.Sprintf("nothing chosen: %s", ev.Reason), len(bgHeavy) > 0
	}
	chosen := ev.Candidates[ev.Chosen]
	if bgLight[chosen.Task] {
		return fmt.Sprintf("chose light background task %d: %+v", chosen.Task, ev.Candidates), len(bgHeavy) > 0
	}
	if len(bgHeavy) > 0 {
		if !bgHeavy[chosen.Task] || !chosen.Background {
			return fmt.Sprintf("chose %d, want one of the background heavy holders %v: %+v", chosen.Task, keys(bgHeavy), ev.Candidates), true
		}
		if len(bgHeavy) == 1 && chosen.Task != keys(bgHeavy)[0] {
			return fmt.Sprintf("chose %d, want the one background heavy holder %v", chosen.Task, keys(bgHeavy)), true
		}
		for _, c := range ev.Candidates[1:] {
			if !c.Background && c.Why == "" {
				return fmt.Sprintf("foreground candidate %d does not say why it was not chosen", c.Task), true
			}
		}
		return "", true
	}
	base := policy().Evaluate(build(false))
	if base.Chosen < 0 || base.Candidates[base.Chosen].Task != chosen.Task {
		return fmt.Sprintf("chose %d with light background tasks, %+v without: marks on non-candidates must change nothing", chosen.Task, base.Candidates), false
	}
	if chosen.Task > uint64(nHeavy) {
		return fmt.Sprintf("chose %d, not a heavy holder", chosen.Task), false
	}
	return "", false
}

func keys(m map[uint64]bool) []uint64 {
	var out []uint64
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
