package cancel

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

const ms = time.Millisecond

// builder assembles snapshots for the tests.
type builder struct{ s snapshot.Snapshot }

func newBuilder(window time.Duration) *builder {
	return &builder{s: snapshot.Snapshot{Window: window}}
}

func (b *builder) res(name string, kind resource.Kind, capacity int64, level float64, waiters int) *builder {
	// A window wait that makes C_r = level over a window execution of 1 s.
	r := snapshot.Resource{
		Name: name, Kind: kind, Capacity: capacity, Waiters: waiters,
		WindowWait: time.Duration(level * float64(time.Second)),
	}
	if kind == resource.KindMemory {
		r.WindowEvictions = capacity // eviction ratio 1
	}
	b.s.Resources = append(b.s.Resources, r)
	return b
}

type use struct {
	res     int
	held    int64
	hold    time.Duration
	evicted int64
	waiting bool
}

func (b *builder) task(id uint64, class string, cancellable bool, done, total int64, age time.Duration, uses ...use) *builder {
	t := snapshot.Task{ID: id, Class: class, Kind: task.Request, Cancellable: cancellable, Done: done, Total: total,
		Age: age, First: int32(len(b.s.Usage)), N: int32(len(uses))}
	for _, u := range uses {
		w := int32(0)
		if u.waiting {
			w = 1
		}
		b.s.Usage = append(b.s.Usage, snapshot.Usage{
			Usage: task.Usage{Held: u.held, Hold: u.hold, Evictions: u.evicted, Waiting: w},
			Task:  int32(len(b.s.Tasks)), Res: int32(u.res),
		})
	}
	b.s.Tasks = append(b.s.Tasks, t)
	return b
}

// build fixes the execution time so that levels come out as given.
func (b *builder) build() *snapshot.Snapshot {
	b.s.Completed.Exec = time.Second
	if b.s.Window == 0 {
		b.s.Window = time.Nanosecond
	}
	for i := range b.s.Tasks {
		b.s.Tasks[i].Exec = 0
	}
	return &b.s
}

func decideOne(t *testing.T, p policy.Policy, s *snapshot.Snapshot) uint64 {
	t.Helper()
	ds := p.Decide(s)
	if len(ds) != 1 {
		t.Fatalf("%s decided %d times, want 1", p.Name(), len(ds))
	}
	if ds[0].Action != policy.Cancel || ds[0].Policy != p.Name() || ds[0].Reason == "" || len(ds[0].Details) == 0 {
		t.Fatalf("decision %+v is incomplete", ds[0])
	}
	return ds[0].Task
}

func TestAtroposCancelsTheHolder(t *testing.T) {
	s := newBuilder(0).res("table", resource.KindLock, 0, 0.8, 5).
		task(1, "scan", true, 10, 1000, time.Second, use{res: 0, held: 1, hold: 100 * ms}).
		task(2, "insert", true, 0, 0, 50*ms, use{res: 0, waiting: true}).
		task(3, "insert", true, 0, 0, 40*ms, use{res: 0, waiting: true, hold: ms}).
		build()
	for _, v := range []Variant{MultiObjective, Greedy, CurrentUsage} {
		if got := decideOne(t, NewAtropos(v, WithConfirmation(0)), s); got != 1 {
			t.Errorf("%v cancelled task %d, want the holder 1", v, got)
		}
	}
}

