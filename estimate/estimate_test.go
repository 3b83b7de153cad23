package estimate

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

const ms = time.Millisecond

func TestContention(t *testing.T) {
	s := &snapshot.Snapshot{
		Window: 100 * ms,
		Tasks: []snapshot.Task{
			{ID: 1, Exec: 5 * time.Second}, // capped at the window
			{ID: 2, Exec: 50 * ms},
		},
		Completed: snapshot.Completions{Exec: 50 * ms},
		Resources: []snapshot.Resource{
			{Name: "lock", Kind: resource.KindLock, WindowWait: 60 * ms, Wait: time.Hour},
			{Name: "queue", Kind: resource.KindQueue, WindowWait: 400 * ms},
			{Name: "pool", Kind: resource.KindMemory, Capacity: 100, InUse: 50, WindowWait: 100 * ms, WindowEvictions: 25, WindowWaits: 200},
			{Name: "cold", Kind: resource.KindMemory, Capacity: 100, WindowWait: 100 * ms},
			{Name: "cpu", Kind: resource.KindCPU, WindowWait: -5 * ms},
		},
	}
	if got := ExecTime(s); got != 200*ms {
		t.Fatalf("ExecTime = %v, want 200ms", got)
	}
	got := Contention(s, nil)
	want := []float64{0.3, 1, 0.0625, 0, 0}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Errorf("C[%s] = %v, want %v", s.Resources[i].Name, got[i], want[i])
		}
	}
	// Without a window the cumulative totals count.
	s.Window = 0
	if c := Contention(s, got)[0]; c != 1 {
		t.Errorf("cumulative C[lock] = %v, want 1 (clamped)", c)
	}
}

func TestEvictionRatio(t *testing.T) {
	for _, tc := range []struct {
		e, m int64
		want float64
	}{
		{0, 100, 0}, {10, 100, 0.1}, {500, 100, 1}, {3, 0, 1}, {-3, 10, 0}, {5, -1, 1},
	} {
		if got := EvictionRatio(tc.e, tc.m); got != tc.want {
			t.Errorf("EvictionRatio(%d, %d) = %v, want %v", tc.e, tc.m, got, tc.want)
		}
	}
}

func TestFutureAndCurrent(t *testing.T) {
	if got := Future(1, 0.5); got != 1 {
		t.Errorf("Future(1, .5) = %v", got)
	}
	if got := Future(1, 0); math.Abs(got-99) > 1e-9 {
		t.Errorf("Future(1, 0) = %v, want 99 (p clamped to 0.01)", got)
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), -1, 0} {
		if got := Future(bad, 0.5); got != 0 {
			t.Errorf("Future(%v) = %v, want 0", bad, got)
		}
	}
	if got := Future(1, math.NaN()); math.Abs(got-99) > 1e-9 {
		t.Errorf("Future(1, NaN) = %v, want 99", got)
	}
	lock := &snapshot.Resource{Kind: resource.KindLock}
	queue := &snapshot.Resource{Kind: resource.KindQueue, Capacity: 8}
	pool := &snapshot.Resource{Kind: resource.KindMemory, Capacity: 100}
	held := &snapshot.Usage{Usage: task.Usage{Held: 2, Hold: 2 * time.Second, Evictions: 30}}
	waiting := &snapshot.Usage{Usage: task.Usage{Waiting: 1, Hold: time.Second}}
	if got := Current(held, lock); got != 2 {
		t.Errorf("lock current = %v, want 2 s", got)
	}
	if got := Current(held, queue); got != 0.5 {
		t.Errorf("queue current = %v, want 2 s × 2/8", got)
	}
	if got := Current(held, pool); got != 32 {
		t.Errorf("memory current = %v, want 30 evicted + 2 held", got)
	}
	if got := Current(waiting, lock); got != 0 {
		t.Errorf("a waiter's current lock usage = %v, want 0", got)
	}
}

// snap is a snapshot of live tasks with the given classes and ages.
func snap(at, window time.Duration, tasks ...snapshot.Task) *snapshot.Snapshot {
	return &snapshot.Snapshot{At: at, Window: window, Tasks: tasks}
}

