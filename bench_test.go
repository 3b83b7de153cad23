package moirai_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/snapshot"
)

// The benchmarks below each run beside their baseline, so one run gives the
// ratio: BenchmarkX/baseline is the standard or x/sync primitive, and
// BenchmarkX/moirai is moirai's with a task in the context.
//
// The uncontended pairs also report min-ns/op: the fastest stretch of
// lapOps operations, the cost when nothing else ran on the core. On a
// shared machine ns/op carries other processes' time; min-ns/op mostly
// does not. Both sides of a pair pay the same for the lap timer (a
// counter, and a clock read every lapOps operations). The RunParallel
// pairs do not: a stretch in which the other goroutines were descheduled
// would measure no contention at all. scripts/hotpath, the regression
// guard, times the same pairs with the two sides alternating in one
// process, the parallel ones by their threads' CPU time.

// lapOps is the length of a stretch that lapTimer times.
const lapOps = 256

// lapTimer finds the fastest stretch of lapOps operations of a benchmark
// loop: call tick once per operation.
type lapTimer struct {
	n     int
	start time.Time
	best  time.Duration
}

func (l *lapTimer) tick() {
	if l.n++; l.n >= lapOps {
		l.lap()
	}
}

func (l *lapTimer) lap() {
	now := time.Now()
	if d := now.Sub(l.start); !l.start.IsZero() && (l.best == 0 || d < l.best) {
		l.best = d
	}
	l.n, l.start = 0, now
}

// report reports the fastest stretch as min-ns/op.
func (l *lapTimer) report(b *testing.B) {
	if l.best > 0 {
		b.ReportMetric(float64(l.best)/lapOps, "min-ns/op")
	}
}

func BenchmarkMutex(b *testing.B) {
	b.Run("baseline", func(b *testing.B) {
		var mu sync.Mutex
		b.ReportAllocs()
		var lt lapTimer
		for b.Loop() {
			mu.Lock()
			//lint:ignore SA2001 an empty critical section is the baseline's point
			mu.Unlock()
			lt.tick()
		}
		lt.report(b)
	})
	b.Run("moirai", func(b *testing.B) {
		ctl := moirai.New()
		defer ctl.Close()
		mu := ctl.Mutex("bench")
		ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "bench"})
		defer t.End(nil)
		b.ReportAllocs()
		var lt lapTimer
		for b.Loop() {
			if err := mu.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			mu.Unlock()
			lt.tick()
		}
		lt.report(b)
	})
}

func BenchmarkMutexParallel(b *testing.B) {
	b.Run("baseline", func(b *testing.B) {
		var mu sync.Mutex
		n := 0
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
		_ = n
	})
	b.Run("moirai", func(b *testing.B) {
		ctl := moirai.New()
		defer ctl.Close()
		mu := ctl.Mutex("bench")
		n := 0
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "bench"})
			defer t.End(nil)
			for pb.Next() {
				if err := mu.Lock(ctx); err != nil {
					b.Error(err)
					return
				}
				n++
				mu.Unlock()
			}
		})
		_ = n
	})
}

func BenchmarkSemaphore(b *testing.B) {
	b.Run("baseline", func(b *testing.B) {
		s := semaphore.NewWeighted(10)
		ctx := context.Background()
		semBaselineLoop(b, ctx, s)
	})
	b.Run("moirai", func(b *testing.B) {
		ctl := moirai.New()
		defer ctl.Close()
		s := ctl.Semaphore("bench", 10)
		ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "bench"})
		defer t.End(nil)
		semMoiraiLoop(b, ctx, s)
	})
}