func TestAtroposSafety(t *testing.T) {
	b := newBuilder(0).res("table", resource.KindLock, 0, 0.8, 3)
	b.task(1, "ddl", false, 0, 0, time.Second, use{res: 0, held: 1, hold: time.Second})
	b.task(2, "scan", true, 0, 0, time.Second, use{res: 0, held: 1, hold: time.Second})
	b.task(3, "insert", true, 0, 0, time.Second, use{res: 0, waiting: true})
	s := b.build()
	s.Tasks[1].Cancelled = true
	a := NewAtropos(MultiObjective, WithConfirmation(0))
	if ds := a.Decide(s); ds != nil {
		t.Fatalf("decided %+v; the only holders are not cancellable or already cancelled", ds)
	}
	ev := a.Evaluate(s)
	if ev.NotCancellable != 1 || ev.AlreadyCancelled != 1 || ev.NoGain != 1 || ev.Chosen != -1 {
		t.Errorf("evaluation %+v: want 1 not cancellable, 1 cancelled, 1 without gain", ev)
	}

	// No contended resource: no decision, whatever the holders.
	calm := newBuilder(0).res("table", resource.KindLock, 0, 0.05, 3).
		task(1, "scan", true, 0, 0, time.Second, use{res: 0, held: 1, hold: time.Second}).build()
	if ds := a.Decide(calm); ds != nil {
		t.Errorf("decided %+v with contention below the threshold", ds)
	}
	// A contended lock without waiters now has drained.
	drained := newBuilder(0).res("table", resource.KindLock, 0, 0.9, 0).
		task(1, "scan", true, 0, 0, time.Second, use{res: 0, held: 1, hold: time.Second}).build()
	if ds := a.Decide(drained); ds != nil {
		t.Errorf("decided %+v on a lock nobody waits for", ds)
	}
	// A task that just took the lock frees too little to be worth it.
	brief := newBuilder(0).res("table", resource.KindLock, 0, 0.9, 4).
		task(1, "insert", true, 1, 2, time.Second, use{res: 0, held: 1, hold: ms}).build()
	if ds := a.Decide(brief); ds != nil {
		t.Errorf("decided %+v for 1 ms of future hold", ds)
	}
	// Corrupt usage indexes are ignored, not followed.
	bad := newBuilder(0).res("table", resource.KindLock, 0, 0.9, 4).
		task(1, "scan", true, 0, 0, time.Second, use{res: 0, held: 1, hold: time.Second}).build()
	bad.Tasks[0].N = 99
	if ds := a.Decide(bad); ds != nil {
		t.Errorf("decided %+v from out-of-range usage", ds)
	}
}

// twoResources is the case the ablation turns on: a scan heavy on the pool
// only, and a batch update moderate on both the pool and the lock.
func twoResources() *snapshot.Snapshot {
	return newBuilder(0).
		res("pool", resource.KindMemory, 1000, 0.5, 0).
		res("lock", resource.KindLock, 0, 0.4, 6).
		task(1, "scan", true, 50, 100, time.Second, use{res: 0, evicted: 600}).
		task(2, "batch", true, 50, 100, time.Second, use{res: 0, evicted: 400}, use{res: 1, held: 1, hold: 500 * ms}).
		task(3, "light", true, 0, 0, 20*ms, use{res: 1, waiting: true}, use{res: 0, evicted: 1}).
		task(4, "scan", true, 50, 100, time.Second, use{res: 0, evicted: 300}).
		build()
}

func TestAtroposAblationTwoResources(t *testing.T) {
	s := twoResources()
	if got := decideOne(t, NewAtropos(MultiObjective, WithConfirmation(0)), s); got != 2 {
		t.Errorf("multi-objective cancelled %d, want the batch update 2 (frees both resources)", got)
	}
	if got := decideOne(t, NewAtropos(Greedy, WithConfirmation(0)), s); got != 1 {
		t.Errorf("greedy cancelled %d, want the scan 1 (largest on the most contended resource)", got)
	}
}

