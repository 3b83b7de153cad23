package fence_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/fence"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/resource"
)

func mustNew(t *testing.T, size int, paths []fence.Reservation, opts ...fence.Option) *fence.Fence {
	t.Helper()
	f, err := fence.New(size, paths, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestNewRefusesBadReservations(t *testing.T) {
	tests := []struct {
		name    string
		size    int
		paths   []fence.Reservation
		opts    []fence.Option
		wantErr string
	}{
		{"above the pool", 10, []fence.Reservation{{"d1", 6}, {"d2", 5}}, nil, "exceed the pool of 10"},
		{"duplicate", 10, []fence.Reservation{{"d1", 2}, {"d1", 2}}, nil, "reserved twice"},
		{"local name", 10, []fence.Reservation{{"local", 2}}, nil, "local reservation's"},
		{"no name", 10, []fence.Reservation{{" ", 2}}, nil, "no name"},
		{"zero permits", 10, []fence.Reservation{{"d1", 0}}, nil, "want at least 1"},
		{"empty pool", 0, nil, nil, "want at least 1"},
		{"unknown fallback", 10, []fence.Reservation{{"d1", 2}}, []fence.Option{fence.WithFallback("d9")}, "not one of the fence's"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fence.New(tt.size, tt.paths, tt.opts...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
	f := mustNew(t, 10, []fence.Reservation{{"d1", 6}, {"d2", 4}})
	if got := f.Local().Permits(); got != 0 {
		t.Errorf("local permits = %d, want the 0 the paths leave", got)
	}
}

func TestPathRequestsStayInTheirReservation(t *testing.T) {
	f := mustNew(t, 6, []fence.Reservation{{"d1", 2}, {"d2", 2}})
	ctx := context.Background()
	d1, d2 := f.Path("d1"), f.Path("d2")
	var held []fence.Permit
	for range 2 {
		p, err := f.Acquire(ctx, d1)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
	}
	// d1 is full: a third d1 request waits although d2 and local are free.
	tctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := f.Acquire(tctx, d1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third d1 acquire: %v, want the context's deadline", err)
	}
	// d2 and local are untouched.
	p2, err := f.Acquire(ctx, d2)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := f.Acquire(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(held, p2, pl) {
		if err := p.Release(); err != nil {
			t.Fatal(err)
		}
	}
	checkIdle(t, f)
}

func TestLocalBorrowsFromTheLeastUsedPath(t *testing.T) {
	f := mustNew(t, 5, []fence.Reservation{{"d1", 2}, {"d2", 2}})
	ctx := context.Background()
	a, _ := f.Acquire(ctx, f.Path("d1"))
	l1, _ := f.Acquire(ctx, nil) // the local reservation's one permit
	if l1.Borrowed() {
		t.Fatal("first local request borrowed although the local reservation was free")
	}
	l2, err := f.Acquire(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !l2.Borrowed() || f.Path("d2").InUse() != 1 {
		t.Fatalf("second local request: borrowed %v, d2 in use %d; want a permit of d2, the path with fewer in use",
			l2.Borrowed(), f.Path("d2").InUse())
	}
	if f.Local().Running() != 2 || f.Path("d2").Running() != 0 {
		t.Errorf("running: local %d, d2 %d; want 2 and 0", f.Local().Running(), f.Path("d2").Running())
	}
	for _, p := range []fence.Permit{a, l1, l2} {
		if err := p.Release(); err != nil {
			t.Fatal(err)
		}
	}
	checkIdle(t, f)
	if got := f.Stats().Paths[2].Lent; got != 1 {
		t.Errorf("d2 lent %d permits, want 1", got)
	}
}

func TestFreedPathPermitGoesToLocalFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := mustNew(t, 1, []fence.Reservation{{"d1", 1}})
		ctx := context.Background()
		d1 := f.Path("d1")
		held, _ := f.Acquire(ctx, d1)
		order := make(chan string, 2)
		go func() { // a d1 request waits first...
			p, err := f.Acquire(ctx, d1)
			if err == nil {
				order <- "d1"
				p.Release()
			}
		}()
		synctest.Wait()
		go func() { // ...then a local one.
			p, err := f.Acquire(ctx, nil)
			if err == nil {
				order <- "local"
				time.Sleep(time.Millisecond)
				p.Release()
			}
		}()
		synctest.Wait()
		held.Release()
		if first, second := <-order, <-order; first != "local" || second != "d1" {
			t.Fatalf("order %s, %s; want local before d1", first, second)
		}
		checkIdle(t, f)
	})
}

func TestResizeAdmitsWaitersAndKeepsHeldPermits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := mustNew(t, 8, []fence.Reservation{{"d1", 2}, {"d2", 2}})
		ctx := context.Background()
		d1 := f.Path("d1")
		a, _ := f.Acquire(ctx, d1)
		b, _ := f.Acquire(ctx, d1)
		got := make(chan fence.Permit)
		go func() {
			p, err := f.Acquire(ctx, d1)
			if err == nil {
				got <- p
			}
		}()
		synctest.Wait()
		if d1.Waiting() != 1 {
			t.Fatalf("d1 waiting %d, want 1", d1.Waiting())
		}
		if err := f.Resize("d1", 3); err != nil {
			t.Fatal(err)
		}
		c := <-got
		if f.Local().Permits() != 3 {
			t.Errorf("local permits %d after d1 grew to 3, want 3", f.Local().Permits())
		}
		// Shrink below what is held: nothing is taken back.
		if err := f.Resize("d1", 1); err != nil {
			t.Fatal(err)
		}
		if d1.InUse() != 3 {
			t.Errorf("d1 in use %d after shrinking, want the 3 held", d1.InUse())
		}
		for _, p := range []fence.Permit{a, b, c} {
			if err := p.Release(); err != nil {
				t.Fatal(err)
			}
		}
		if _, ok := f.Acquire(ctx, d1); ok != nil {
			t.Fatal(ok)
		}
		if err := f.Resize("d1", 7); err == nil || !strings.Contains(err.Error(), "above the pool") {
			t.Errorf("Resize above the pool: %v, want a refusal", err)
		}
		for _, bad := range []string{"local", "d9"} {
			if err := f.Resize(bad, 1); err == nil {
				t.Errorf("Resize(%q) accepted", bad)
			}
		}
		if err := f.Resize("d1", 0); err == nil {
			t.Error("Resize to 0 accepted")
		}
	})
}

func TestCancelledWaitLeaksNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := mustNew(t, 2, []fence.Reservation{{"d1", 1}})
		d1 := f.Path("d1")
		held, _ := f.Acquire(context.Background(), d1)
		cause := errors.New("client gone")
		ctx, cancel := context.WithCancelCause(context.Background())
		done := make(chan error)
		go func() {
			_, err := f.Acquire(ctx, d1)
			done <- err
		}()
		synctest.Wait()
		cancel(cause)
		if err := <-done; !errors.Is(err, cause) {
			t.Fatalf("cancelled Acquire: %v, want its cause", err)
		}
		if d1.Waiting() != 0 {
			t.Fatalf("d1 waiting %d after the cancel", d1.Waiting())
		}
		held.Release()
		checkIdle(t, f)
	})
}

