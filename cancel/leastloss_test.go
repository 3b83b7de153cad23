package cancel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// teach shows a the end of one task of class that held units of a
// resource named res (of the given capacity) for hold: two observed
// snapshots, the task in the first and gone from the second.
func teach(a *Atropos, at *time.Duration, class, res string, capacity, units int64, hold time.Duration) {
	s := &snapshot.Snapshot{At: *at, Window: 5 * ms,
		Resources: []snapshot.Resource{{Name: res, Kind: resource.KindQueue, Capacity: capacity}},
		Tasks:     []snapshot.Task{{ID: uint64(*at) + 1e9, Class: class, Age: hold, N: 1}},
		Usage:     []snapshot.Usage{{Usage: task.Usage{Held: units, Hold: hold}}},
	}
	a.Observe(s)
	*at += 5 * ms
	a.Observe(&snapshot.Snapshot{At: *at, Window: 5 * ms, Resources: s.Resources})
	*at += 5 * ms
}

// The reported failure: a pool of 8 where one report holds 6 connections
// at 85 % progress and a second, just started, holds 2 and oversubscribes
// it. Cancelling either leaves room; the second loses far less.
func TestLeastLossPicksTheNewcomer(t *testing.T) {
	for _, history := range []bool{true, false} {
		t.Run(fmt.Sprintf("history=%v", history), func(t *testing.T) {
			a := NewAtropos(MultiObjective, WithConfirmation(0), WithMinGain(25*ms))
			var at time.Duration
			if history {
				teach(a, &at, "report", "db-pool", 8, 6, 3*time.Second)
			}
			b := newBuilder(0).res("db-pool", resource.KindQueue, 8, 0.6, 12)
			b.s.Resources[0].Held = 8
			b.task(1, "report", true, 85, 100, 2550*ms, use{res: 0, held: 6, hold: 2550 * ms})
			b.task(2, "report", true, 0, 0, 30*ms, use{res: 0, held: 2, hold: 30 * ms})
			b.task(3, "light", true, 0, 0, 20*ms, use{res: 0, waiting: true})
			s := b.build()
			s.At = at + time.Second
			ev := a.Evaluate(s)
			if ev.Chosen < 0 || ev.Candidates[ev.Chosen].Task != 2 {
				t.Fatalf("chose %+v, want the newcomer 2; reason %q", ev.Candidates, ev.Reason)
			}
			c := ev.Candidates[ev.Chosen]
			if !c.Sufficient || c.Loss >= ev.Candidates[1].Loss {
				t.Errorf("chosen %+v: want sufficient and a smaller loss than %+v", c, ev.Candidates[1])
			}
			want := FromClassUse
			if !history {
				want = FromDemand
			}
			if c.Future != want {
				t.Errorf("future from %v, want %v", c.Future, want)
			}
			if ev.Candidates[1].Why == "" {
				t.Errorf("the alternative does not say why it was not chosen: %+v", ev.Candidates[1])
			}
		})
	}
}

// Two heavy holders each holding half of a semaphore, and light waiters:
// the newer one is chosen; a third candidate holding too little to free
// enough alone is listed as insufficient.
func TestLeastLossNeedsSufficiency(t *testing.T) {
	a := NewAtropos(MultiObjective, WithConfirmation(0), WithMinGain(10*ms))
	var at time.Duration
	teach(a, &at, "job", "sem", 8, 4, 3*time.Second)
	b := newBuilder(0).res("sem", resource.KindQueue, 8, 0.9, 20)
	b.s.Resources[0].Held = 8
	b.task(1, "job", true, 0, 0, 2*time.Second, use{res: 0, held: 4, hold: 2 * time.Second})
	b.task(2, "job", true, 0, 0, 500*ms, use{res: 0, held: 4, hold: 500 * ms})
	s := b.build()
	ev := a.Evaluate(s)
	if ev.Chosen < 0 || ev.Candidates[ev.Chosen].Task != 2 {
		t.Fatalf("chose %+v, want 2", ev.Candidates)
	}
}