func TestAtroposCurrentVersusFuture(t *testing.T) {
	// Task 1 has used the lock most so far but is nearly done; task 2 has
	// just begun and will use it far longer.
	s := newBuilder(0).res("lock", resource.KindLock, 0, 0.6, 4).
		task(1, "report", true, 95, 100, 2*time.Second, use{res: 0, held: 1, hold: 2 * time.Second}).
		task(2, "report", true, 5, 100, 200*ms, use{res: 0, held: 1, hold: 200 * ms}).
		build()
	if got := decideOne(t, NewAtropos(MultiObjective, WithConfirmation(0)), s); got != 2 {
		t.Errorf("multi-objective cancelled %d, want 2 (largest future gain)", got)
	}
	if got := decideOne(t, NewAtropos(CurrentUsage, WithConfirmation(0)), s); got != 1 {
		t.Errorf("current-usage cancelled %d, want 1 (largest usage so far)", got)
	}
}

func TestEvaluationExplains(t *testing.T) {
	ev := NewAtropos(MultiObjective).Evaluate(twoResources())
	if ev.Chosen != 0 || len(ev.Candidates) != 3 || ev.Total != 3 || len(ev.Contended) != 2 || ev.NoGain != 1 {
		t.Fatalf("evaluation %+v; want 3 candidates and the light task without gain worth a cancellation", ev)
	}
	if ev.Skyline != 2 || ev.Candidates[2].Task != 4 || !ev.Candidates[2].Dominated {
		t.Errorf("skyline %d, candidates %+v; want the small scan dominated", ev.Skyline, ev.Candidates)
	}
	attrs := ev.Attrs(2)
	keys := []string{}
	for _, a := range attrs {
		keys = append(keys, a.Key)
	}
	for _, k := range []string{"contention", "candidates", "non_dominated", "excluded", "top"} {
		if !slices.Contains(keys, k) {
			t.Errorf("explanation lacks %q: %v", k, keys)
		}
	}
}

// naiveSkyline is the all-pairs definition, over the gains and what a
// cancellation keeps (1 − loss/max loss).
func naiveSkyline(cs []Candidate) map[uint64]bool {
	out := map[uint64]bool{}
	maxLoss := 0.0
	for _, c := range cs {
		maxLoss = max(maxLoss, c.Loss)
	}
	vec := func(c Candidate) []float64 {
		keep := 1.0
		if maxLoss > 0 {
			keep = 1 - c.Loss/maxLoss
		}
		return append(slices.Clone(c.Usage), keep)
	}
	for i := range cs {
		dom := false
		for j := range cs {
			if i != j && dominates(vec(cs[j]), vec(cs[i])) {
				dom = true
				break
			}
		}
		if !dom {
			out[cs[i].Task] = true
		}
	}
	return out
}

func TestSkylineMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		n, dims := 1+rng.IntN(60), 1+rng.IntN(5)
		b := newBuilder(0)
		for r := range dims {
			b.res(string(rune('a'+r)), resource.KindLock, 0, 0.1+0.9*rng.Float64(), 1)
		}
		for i := range n {
			var uses []use
			for r := range dims {
				if rng.IntN(3) > 0 {
					// Coarse values so that ties happen.
					uses = append(uses, use{res: r, held: 1, hold: time.Duration(1+rng.IntN(6)) * 100 * ms})
				}
			}
			b.task(uint64(i+1), "c", true, 50, 100, time.Second, uses...)
		}
		ev := NewAtropos(MultiObjective).Evaluate(b.build())
		want := naiveSkyline(ev.Candidates)
		got := 0
		for _, c := range ev.Candidates {
			if !c.Dominated != want[c.Task] {
				t.Fatalf("trial %d: task %d dominated=%v, definition says non-dominated=%v", trial, c.Task, c.Dominated, want[c.Task])
			}
			if !c.Dominated {
				got++
			}
		}
		// The chosen is non-dominated unless it is the least-loss one of
		// those that free enough.
		if got != ev.Skyline || (len(ev.Candidates) > 0 && ev.Candidates[ev.Chosen].Dominated && !ev.Candidates[ev.Chosen].Sufficient) {
			t.Fatalf("trial %d: skyline %d, counted %d; chosen dominated: %v", trial, ev.Skyline, got, ev.Candidates[ev.Chosen].Dominated)
		}
	}
}