func TestDurationsObserve(t *testing.T) {
	d := NewDurations(2)
	w := 10 * ms
	d.Observe(snap(0, w, snapshot.Task{ID: 1, Class: "scan", Age: 0}, snapshot.Task{ID: 2, Class: "get", Age: 0}))
	d.Observe(snap(w, w, snapshot.Task{ID: 1, Class: "scan", Age: w}, snapshot.Task{ID: 3, Class: "other", Age: 0, Cancelled: true}))
	// Task 2 ended: about 0 + w/2.
	if n := d.Samples("get"); n != 1 {
		t.Fatalf("get samples = %v, want 1", n)
	}
	d.Observe(snap(2*w, w))
	if n := d.Samples("scan"); n != 1 {
		t.Errorf("scan samples = %v, want 1", n)
	}
	if n := d.Samples("other"); n != 0 {
		t.Errorf("a cancelled task was learned: %v samples", n)
	}
	// The class limit: a third class is not kept.
	d.Record("third", time.Second)
	if n := d.Samples("third"); n != 0 {
		t.Errorf("third class kept beyond the limit")
	}
}

func TestExpectedTotalConditions(t *testing.T) {
	d := NewDurations(0)
	for range 90 {
		d.Record("q", 2*ms)
	}
	for range 10 {
		d.Record("q", time.Second)
	}
	mean, ok := d.Mean("q")
	if !ok || mean < 90*ms || mean > 120*ms {
		t.Errorf("mean = %v %v, want about 102 ms", mean, ok)
	}
	// A task that has run 100 ms is one of the long ones.
	e, ok := d.ExpectedTotal("q", 100*ms)
	if !ok || e < 900*ms || e > 1100*ms {
		t.Errorf("E[D | D > 100ms] = %v %v, want about 1 s", e, ok)
	}
	if _, ok := d.ExpectedTotal("q", 2*time.Second); ok {
		t.Errorf("an age past every sample must give no estimate")
	}
	if _, ok := d.ExpectedTotal("none", 0); ok {
		t.Errorf("an unknown class must give no estimate")
	}
	// Progress: reported beats history; history beats the half-done guess.
	tk := &snapshot.Task{Class: "q", Age: 100 * ms}
	if p, src := Progress(tk, d); src != History || p < 0.08 || p > 0.12 {
		t.Errorf("progress = %v %v, want about 0.1 from history", p, src)
	}
	tk.Done, tk.Total = 3, 4
	if p, src := Progress(tk, d); src != Reported || p != 0.75 {
		t.Errorf("progress = %v %v, want 0.75 reported", p, src)
	}
	tk.Done, tk.Total, tk.Class = 0, 0, "none"
	if p, src := Progress(tk, d); src != Lindy || p != 0.5 {
		t.Errorf("progress = %v %v, want 0.5", p, src)
	}
	// Tasks younger than twice the observation window are not estimated
	// from history, which misses the short ones.
	d.Observe(snap(0, 200*ms))
	tk.Class = "q"
	if _, src := Progress(tk, d); src != Lindy {
		t.Errorf("a task younger than the blind spot used history")
	}
}

func TestDurationsDecay(t *testing.T) {
	d := NewDurations(0)
	for range halveAt - 1 {
		d.Record("c", ms)
	}
	for range halveAt {
		d.Record("c", time.Second)
	}
	// The old samples were halved at least once: the recent ones weigh more.
	if m, _ := d.Mean("c"); m < 600*ms {
		t.Errorf("mean after a shift = %v, want the recent durations to dominate", m)
	}
}

