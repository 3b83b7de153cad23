package moirai_test

import (
	"context"
	"testing"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/fence"
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
	ctl := moirai.New(moirai.WithTraceOnly())
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
