package moirai_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"golang.org/x/sync/semaphore"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/snapshot"
)

// The benchmarks below each run beside their baseline, so one run gives the
// ratio: BenchmarkX/baseline is the standard or x/sync primitive, and
// BenchmarkX/moirai is moirai's with a task in the context.

func BenchmarkMutex(b *testing.B) {
	b.Run("baseline", func(b *testing.B) {
		var mu sync.Mutex
		b.ReportAllocs()
		for b.Loop() {
			mu.Lock()
			mu.Unlock() //nolint:staticcheck // empty critical section is the point
		}
	})
	b.Run("moirai", func(b *testing.B) {
		ctl := moirai.New()
		defer ctl.Close()
		mu := ctl.Mutex("bench")
		ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "bench"})
		defer t.End(nil)
		b.ReportAllocs()
		for b.Loop() {
			if err := mu.Lock(ctx); err != nil {
				b.Fatal(err)
			}
			mu.Unlock()
		}
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
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Acquire(ctx, 1); err != nil {
				b.Fatal(err)
			}
			s.Release(1)
		}
	})
	b.Run("moirai", func(b *testing.B) {
		ctl := moirai.New()
		defer ctl.Close()
		s := ctl.Semaphore("bench", 10)
		ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "bench"})
		defer t.End(nil)
		b.ReportAllocs()
		for b.Loop() {
			p, err := s.Acquire(ctx, 1)
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Release(); err != nil {
				b.Fatal(err)
			}
		}
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
	ctl := moirai.New()
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