// One action per episode: once a cancelled task holds the resource, the
// policy does not decide on it again until the holds are released and a
// snapshot has seen nobody waiting for it (the freed use came back); the
// contention measured before is forgotten.
func TestEpisode(t *testing.T) {
	a := NewAtropos(MultiObjective, WithConfirmation(0), WithMinGain(10*ms))
	at := time.Duration(0)
	snap := func(cancelledHolds, other bool, waiters int) *snapshot.Snapshot {
		at += 10 * ms
		wait := time.Duration(0)
		if waiters > 0 {
			wait = 9 * ms
		}
		s := &snapshot.Snapshot{At: at, Window: 10 * ms,
			Completed: snapshot.Completions{Exec: 10 * ms},
			Resources: []snapshot.Resource{{Name: "lock", Kind: resource.KindLock, Waiters: waiters, WindowWait: wait}},
		}
		add := func(id uint64, cancelled bool) {
			s.Tasks = append(s.Tasks, snapshot.Task{ID: id, Class: "w", Cancellable: true, Cancelled: cancelled,
				Age: time.Second, First: int32(len(s.Usage)), N: 1})
			s.Usage = append(s.Usage, snapshot.Usage{Task: int32(len(s.Tasks) - 1), Usage: task.Usage{Held: 1, Hold: time.Second}})
		}
		if cancelledHolds {
			add(1, true)
		}
		if other {
			add(2, false)
		}
		return s
	}
	step := func(s *snapshot.Snapshot) []policy.Decision { a.Observe(s); return a.Decide(s) }
	// The cancelled task 1 still holds: no decision.
	s := snap(true, false, 3)
	if ds := step(s); ds != nil {
		t.Fatalf("decided %+v during the episode", ds)
	}
	if ev := a.Evaluate(s); !ev.Levels[0].Episode {
		t.Fatalf("level %+v: want the episode shown", ev.Levels[0])
	}
	// Released; task 2 holds now and the backlog still waits.
	for range 3 {
		if ds := step(snap(false, true, 3)); ds != nil {
			t.Fatalf("decided %+v before the backlog drained", ds)
		}
	}
	// Nobody waits: the episode is over, its contention forgotten.
	if ds := step(snap(false, true, 0)); ds != nil {
		t.Fatalf("decided %+v with nobody waiting", ds)
	}
	// A new overload: decided on its own contention.
	s = snap(false, true, 3)
	a.Observe(s)
	if ev := a.Evaluate(s); ev.Levels[0].Episode || ev.Levels[0].Level > 0.5 {
		t.Fatalf("level %+v: want the new contention only", ev.Levels[0])
	}
	if got := decideOne(t, a, s); got != 2 {
		t.Fatalf("cancelled %d, want 2", got)
	}
}

// The generator: random mixes of heavy and light holders on a pool, a
// semaphore or a lock, where the least-loss sufficient culprit is known by
// construction. A heavy holder is of a class whose tasks end after using
// much of the resource (learned by the policy, or for half of the classes
// not: then an old heavy holder is a candidate by its use so far and a new
// one by holding what makes the resource full); light holders are of a
// class whose tasks use a few milliseconds of it. The answer is the heavy
// holder, among those whose cancellation leaves the other heavy holders
// short of the capacity, with the least use so far (resource-seconds);
// when none is, the policy may pick any heavy holder, never a light one.
//
// MOIRAI_LEASTLOSS_SEED replays one seed; the test prints the seed of a
// failure.
func TestLeastLossGenerated(t *testing.T) {
	seeds := genSeeds(t, "MOIRAI_LEASTLOSS_SEED", 500)
	for _, fresh := range []bool{false, true} {
		var withAnswer, fallbacks int
		for _, seed := range seeds {
			ok, hasAnswer, msg := generatedCase(seed, fresh)
			if !ok {
				t.Fatalf("fresh=%v seed %d (replay with MOIRAI_LEASTLOSS_SEED=%d): %s", fresh, seed, seed, msg)
			}
			if hasAnswer {
				withAnswer++
			} else {
				fallbacks++
			}
		}
		if fresh {
			t.Logf("%d fresh overloads (nothing measured yet): %d with a holder of a class known to be heavy, decided at once; %d without, left to the measured contention", len(seeds), withAnswer, fallbacks)
		} else {
			t.Logf("%d situations: %d with a least-loss sufficient culprit, all chosen; %d without, a heavy holder chosen", len(seeds), withAnswer, fallbacks)
		}
	}
}