// decideSnapshot builds tasks × 8 resources as a loaded service looks: every
// task uses one to three of the resources, holding some and waiting for
// others, with heavy-tailed holds (a few long, most short).
func decideSnapshot(tasks, resources int, dense bool) *snapshot.Snapshot {
	rng := rand.New(rand.NewPCG(7, 8))
	b := newBuilder(0)
	for r := range resources {
		b.res(string(rune('a'+r)), resource.KindLock, 0, 0.2+0.1*float64(r%5), 10)
	}
	for i := range tasks {
		var uses []use
		if dense {
			for r := range resources {
				uses = append(uses, use{res: r, held: 1, hold: time.Duration(rng.Float64() * float64(time.Second))})
			}
		} else {
			k := 1 + rng.IntN(3)
			for _, r := range rng.Perm(resources)[:k] {
				hold := time.Duration(float64(20*ms) / (0.02 + rng.Float64()))
				if rng.IntN(2) == 0 {
					uses = append(uses, use{res: r, waiting: true})
				} else {
					uses = append(uses, use{res: r, held: 1, hold: hold})
				}
			}
		}
		b.task(uint64(i+1), "c", true, int64(1+rng.IntN(99)), 100, time.Second, uses...)
	}
	return b.build()
}

// BenchmarkDecide is one decision of the multi-objective policy over 10,000
// live tasks and 8 contended resources. "typical": each task uses one to
// three resources with heavy-tailed holds; "dense": every task holds all
// eight with uniform random holds, the skyline's worst case (its size grows
// as (ln n)^(d−1)).
func BenchmarkDecide(b *testing.B) {
	for _, bc := range []struct {
		name  string
		dense bool
	}{{"typical", false}, {"dense", true}} {
		b.Run(bc.name, func(b *testing.B) {
			s := decideSnapshot(10000, 8, bc.dense)
			a := NewAtropos(MultiObjective, WithConfirmation(0))
			b.ReportAllocs()
			var sky int
			for b.Loop() {
				ds := a.Decide(s)
				if len(ds) != 1 {
					b.Fatal("no decision")
				}
			}
			sky = a.Evaluate(s).Skyline
			b.ReportMetric(float64(sky), "non-dominated")
		})
	}
}

func TestAtroposConfirmation(t *testing.T) {
	a := NewAtropos(MultiObjective) // 10 ms by default
	s := newBuilder(0).res("table", resource.KindLock, 0, 0.8, 5).
		task(1, "scan", true, 10, 1000, time.Second, use{res: 0, held: 1, hold: 100 * ms}).build()
	at := func(d time.Duration) *snapshot.Snapshot { c := *s; c.At = d; return &c }
	if ds := a.Decide(at(time.Second)); ds != nil {
		t.Fatalf("decided at first sight: %+v", ds)
	}
	if ds := a.Decide(at(time.Second + 5*ms)); ds != nil {
		t.Fatalf("decided 5 ms after first sight: %+v", ds)
	}
	if ds := a.Decide(at(time.Second + 10*ms)); len(ds) != 1 || ds[0].Task != 1 {
		t.Fatalf("not decided after 10 ms of the same choice: %+v", ds)
	}
	// A snapshot without a choice resets the confirmation.
	calm := newBuilder(0).res("table", resource.KindLock, 0, 0.01, 0).build()
	a.Decide(at(2 * time.Second))
	calm.At = 2*time.Second + 5*ms
	a.Decide(calm)
	if ds := a.Decide(at(2*time.Second + 10*ms)); ds != nil {
		t.Errorf("decided although the choice lapsed in between: %+v", ds)
	}
}

