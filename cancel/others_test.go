package cancel

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// The demand a known-heavy class's tasks leave room for is the others'
// (tasks of classes seen to end light), not that of a heavy class's first
// task, which had no history while it ran. Generated: light requests of
// one unit (a random mean demand) on a pool of 10 beside a first report
// holding a random number of units for a second or more; the report ends
// (its class is then known heavy), the lights go on for a random gap, and
// a second report takes its units at a moment a light waits. Ground
// truth: the policy acts at that acquisition (the resource counts as
// contended, the report is chosen) exactly when the report's units plus
// the lights' mean demand m plus √m exceed the capacity, m being the
// moving mean (over about a second) of the lights' units alone, computed
// here as the policy computes it. Counting the first report's units in
// the others' demand made a report that fits alone look like an overload
// for about a second after the first one ended.
func TestKnownHeavyLeavesRoomForTheLightsOnly(t *testing.T) {
	const (
		capacity = 10
		step     = 10 * time.Millisecond
	)
	alpha := float64(step) / float64(time.Second)
	var fired, left int
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 2828))
		units := int64(3 + rng.IntN(7))
		lambda := 0.2 + 2.8*rng.Float64() // lights' mean units per snapshot
		runFor := time.Duration(1e9 + rng.Int64N(2e9))
		gap := time.Duration(1e8 + rng.Int64N(9e8))
		a := NewAtropos(MultiObjective, WithConfirmation(0), WithMinGain(25*ms))
		at := time.Duration(0)
		id := uint64(1000)
		m, first := 0.0, true
		snap := func(report bool, reportAge time.Duration) *snapshot.Snapshot {
			at += step
			s := &snapshot.Snapshot{At: at, Window: step, Quiet: true,
				Resources: []snapshot.Resource{{Name: "db-pool", Kind: resource.KindQueue, Capacity: capacity}}}
			add := func(tid uint64, class string, held int64, age time.Duration) {
				s.Tasks = append(s.Tasks, snapshot.Task{ID: tid, Class: class, Kind: task.Request, Cancellable: true,
					Age: age, First: int32(len(s.Usage)), N: 1})
				s.Usage = append(s.Usage, snapshot.Usage{Task: int32(len(s.Tasks) - 1),
					Usage: task.Usage{Held: held, Hold: age}})
				s.Resources[0].Held += held
			}
			if report {
				add(1, "report", units, reportAge)
			}
			// Poisson-ish: lights of 3 ms, each in one snapshot only.
			n := 0
			for range 40 {
				if rng.Float64() < lambda/40 {
					n++
				}
			}
			if first {
				n = max(n, 1) // the lights' class is learned from the next snapshot on
			}
			for range n {
				id++
				add(id, "light", 1, 3*ms)
			}
			// The policy's moving mean of the lights' units: a class is
			// counted once a task of it has been seen to end.
			d := float64(n)
			if first {
				d, m, first = 0, 0, false
			} else {
				m += alpha * (d - m)
			}
			return s
		}
		for age := time.Duration(0); age < runFor; age += step {
			a.Observe(snap(true, age+step))
		}
		for g := time.Duration(0); g < gap; g += step {
			a.Observe(snap(false, 0))
		}
		if total, ok := a.uses.Total("report", "db-pool"); !ok || total < 0.025 {
			t.Fatalf("seed %d: the report's class was not learned heavy: %v %v", seed, total, ok)
		}
		need := float64(units) + m + math.Sqrt(m)
		if math.Abs(need-capacity) < 0.25 {
			continue // too close to call
		}
		want := need > capacity
		// The second report's acquisition, with the pool full and a
		// light waiting.
		at += step
		s := &snapshot.Snapshot{At: at, Window: step, Quiet: true,
			Resources: []snapshot.Resource{{Name: "db-pool", Kind: resource.KindQueue, Capacity: capacity, Held: capacity, Waiters: 1}},
			Tasks: []snapshot.Task{
				{ID: 2, Class: "report", Kind: task.Request, Cancellable: true, Age: ms, First: 0, N: 1},
				{ID: 3, Class: "light", Kind: task.Request, Cancellable: true, Age: 2 * ms, First: 1, N: 1},
				{ID: 4, Class: "light", Kind: task.Request, Cancellable: true, Age: ms, First: 2, N: 1},
			},
			Usage: []snapshot.Usage{
				{Task: 0, Usage: task.Usage{Held: units, Hold: ms}},
				{Task: 1, Res: 0, Usage: task.Usage{Held: capacity - units, Hold: 2 * ms}},
				{Task: 2, Res: 0, Usage: task.Usage{Waiting: 1}},
			},
		}
		ev := a.Evaluate(s)
		got := ev.Chosen >= 0 && ev.Candidates[ev.Chosen].Task == 2
		if got != want || ev.Levels[0].KnownHeavy != want {
			t.Errorf("seed %d: report of %d units, lights' mean demand %.2f (+√ %.2f) on %d: acted %v (known heavy %v), want %v; reason %q",
				seed, units, m, math.Sqrt(m), capacity, got, ev.Levels[0].KnownHeavy, want, ev.Reason)
			continue
		}
		if want {
			fired++
		} else {
			left++
		}
	}
	if fired == 0 || left == 0 {
		t.Fatalf("generator drew %d acquisitions to act on and %d to leave: want both", fired, left)
	}
}