func TestBacklogRejects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := mustNew(t, 2, []fence.Reservation{{"d1", 1}}, fence.WithBacklog(1))
		d1 := f.Path("d1")
		held, _ := f.Acquire(context.Background(), d1)
		ctx, cancel := context.WithCancel(context.Background())
		go f.Acquire(ctx, d1)
		synctest.Wait()
		if _, err := f.Acquire(context.Background(), d1); !errors.Is(err, fence.ErrRejected) {
			t.Fatalf("Acquire with a full line: %v, want ErrRejected", err)
		}
		// The local line is its own: still free.
		p, err := f.Acquire(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		p.Release()
		cancel()
		synctest.Wait()
		held.Release()
		checkIdle(t, f)
		if got := f.Stats().Paths[1].Rejected; got != 1 {
			t.Errorf("rejected %d, want 1", got)
		}
	})
}

func TestMisuse(t *testing.T) {
	f := mustNew(t, 2, []fence.Reservation{{"d1", 1}}, fence.WithFallback("d1"))
	if err := (fence.Permit{}).Release(); !errors.Is(err, fence.ErrZeroPermit) {
		t.Errorf("zero Permit release: %v", err)
	}
	p, _ := f.Acquire(context.Background(), f.Path("d1"))
	if err := p.Release(); err != nil {
		t.Fatal(err)
	}
	if err := p.Release(); err == nil {
		t.Error("second release of a permit accepted")
	}
	if f.Stats().Misuse != 1 {
		t.Errorf("misuse %d, want 1", f.Stats().Misuse)
	}
	if got := f.Path("nowhere"); got != f.Path("d1") || f.Stats().Unknown != 1 {
		t.Errorf("unknown name: got %q, unknown %d; want the fallback d1, counted once", got.Name(), f.Stats().Unknown)
	}
	other := mustNew(t, 2, []fence.Reservation{{"d1", 1}})
	if _, err := f.Acquire(context.Background(), other.Path("d1")); err == nil {
		t.Error("Acquire with another fence's path accepted")
	}
	checkIdle(t, f)
}

