package moirai_test

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/fence"
	"github.com/moirai-go/moirai/task"
)

// TestHotPathDoesNotAllocate is the guarantee "the hot path never
// allocates": every event a request's task records on an uncontended
// resource, and a path fence's acquire and release, allocate nothing.
// (The race detector's instrumentation allocates: the test runs without
// it.)
func TestHotPathDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	ctx, tk := ctl.Begin(context.Background(), moirai.Spec{Class: "c", Cancellable: true})
	defer tk.End(nil)
	mu := ctl.Mutex("mu")
	rw := ctl.RWMutex("rw")
	sem := ctl.Semaphore("sem", 4)
	q := ctl.Queue("q", 4, 0)
	mem := ctl.Memory("mem", 1<<20)
	raw, err := ctl.Register("raw", moirai.KindLock, 0)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ctl.Fence("fence", 8, []fence.Reservation{{Name: "d1", Permits: 4}})
	if err != nil {
		t.Fatal(err)
	}
	d1 := f.Path("d1")
	ops := map[string]func(){
		"Mutex":      func() { _ = mu.Lock(ctx); mu.Unlock() },
		"RWMutex":    func() { _ = rw.RLock(ctx); rw.RUnlock(ctx) },
		"Semaphore":  func() { p, _ := sem.Acquire(ctx, 1); _ = p.Release() },
		"Queue":      func() { p, _ := q.Enter(ctx); _ = p.Release() },
		"Memory":     func() { _ = mem.Use(ctx, 64); _ = mem.Free(ctx, 64) },
		"raw events": func() { raw.WaitBegin(ctx); raw.WaitEnd(ctx); _ = raw.Acquire(ctx, 1); _ = raw.Release(ctx, 1) },
		"Fence":      func() { p, _ := f.Acquire(ctx, d1); _ = p.Release() },
		"Progress":   func() { tk.Progress(1, 2) },
	}
	for name, op := range ops {
		op() // first use claims the task's accounting slot
		if n := testing.AllocsPerRun(200, op); n != 0 {
			t.Errorf("%s: %.1f allocations per operation, want 0", name, n)
		}
	}
}

// TestMillionShortTasks is the fault "a million short tasks per second
// through the registry": a million tasks, each taking a shared mutex once,
// begun and ended from four goroutines as fast as they go (with the
// controller's loop running). Every one is counted begun and ended, none
// is live after, no event is lost or misfiled, and the registry's memory
// does not grow with the count. (The rate itself is BenchmarkTaskParallel's:
// tasks per second = 1e9 / its ns/op.) Under the race detector, 100,000.
func TestMillionShortTasks(t *testing.T) {
	n := 1_000_000
	if raceEnabled || testing.Short() {
		n = 100_000
	}
	ctl := moirai.New()
	defer ctl.Close()
	mu := ctl.Mutex("shared")
	spec := moirai.Spec{Class: "short", Cancellable: true}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const workers = 4
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range n / workers {
				ctx, tk := ctl.Begin(context.Background(), spec)
				if err := mu.Lock(ctx); err == nil {
					mu.Unlock()
				}
				tk.End(nil)
			}
		})
	}
	wg.Wait()
	runtime.GC()
	runtime.ReadMemStats(&after)
	var tot task.Totals
	ctl.Tasks().TotalsInto(&tot)
	st := ctl.Stats()
	if tot.Begun != uint64(n) || tot.Ended != uint64(n) || st.Live != 0 {
		t.Fatalf("begun %d, ended %d, live %d; want %d, %d, 0", tot.Begun, tot.Ended, st.Live, n, n)
	}
	if st.EndedTwice != 0 || st.LateEvents != 0 || st.BadEvents != 0 || st.Unended != 0 {
		t.Fatalf("stats %+v: want no misfiled event", st)
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 8<<20 {
		t.Fatalf("live heap grew by %d MiB over %d tasks", grew>>20, n)
	}
}