func FuzzContention(f *testing.F) {
	f.Add(int64(10), int64(100), int64(5), int64(100), int64(50), int64(3), uint8(0))
	f.Add(int64(-1), int64(0), int64(-5), int64(0), int64(-50), int64(0), uint8(2))
	f.Fuzz(func(t *testing.T, wait, exec, evict, capacity, inUse, window int64, kind uint8) {
		s := &snapshot.Snapshot{
			Window:    time.Duration(window),
			Tasks:     []snapshot.Task{{Exec: time.Duration(exec), Age: time.Duration(exec)}},
			Completed: snapshot.Completions{Exec: time.Duration(exec / 2)},
			Resources: []snapshot.Resource{{
				Kind: resource.Kind(kind % 6), Capacity: capacity, InUse: inUse,
				Wait: time.Duration(wait), WindowWait: time.Duration(wait),
				Evictions: evict, WindowEvictions: evict,
			}},
		}
		for _, c := range Contention(s, nil) {
			if math.IsNaN(c) || c < 0 || c > 1 {
				t.Fatalf("contention %v out of [0, 1]", c)
			}
		}
		u := &snapshot.Usage{Usage: task.Usage{Held: inUse, Hold: time.Duration(wait), Evictions: evict}}
		cur := Current(u, &s.Resources[0])
		if math.IsNaN(cur) || cur < 0 || math.IsInf(cur, 0) {
			t.Fatalf("current usage %v", cur)
		}
		p := float64(evict) / float64(capacity)
		if f := Future(cur, p); math.IsNaN(f) || f < 0 || math.IsInf(f, 0) {
			t.Fatalf("future usage %v from %v, %v", f, cur, p)
		}
	})
}

// Durations learns each class's typical duration online; a task that
// reports no progress is estimated from it.
func ExampleDurations() {
	d := NewDurations(0)
	for range 20 {
		d.Record("GET /report", 400*time.Millisecond)
	}
	mean, _ := d.Mean("GET /report")
	total, ok := d.ExpectedTotal("GET /report", 100*time.Millisecond)
	fmt.Println(mean.Round(10*time.Millisecond), ok, total >= 100*time.Millisecond) // the mean is a decaying average
	// Output: 400ms true true
}

// Source says where a progress estimate came from: the task's report, its
// class's history (its decaying mean), or, for neither, half-done.
func ExampleSource() {
	d := NewDurations(0)
	for range 20 {
		d.Record("export", time.Second)
	}
	reported := &snapshot.Task{Class: "export", Done: 3, Total: 4}
	learned := &snapshot.Task{Class: "export", Age: 250 * time.Millisecond}
	unknown := &snapshot.Task{Class: "new-kind", Age: time.Second}
	for _, t := range []*snapshot.Task{reported, learned, unknown} {
		p, src := Progress(t, d)
		fmt.Printf("%.2f %s\n", p, src)
	}
	// Output:
	// 0.75 reported
	// 0.26 class-history
	// 0.50 half-done
}

// TestDurationsClassesBounded: a learner keeps at most its maximum of
// classes, and counts the durations of further classes it drops.
func TestDurationsClassesBounded(t *testing.T) {
	d := NewDurations(10)
	for i := range 25 {
		d.Record(fmt.Sprintf("c%d", i), time.Millisecond)
	}
	if len(d.classes) != 10 || d.Dropped() != 15 {
		t.Errorf("%d classes kept, %d dropped; want 10 and 15", len(d.classes), d.Dropped())
	}
}