// TestConcurrentChurn hammers a fence from many goroutines with random
// paths, cancellations and resizes; every permit must come back. Run it
// under -race. A lost permit would make the waits behind it last for
// ever: all of them end at the test's own deadline instead (20 s, where
// the churn takes well under a second), and the test fails.
func TestConcurrentChurn(t *testing.T) {
	f := mustNew(t, 8, []fence.Reservation{{"d1", 2}, {"d2", 3}}, fence.WithBacklog(16))
	paths := []*fence.Path{nil, f.Path("d1"), f.Path("d2")}
	deadline, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 300 {
				ctx, cancel := context.WithCancel(deadline)
				if rng.IntN(4) == 0 {
					go cancel()
				}
				p, err := f.Acquire(ctx, paths[rng.IntN(len(paths))])
				if err == nil {
					if rng.IntN(8) == 0 {
						_ = f.Resize("d1", 1+rng.IntN(4))
					}
					if err := p.Release(); err != nil {
						t.Error(err)
					}
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	if deadline.Err() != nil {
		t.Errorf("the churn did not end in 20 s: permits lost")
	}
	checkIdle(t, f)
}

func checkIdle(t *testing.T, f *fence.Fence) {
	t.Helper()
	for _, s := range f.Stats().Paths {
		if s.InUse != 0 || s.Running != 0 || s.Waiting != 0 {
			t.Errorf("path %s not idle: %+v", s.Name, s)
		}
	}
	if f.Stats().Misuse != 0 && !strings.Contains(t.Name(), "Misuse") {
		t.Errorf("misuse %d", f.Stats().Misuse)
	}
}

func TestStats(t *testing.T) {
	f := mustNew(t, 4, []fence.Reservation{{"d1", 1}})
	p, _ := f.Acquire(context.Background(), f.Path("d1"))
	p.Release()
	got := f.Stats()
	want := fence.Stats{Size: 4, Paths: []fence.PathStats{
		{Name: "local", Permits: 3},
		{Name: "d1", Permits: 1, Completed: 1},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Stats (-want +got):\n%s", d)
	}
}

func TestWithResourceAccountsToTasks(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	r, err := ctl.Register("u-workers", resource.KindQueue, 2)
	if err != nil {
		t.Fatal(err)
	}
	f := mustNew(t, 2, []fence.Reservation{{"d1", 1}}, fence.WithResource(r))
	ctx, tk := ctl.Begin(context.Background(), moirai.Spec{Class: "c"})
	p, err := f.Acquire(ctx, f.Path("d1"))
	if err != nil {
		t.Fatal(err)
	}
	if !taskx.Holding(tk) || r.Untracked() != 0 {
		t.Errorf("holding %v, untracked %d; want the task to hold the permit", taskx.Holding(tk), r.Untracked())
	}
	if err := p.Release(); err != nil {
		t.Fatal(err)
	}
	if taskx.Holding(tk) || r.Misuse() != 0 {
		t.Errorf("after release: holding %v, misuse %d", taskx.Holding(tk), r.Misuse())
	}
	tk.End(nil)
}