// generatedCase builds and checks one generated situation. With fresh,
// the resource has just been overloaded: its contention level is 0 (the
// window has measured nothing yet) while light tasks wait. By
// construction a decision is then due exactly when a heavy holder belongs
// to a class the policy has seen end (known to be heavy on the resource),
// and its choice is the same as with the contention measured; hasAnswer
// reports whether one was due.
func generatedCase(seed uint64, fresh bool) (ok, hasAnswer bool, msg string) {
	rng := rand.New(rand.NewPCG(seed, 28))
	const floor = 25 * ms
	a := NewAtropos(MultiObjective, WithConfirmation(0), WithMinGain(floor))
	var at time.Duration
	kind := rng.IntN(3) // 0 pool, 1 semaphore, 2 lock
	capacity := int64(4 + rng.IntN(13))
	if kind == 2 {
		capacity = 0
	}
	cp := max(capacity, 1)
	nHeavy := 1 + rng.IntN(3)
	if kind == 2 {
		nHeavy = 1 // an exclusive lock has one holder
	}
	// Units: the heavy holders fill the resource but for room for the
	// light holders.
	heavyUnits := make([]int64, nHeavy)
	lightHeld := int64(0)
	if kind != 2 {
		left := capacity - int64(rng.IntN(int(capacity)/4+1))
		for i := range heavyUnits {
			heavyUnits[i] = 2
			left -= 2
		}
		for left > 0 {
			heavyUnits[rng.IntN(nHeavy)]++
			left--
		}
		var sum int64
		for _, u := range heavyUnits {
			sum += u
		}
		lightHeld = capacity - sum
	} else {
		heavyUnits[0] = 1
	}
	level := 0.2 + 0.7*rng.Float64()
	if fresh {
		level = 0
	}
	b := newBuilder(0).res("r", resource.KindQueue, capacity, level, 1+rng.IntN(30))
	if kind == 2 {
		b.s.Resources[0].Kind = resource.KindLock
	}
	b.s.Resources[0].Held = capacity
	if kind == 2 {
		b.s.Resources[0].Held = 1
	}
	// The light class's history: a few milliseconds of one unit.
	teach(a, &at, "light", "r", capacity, 1, 3*ms)
	type heavy struct {
		id    uint64
		units int64 // held and waited for
		held  int64
		hold  time.Duration
		loss  float64
	}
	var hs []heavy
	id := uint64(1)
	var knownHolder bool
	var knownDemand int64
	for i, u := range heavyUnits {
		class := fmt.Sprintf("heavy%d", i)
		learned := rng.IntN(2) == 0
		newcomer := rng.IntN(2) == 0
		var hold time.Duration
		total := time.Duration(2+rng.IntN(8)) * time.Second
		if learned {
			teach(a, &at, class, "r", capacity, u, total)
			hold = time.Duration(rng.Int64N(int64(total) * 8 / 10))
		} else if newcomer && kind != 2 && float64(u) > 0 {
			hold = time.Duration(1+rng.IntN(20)) * ms
		} else {
			// Old enough that its use so far is a gain (Lindy).
			hold = time.Duration(float64(floor)*2*float64(cp)/float64(u)) + time.Duration(rng.Int64N(int64(3*time.Second)))
		}
		hold = max(hold, ms)
		var done, tot int64
		if rng.IntN(2) == 0 && learned {
			done, tot = int64(float64(hold)/float64(total)*100)+1, 100
		}
		// A pool's heavy holder has workers waiting for more connections.
		waiting := 0
		if kind == 0 {
			waiting = rng.IntN(4)
		}
		b.task(id, class, true, done, tot, hold, use{res: 0, held: u, hold: hold})
		b.s.Usage[len(b.s.Usage)-1].Waiting = int32(waiting)
		if learned {
			knownHolder = true
			knownDemand += u + int64(waiting)
		}
		hs = append(hs, heavy{id: id, units: u + int64(waiting), held: u, hold: hold, loss: estimate.Spent(&task.Usage{Held: u, Hold: hold}, capacity)})
		id++
	}
	for range lightHeld {
		b.task(id, "light", true, 0, 0, 2*ms, use{res: 0, held: 1, hold: time.Duration(1+rng.IntN(3)) * ms})
		id++
	}
	for range 1 + rng.IntN(10) {
		b.task(id, "light", true, 0, 0, time.Duration(1+rng.IntN(60))*ms, use{res: 0, waiting: true})
		id++
	}
	if fresh {
		// The light load as it was before the overload: lightHeld units
		// held, for three seconds, so that the others' mean demand is
		// lightHeld.
		calm := &snapshot.Snapshot{Window: 5 * ms,
			Resources: []snapshot.Resource{{Name: "r", Kind: b.s.Resources[0].Kind, Capacity: capacity, Held: lightHeld}}}
		for j := range max(lightHeld, 0) {
			calm.Tasks = append(calm.Tasks, snapshot.Task{ID: 1e6 + uint64(j), Class: "light", First: int32(j), N: 1})
			calm.Usage = append(calm.Usage, snapshot.Usage{Task: int32(j), Usage: task.Usage{Held: 1, Hold: 2 * ms}})
		}
		for range 600 {
			at += 5 * ms
			calm.At = at
			a.Observe(calm)
		}
	}
	s := b.build()
	s.At = at + time.Second
	// With nothing measured, a decision is due when a holder's class is
	// known to be heavy and the known-heavy demand leaves the light load
	// less than its mean plus its square root (a lock: always). Within
	// half a unit of the boundary the mean's convergence decides: not
	// checked.
	lc := float64(max(lightHeld, 0))
	margin := float64(knownDemand) + lc + math.Sqrt(lc) - float64(capacity)
	known := knownHolder && (kind == 2 || margin > 0)
	if fresh && kind != 2 && knownHolder && math.Abs(margin) < 0.5 {
		return true, false, ""
	}
	// The answer, by construction.
	var sum int64
	for _, h := range hs {
		sum += h.units
	}
	want := uint64(0)
	wantLoss := 0.0
	for _, h := range hs {
		if sum-h.units < cp && (want == 0 || h.loss < wantLoss) {
			want, wantLoss = h.id, h.loss
		}
	}
	ev := a.Evaluate(s)
	if fresh {
		// No detector fires (Quiet): the same decision, since only a
		// known-heavy class may be acted on then, and nothing is
		// measured anyway.
		q := *s
		q.Quiet = true
		if qe := a.Evaluate(&q); (qe.Chosen >= 0) != (ev.Chosen >= 0) ||
			(qe.Chosen >= 0 && qe.Candidates[qe.Chosen].Task != ev.Candidates[ev.Chosen].Task) {
			return false, known, fmt.Sprintf("quiet: %s; not quiet: %s", qe.Reason, ev.Reason)
		}
		switch {
		case !known && ev.Chosen >= 0:
			return false, false, fmt.Sprintf("decided with nothing measured although the known-heavy demand %d leaves the light load (%d units) room in %d (kind %d): %s", knownDemand, lightHeld, capacity, kind, ev.Reason)
		case !known:
			return true, false, ""
		case ev.Chosen < 0:
			return false, true, fmt.Sprintf("nothing chosen (%s) although a holder's class is known to be heavy; want %d", ev.Reason, want)
		}
	}
	if ev.Chosen < 0 {
		return false, want != 0, fmt.Sprintf("nothing chosen (%s); want %d", ev.Reason, want)
	}
	got := ev.Candidates[ev.Chosen]
	isHeavy := false
	for _, h := range hs {
		isHeavy = isHeavy || h.id == got.Task
	}
	switch {
	case !isHeavy:
		return false, want != 0, fmt.Sprintf("chose light task %d: %s", got.Task, ev.Reason)
	case want != 0 && got.Task != want:
		// Ties in loss are a tie: either is right.
		for _, h := range hs {
			if h.id == got.Task && h.loss == wantLoss && sum-h.units < cp {
				return true, true, ""
			}
		}
		return false, true, fmt.Sprintf("chose %d (loss %.3f), want %d (loss %.3f); heavy %+v; candidates %+v", got.Task, got.Loss, want, wantLoss, hs, ev.Candidates)
	}
	return true, want != 0 || fresh, ""
}