// TestSkippedTaskNotLearned: a task chosen for cancellation is not learned
// as a completed task when it ends, even when no snapshot showed it
// cancelled (a database statement cancelled between two polls is simply
// gone from the next): durations leave it out, and uses learn only that
// its class uses at least what it used (AtLeast): a cancelled task that
// used less than the estimate leaves it as it is, one that used more
// raises it, and a task of the class that ends on its own makes the
// estimate an ordinary one again.
func TestSkippedTaskNotLearned(t *testing.T) {
	w := 10 * ms
	res := []snapshot.Resource{{Name: "row", Kind: resource.KindLock, Capacity: 1}}
	held := func(at time.Duration, tasks ...snapshot.Task) *snapshot.Snapshot {
		s := snap(at, w, tasks...)
		s.Resources = res
		for i := range s.Tasks {
			s.Tasks[i].First, s.Tasks[i].N = int32(len(s.Usage)), 1
			s.Usage = append(s.Usage, snapshot.Usage{Task: int32(i), Res: 0, Usage: task.Usage{Held: 1, Hold: s.Tasks[i].Age}})
		}
		return s
	}
	for _, skip := range []bool{false, true} {
		d, u := NewDurations(0), NewUses(0)
		at := time.Duration(0)
		end := func(id uint64, age time.Duration, skip bool) {
			s1 := held(at, snapshot.Task{ID: id, Class: "sleep", Age: age})
			d.Observe(s1)
			u.Observe(s1)
			if skip {
				d.Skip(id)
				u.Skip(id)
			}
			at += w
			d.Observe(snap(at, w))
			u.Observe(snap(at, w))
			at += w
		}
		end(7, 500*ms, skip)
		got, learned := u.Total("sleep", "row")
		if n := d.Samples("sleep"); (n > 0) == skip || !learned || got != 0.5 || u.AtLeast("sleep", "row") != skip {
			t.Fatalf("skip=%v: durations learned %v samples; uses learned %v, %v, at least %v; want 0.5, at least %v", skip, n, got, learned, u.AtLeast("sleep", "row"), skip)
		}
		if !skip {
			continue
		}
		end(8, 100*ms, true)
		if got, _ := u.Total("sleep", "row"); got != 0.5 || !u.AtLeast("sleep", "row") {
			t.Fatalf("a cancelled task that used less moved the bound: %v, at least %v; want 0.5, true", got, u.AtLeast("sleep", "row"))
		}
		if ty, _ := u.Typical("sleep", "row"); ty != 0.5 {
			t.Fatalf("a cancelled task that used less moved the typical use: %v; want 0.5", ty)
		}
		end(9, 900*ms, true)
		if got, _ := u.Total("sleep", "row"); got != 0.5+usesWeight*0.4 || !u.AtLeast("sleep", "row") {
			t.Fatalf("a cancelled task that used more: %v, at least %v; want %v, true", got, u.AtLeast("sleep", "row"), 0.5+usesWeight*0.4)
		}
		end(10, 200*ms, false)
		if u.AtLeast("sleep", "row") {
			t.Fatal("a task of the class ended on its own: the estimate is still only a bound")
		}
		// Known from its ends now: a task of it cancelled while it
		// stalled (a victim cancelled by mistake) teaches nothing.
		before, _ := u.Total("sleep", "row")
		end(11, 5*time.Second, true)
		if got, _ := u.Total("sleep", "row"); got != before || u.AtLeast("sleep", "row") {
			t.Fatalf("a cancelled task of a class seen to end moved its estimate: %v (was %v), at least %v", got, before, u.AtLeast("sleep", "row"))
		}
	}
}

// TestTotalNeedsAUseOfTheResource: a class whose only ended task never
// touched a resource has no estimate for it (the doc's promise), so a
// task of that class holding the resource is judged by its own use, not
// by a learned 0. A task that used it once and not the next time keeps a
// decayed estimate.
func TestTotalNeedsAUseOfTheResource(t *testing.T) {
	w := 10 * ms
	u := NewUses(0)
	s := snap(0, w, snapshot.Task{ID: 1, Class: "sleep", Age: 5 * ms})
	s.Resources = []snapshot.Resource{{Name: "server", Kind: resource.KindCPU}}
	s.Tasks[0].First, s.Tasks[0].N = 0, 1
	s.Usage = []snapshot.Usage{{Task: 0, Res: 0, Usage: task.Usage{Held: 1, Hold: 5 * ms}}}
	u.Observe(s)
	u.Observe(snap(w, w))
	if got, ok := u.Total("sleep", "row"); ok {
		t.Fatalf("Total(sleep, row) = %v, true after a task that never held row; want no estimate", got)
	}
	if got, ok := u.Total("sleep", "server"); !ok || got <= 0 {
		t.Fatalf("Total(sleep, server) = %v, %v; want the task's use", got, ok)
	}
	s2 := snap(2*w, w, snapshot.Task{ID: 2, Class: "sleep", Age: 5 * ms})
	u.Observe(s2)
	u.Observe(snap(3*w, w))
	if got, ok := u.Total("sleep", "server"); !ok || got <= 0 {
		t.Fatalf("after a task without it: Total(sleep, server) = %v, %v; want a decayed estimate", got, ok)
	}
}

