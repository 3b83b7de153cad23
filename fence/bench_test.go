package fence_test

import (
	"context"
	"testing"

	"golang.org/x/sync/semaphore"

	"github.com/moirai-go/moirai/fence"
)

// BenchmarkFence is an uncontended acquire and release of a path's
// permit beside the same on a plain semaphore (x/sync's weighted
// semaphore, what Go services use for a bounded pool).
func BenchmarkFence(b *testing.B) {
	ctx := context.Background()
	b.Run("baseline", func(b *testing.B) {
		s := semaphore.NewWeighted(32)
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Acquire(ctx, 1); err != nil {
				b.Fatal(err)
			}
			s.Release(1)
		}
	})
	b.Run("moirai", func(b *testing.B) {
		f, err := fence.New(32, []fence.Reservation{{Name: "d1", Permits: 8}, {Name: "d2", Permits: 8}})
		if err != nil {
			b.Fatal(err)
		}
		d1 := f.Path("d1")
		b.ReportAllocs()
		for b.Loop() {
			p, err := f.Acquire(ctx, d1)
			if err != nil {
				b.Fatal(err)
			}
			p.Release()
		}
	})
	b.Run("moirai-local-borrow", func(b *testing.B) {
		f, err := fence.New(16, []fence.Reservation{{Name: "d1", Permits: 8}, {Name: "d2", Permits: 8}})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			p, err := f.Acquire(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			p.Release()
		}
	})
}

// BenchmarkFenceParallel is the same from every core at once, with
// enough permits that nobody waits.
func BenchmarkFenceParallel(b *testing.B) {
	ctx := context.Background()
	b.Run("baseline", func(b *testing.B) {
		s := semaphore.NewWeighted(1 << 20)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = s.Acquire(ctx, 1)
				s.Release(1)
			}
		})
	})
	b.Run("moirai", func(b *testing.B) {
		f, _ := fence.New(1<<20, []fence.Reservation{{Name: "d1", Permits: 1 << 19}})
		d1 := f.Path("d1")
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p, _ := f.Acquire(ctx, d1)
				p.Release()
			}
		})
	})
}