// A request of a class whose tasks hold a lock for milliseconds, stalled
// by the scheduler while it holds it, is not a culprit: without progress
// its class's use decides, not the half-done guess.
func TestStalledLightHolderIsNoCulprit(t *testing.T) {
	a := NewAtropos(MultiObjective, WithConfirmation(0), WithMinGain(25*ms))
	var at time.Duration
	for range 5 {
		teach(a, &at, "light", "wal", 0, 1, 2*ms)
	}
	s := newBuilder(0).res("wal", resource.KindLock, 0, 0.8, 10).
		task(1, "light", true, 0, 0, 70*ms, use{res: 0, held: 1, hold: 70 * ms}).
		build()
	if ev := a.Evaluate(s); ev.Chosen >= 0 {
		t.Fatalf("chose %+v; a stalled light request is no culprit", ev.Candidates[ev.Chosen])
	}
}

// With no detector firing (Snapshot.Quiet), measured contention decides
// nothing: only a task of a class known to be heavy is acted on.
func TestQuietActsOnKnownHeavyOnly(t *testing.T) {
	a := NewAtropos(MultiObjective, WithMinGain(25*ms))
	b := newBuilder(5*ms).res("sem", resource.KindQueue, 8, 0.9, 5)
	b.s.Resources[0].Held = 8
	b.task(1, "job", true, 0, 0, 2*time.Second, use{res: 0, held: 7, hold: 2 * time.Second})
	b.task(2, "light", true, 0, 0, 20*ms, use{res: 0, held: 1, hold: 20 * ms})
	s := b.build()
	s.Quiet = true
	if d := a.Decide(s); d != nil {
		t.Fatalf("quiet, no class known: decided %+v", d)
	}
	s.Quiet = false
	if d := a.Decide(s); d != nil {
		t.Fatalf("decided at once, before the confirmation time: %+v", d)
	}
	var at time.Duration
	k := NewAtropos(MultiObjective, WithMinGain(25*ms))
	teach(k, &at, "job", "sem", 8, 7, 3*time.Second)
	// A second of light requests, one unit held at a time: the demand
	// the job's 7 units leave too little room for (1 + √1 > 8 − 7).
	teach(k, &at, "light", "sem", 8, 1, 2*ms)
	for i := range 200 {
		k.Observe(&snapshot.Snapshot{At: at, Window: 5 * ms,
			Resources: []snapshot.Resource{{Name: "sem", Kind: resource.KindQueue, Capacity: 8, Held: 1}},
			Tasks:     []snapshot.Task{{ID: uint64(i) + 1e6, Class: "light", Age: 2 * ms, N: 1}},
			Usage:     []snapshot.Usage{{Usage: task.Usage{Held: 1, Hold: 2 * ms}}},
		})
		at += 5 * ms
	}
	s.Quiet, s.At = true, at+time.Second
	d := k.Decide(s)
	if len(d) != 1 || d[0].Task != 1 || !strings.Contains(d[0].Reason, "known to be heavy") {
		t.Fatalf("quiet, class known to be heavy: decided %+v; want task 1 at once, the reason saying why", d)
	}
}