// A class known only from a task cancelled early (its use a lower bound)
// is not mixed when its next task holds for long: the early cancel says
// nothing of what the class typically uses. A class whose tasks ended on
// their own having used little is, when one of its tasks works on the
// resource for long.
func TestMixedNeedsAnEndedTask(t *testing.T) {
	res := []snapshot.Resource{{Name: "pool", Kind: resource.KindQueue, Capacity: 10}}
	hold := func(id uint64, class string, cancelled bool, held int64, d time.Duration) *snapshot.Snapshot {
		return &snapshot.Snapshot{Window: 5 * time.Millisecond, Resources: res,
			Tasks: []snapshot.Task{{ID: id, Class: class, Cancelled: cancelled, Age: d, N: 1}},
			Usage: []snapshot.Usage{{Usage: task.Usage{Held: held, Hold: d}}}}
	}
	none := &snapshot.Snapshot{Window: 5 * time.Millisecond, Resources: res}
	u := NewUses(0)
	u.Observe(hold(1, "report", true, 6, 40*time.Millisecond)) // cancelled early
	u.Observe(none)
	u.Observe(hold(2, "report", false, 6, 7*time.Second)) // a report working for 7 s
	if _, _, _, ok := u.Mixed("report", 0.025); ok {
		t.Error("mixed on a cancelled task's lower bound; want not")
	}
	for id := range uint64(5) {
		u.Observe(hold(10+id, "GET /", false, 1, time.Millisecond)) // lookups end on their own
		u.Observe(none)
	}
	u.Observe(hold(20, "GET /", false, 6, 7*time.Second)) // a report behind the same pattern
	if res, typ, peak, ok := u.Mixed("GET /", 0.025); !ok || res != "pool" || peak < 4 || typ > 0.001 {
		t.Errorf("Mixed(GET /) = %q, %v, %v, %v; want mixed on pool, typically 0.0001, peak 4.2", res, typ, peak, ok)
	}
}

// A light class whose live task holds one unit for a hundred times its
// class's use, with no progress of its own, is not mixed: a host whose
// other processes take the CPU stretches a light task so, and every
// light task then. The same task holding several units, or reporting
// its progress, makes the class mixed.
func TestMixedNeedsSeveralUnitsOrProgress(t *testing.T) {
	res := []snapshot.Resource{{Name: "pool", Kind: resource.KindQueue, Capacity: 10}}
	none := &snapshot.Snapshot{Window: 5 * time.Millisecond, Resources: res}
	for _, c := range []struct {
		held        int64
		done, total int64
		mixed       bool
	}{{1, 0, 0, false}, {2, 0, 0, true}, {1, 3, 10, true}} {
		u := NewUses(0)
		for id := range uint64(5) {
			u.Observe(&snapshot.Snapshot{Window: 5 * time.Millisecond, Resources: res,
				Tasks: []snapshot.Task{{ID: 10 + id, Class: "GET /", Age: time.Millisecond, N: 1}},
				Usage: []snapshot.Usage{{Usage: task.Usage{Held: 1, Hold: time.Millisecond}}}})
			u.Observe(none)
		}
		u.Observe(&snapshot.Snapshot{Window: 5 * time.Millisecond, Resources: res,
			Tasks: []snapshot.Task{{ID: 20, Class: "GET /", Age: 7 * time.Second, N: 1, Done: c.done, Total: c.total}},
			Usage: []snapshot.Usage{{Usage: task.Usage{Held: c.held, Hold: 7 * time.Second}}}})
		if _, _, _, ok := u.Mixed("GET /", 0.025); ok != c.mixed {
			t.Errorf("a task holding %d unit(s) for 7 s, progress %d/%d: mixed %v; want %v", c.held, c.done, c.total, ok, c.mixed)
		}
	}
}