// FuzzDecide feeds the policies snapshots built from arbitrary numbers,
// negative and huge ones included: they must never choose a task that is
// not cancellable or already cancelled, nor score anything NaN.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, int64(100), int64(-5))
	f.Add([]byte{255, 0, 255, 0, 128, 64, 32, 16}, int64(-1), int64(1<<62))
	f.Fuzz(func(t *testing.T, data []byte, hold, wait int64) {
		if len(data) < 4 {
			return
		}
		s := &snapshot.Snapshot{At: time.Duration(hold), Window: time.Duration(wait % int64(time.Second))}
		nres := 1 + int(data[0]%4)
		for r := range nres {
			s.Resources = append(s.Resources, snapshot.Resource{
				Name: string(rune('a' + r)), Kind: resource.Kind(data[r%len(data)] % 6),
				Capacity: int64(data[(r+1)%len(data)]) - 10, InUse: hold, Waiters: int(data[(r+2)%len(data)]%3) - 1,
				WindowWait: time.Duration(wait * int64(r+1)), WindowWaits: hold, WindowEvictions: wait,
			})
		}
		for i := 1; i+2 < len(data); i += 3 {
			t0 := snapshot.Task{
				ID: uint64(i), Class: string(rune('x' + data[i]%3)), Cancellable: data[i]&1 == 1, Cancelled: data[i]&2 == 2,
				Done: int64(data[i+1]) - 50, Total: int64(data[i+2]) - 50, Age: time.Duration(hold * int64(data[i+1])),
				Exec: time.Duration(wait), First: int32(len(s.Usage)), N: 1,
			}
			if data[i]&4 == 4 {
				t0.N = 7 // out of range
			}
			s.Tasks = append(s.Tasks, t0)
			s.Usage = append(s.Usage, snapshot.Usage{
				Usage: task.Usage{Held: int64(data[i+2]) - 3, Hold: time.Duration(hold), Evictions: wait, Waiting: int32(data[i+1] % 2)},
				Task:  int32(len(s.Tasks) - 1), Res: int32(int(data[i+1]) % (nres + 1)),
			})
		}
		for _, v := range []Variant{MultiObjective, Greedy, CurrentUsage} {
			a := NewAtropos(v, WithConfirmation(0))
			ev := a.Evaluate(s)
			for _, c := range ev.Candidates {
				if c.Score != c.Score || c.Score < 0 {
					t.Fatalf("%v: score %v", v, c.Score)
				}
			}
			for _, d := range a.Decide(s) {
				i := s.TaskByID(d.Task)
				if i < 0 || !s.Tasks[i].Cancellable || s.Tasks[i].Cancelled {
					t.Fatalf("%v chose task %d: %+v", v, d.Task, s.Tasks[max(i, 0)])
				}
			}
		}
	})
}

// TestContentionFollowsResourcesThatComeAndGo: a source that reports only
// the locks it sees now (the guard) adds a resource between two polls,
// which moves the others' positions in the snapshot. Each resource's
// contention over the window stays its own.
func TestContentionFollowsResourcesThatComeAndGo(t *testing.T) {
	a := NewAtropos(MultiObjective, WithContentionWindow(time.Second))
	first := newBuilder(100*ms).res("relation:t", resource.KindLock, 0, 0.5, 3).
		task(1, "exec", true, 0, 0, time.Second, use{res: 0, held: 1, hold: time.Second}).build()
	first.At = 100 * ms
	a.Observe(first)
	second := newBuilder(100*ms).res("relation:a", resource.KindLock, 0, 0, 0).res("relation:t", resource.KindLock, 0, 0.5, 3).
		task(1, "exec", true, 0, 0, time.Second, use{res: 1, held: 1, hold: time.Second}).build()
	second.At = 200 * ms
	a.Observe(second)
	ev := a.Evaluate(second)
	levels := map[string]float64{}
	for _, l := range ev.Levels {
		levels[l.Resource] = l.Level
	}
	if levels["relation:a"] != 0 || levels["relation:t"] < 0.4 {
		t.Fatalf("levels %v: want relation:t's own contention and none for the newcomer", levels)
	}
}