// BenchmarkSemaphoreSecond is BenchmarkSemaphore on a semaphore of 2 units
// of which another task holds one: the path of a second concurrent holder
// (named in its holder slot, which keeps the unit between iterations),
// which BenchmarkSemaphoreParallel takes about half the time, timed
// without the contention (min-ns/op).
func BenchmarkSemaphoreSecond(b *testing.B) {
	b.Run("baseline", func(b *testing.B) {
		s := semaphore.NewWeighted(2)
		ctx := context.Background()
		if err := s.Acquire(ctx, 1); err != nil {
			b.Fatal(err)
		}
		semBaselineLoop(b, ctx, s)
	})
	b.Run("moirai", func(b *testing.B) {
		ctl := moirai.New()
		defer ctl.Close()
		s := ctl.Semaphore("bench", 2)
		other, ot := ctl.Begin(context.Background(), moirai.Spec{Class: "bench"})
		defer ot.End(nil)
		held, err := s.Acquire(other, 1)
		if err != nil {
			b.Fatal(err)
		}
		defer held.Release()
		ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "bench"})
		defer t.End(nil)
		semMoiraiLoop(b, ctx, s)
	})
}

// semBaselineLoop times Acquire and Release of one unit of s, fastest
// lap (see lapTimer).
func semBaselineLoop(b *testing.B, ctx context.Context, s *semaphore.Weighted) {
	b.Helper()
	b.ReportAllocs()
	var lt lapTimer
	for b.Loop() {
		if err := s.Acquire(ctx, 1); err != nil {
			b.Fatal(err)
		}
		s.Release(1)
		lt.tick()
	}
	lt.report(b)
}

// semMoiraiLoop is semBaselineLoop on a moirai semaphore, for the task
// in ctx.
func semMoiraiLoop(b *testing.B, ctx context.Context, s *moirai.Semaphore) {
	b.Helper()
	b.ReportAllocs()
	var lt lapTimer
	for b.Loop() {
		p, err := s.Acquire(ctx, 1)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Release(); err != nil {
			b.Fatal(err)
		}
		lt.tick()
	}
	lt.report(b)
}

// BenchmarkSemaphoreParallel is BenchmarkSemaphore from every P at once,
// one task per goroutine, on a semaphore of 2 units: the contended case.
func BenchmarkSemaphoreParallel(b *testing.B) {
	b.Run("baseline", func(b *testing.B) {
		s := semaphore.NewWeighted(2)
		ctx := context.Background()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := s.Acquire(ctx, 1); err != nil {
					b.Error(err)
					return
				}
				s.Release(1)
			}
		})
	})
	b.Run("moirai", func(b *testing.B) {
		ctl := moirai.New()
		defer ctl.Close()
		s := ctl.Semaphore("bench", 2)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "bench"})
			defer t.End(nil)
			for pb.Next() {
				p, err := s.Acquire(ctx, 1)
				if err != nil {
					b.Error(err)
					return
				}
				if err := p.Release(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

func BenchmarkTask(b *testing.B) {
	parent := context.Background()
	b.Run("baseline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, cancel := context.WithCancelCause(parent)
			cancel(nil)
		}
	})
	b.Run("moirai", func(b *testing.B) {
		ctl := moirai.New()
		defer ctl.Close()
		spec := moirai.Spec{Class: "bench", Cancellable: true}
		b.ReportAllocs()
		for b.Loop() {
			_, t := ctl.Begin(parent, spec)
			t.End(nil)
		}
	})
}

// BenchmarkTaskParallel begins and ends short tasks from every P, each
// taking a shared mutex once: 1e9 / ns/op is the registry's rate in tasks
// per second (the fault "a million short tasks per second").
func BenchmarkTaskParallel(b *testing.B) {
	ctl := moirai.New()
	defer ctl.Close()
	mu := ctl.Mutex("shared")
	spec := moirai.Spec{Class: "short", Cancellable: true}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ctx, t := ctl.Begin(context.Background(), spec)
			if err := mu.Lock(ctx); err == nil {
				mu.Unlock()
			}
			t.End(nil)
		}
	})
}

// BenchmarkTaskContextUsed is BenchmarkTask for a task whose context is
// waited on (Done is called), which creates the task's cancellable context.
func BenchmarkTaskContextUsed(b *testing.B) {
	parent := context.Background()
	b.Run("baseline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithCancelCause(parent)
			_ = ctx.Done()
			cancel(nil)
		}
	})
	b.Run("moirai", func(b *testing.B) {
		ctl := moirai.New()
		defer ctl.Close()
		spec := moirai.Spec{Class: "bench", Cancellable: true}
		b.ReportAllocs()
		for b.Loop() {
			ctx, t := ctl.Begin(parent, spec)
			_ = ctx.Done()
			t.End(nil)
		}
	})
}