// A known-heavy newcomer that only waits for its first units of a full
// pool has not oversubscribed it yet: the older holder, which would lose
// most of a report, is not cancelled while it waits; once the newcomer
// holds a unit it is the least-loss choice.
func TestKnownHeavyWaitsForTheNewcomersAcquisition(t *testing.T) {
	a := NewAtropos(MultiObjective, WithConfirmation(0), WithMinGain(25*ms))
	var at time.Duration
	teach(a, &at, "report", "db-pool", 10, 6, 3*time.Second)
	build := func(newHeld int64) *snapshot.Snapshot {
		b := newBuilder(0).res("db-pool", resource.KindQueue, 10, 0, 2)
		b.s.Resources[0].Held = 10
		b.task(1, "report", true, 43, 100, 750*ms, use{res: 0, held: 6, hold: 750 * ms})
		b.task(2, "report", true, 0, 100, 5*ms, use{res: 0, held: newHeld, hold: time.Duration(newHeld) * ms, waiting: true})
		b.task(3, "light", true, 0, 0, 2*ms, use{res: 0, held: 4 - newHeld, hold: 2 * ms})
		b.task(4, "light", true, 0, 0, 1*ms, use{res: 0, waiting: true})
		s := b.build()
		s.Usage[1].Waiting = int32(6 - newHeld) // its other workers wait
		s.Quiet, s.At = true, at+time.Second
		return s
	}
	if ev := a.Evaluate(build(0)); ev.Chosen >= 0 {
		t.Fatalf("chose %+v while the newcomer only waits; reason %q", ev.Candidates[ev.Chosen], ev.Reason)
	}
	ev := a.Evaluate(build(1))
	if ev.Chosen < 0 || ev.Candidates[ev.Chosen].Task != 2 || !ev.Levels[0].KnownHeavy {
		t.Fatalf("chose %+v, want the newcomer 2 once it holds a unit (known heavy); reason %q", ev.Candidates, ev.Reason)
	}
}