// BenchmarkSnapshot takes one snapshot of 10,000 live tasks, each holding
// or waiting on 8 resources.
func BenchmarkSnapshot(b *testing.B) { benchSnapshot(b, 10000, 8) }

func benchSnapshot(b *testing.B, tasks, resources int) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	var res []*moirai.Resource
	for i := range resources {
		r, err := ctl.Register(fmt.Sprintf("r%d", i), moirai.KindLock, 0)
		if err != nil {
			b.Fatal(err)
		}
		res = append(res, r)
	}
	var ended []*moirai.Task
	for i := range tasks {
		ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "bench", Cancellable: true})
		for j, r := range res {
			if (i+j)%2 == 0 {
				r.Acquire(ctx, 1)
			} else {
				r.WaitBegin(ctx)
			}
		}
		ended = append(ended, t)
	}
	defer func() {
		for _, t := range ended {
			t.End(nil)
		}
	}()
	var s snapshot.Snapshot
	ctl.SnapshotInto(&s) // grow the buffers once
	if len(s.Tasks) != tasks || len(s.Usage) != tasks*resources {
		b.Fatalf("snapshot has %d tasks, %d usages", len(s.Tasks), len(s.Usage))
	}
	b.ReportAllocs()
	for b.Loop() {
		ctl.SnapshotInto(&s)
	}
}

// BenchmarkStep is one step of the control loop with the default mechanisms
// (Atropos) over a busy service: 200 live requests on 8 resources, half of
// them holding one and half waiting for one. The requests are older than
// the objective, so the detector fires and the policy runs: the step's cost
// while acting, its most expensive. Multiplied by the steps per second (10
// at the default 100 ms coarse tick, 100 at the harness's 10 ms), it is the
// share of a CPU the controller takes.
func BenchmarkStep(b *testing.B) {
	for _, n := range []int{200, 2000} {
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			ctl := moirai.New(moirai.WithSLO(0.99, time.Millisecond), moirai.WithTick(time.Hour, time.Hour))
			defer ctl.Close()
			var res []*moirai.Resource
			for i := range 8 {
				r, err := ctl.Register(fmt.Sprintf("r%d", i), moirai.KindLock, 0)
				if err != nil {
					b.Fatal(err)
				}
				res = append(res, r)
			}
			var tasks []*moirai.Task
			for i := range n {
				ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "bench", Cancellable: i%7 != 0})
				if r := res[i%len(res)]; i%2 == 0 {
					r.Acquire(ctx, 1)
				} else {
					r.WaitBegin(ctx)
				}
				tasks = append(tasks, t)
			}
			defer func() {
				for _, t := range tasks {
					t.End(nil)
				}
			}()
			time.Sleep(5 * time.Millisecond) // older than the objective
			ctl.StepForTest()
			b.ReportAllocs()
			for b.Loop() {
				ctl.StepForTest()
			}
		})
	}
}

// BenchmarkRetryParallel serves short requests from every P as tasks
// (baseline: Begin and End) and through Retry (moirai: httpmw's
// WithReexecution), while 10,000 live tasks make each step of the loop,
// at a 1 ms tick, long: a request through Retry must not wait for it.
func BenchmarkRetryParallel(b *testing.B) {
	run := func(b *testing.B, retry bool) {
		ctl := moirai.New(moirai.WithTick(time.Millisecond, time.Millisecond))
		defer ctl.Close()
		for range 10000 {
			_, t := ctl.Begin(context.Background(), moirai.Spec{Class: "idle"})
			defer t.End(nil)
		}
		spec := moirai.Spec{Class: "short", Cancellable: true}
		noop := func(context.Context) error { return nil }
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if retry {
					_ = moirai.Retry(context.Background(), ctl, spec, noop)
					continue
				}
				ctx, t := ctl.Begin(context.Background(), spec)
				t.End(noop(ctx))
			}
		})
	}
	b.Run("baseline", func(b *testing.B) { run(b, false) })
	b.Run("moirai", func(b *testing.B) { run(b, true) })
}
