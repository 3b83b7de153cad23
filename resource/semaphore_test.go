package resource_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/task"
)

func newSemaphore(t *testing.T, e *env, size int64) *resource.Semaphore {
	t.Helper()
	return resource.NewSemaphore(e.register(t, "sem", resource.KindQueue, size), size)
}

// acquire acquires n units, marking the test failed if it cannot (it may
// be called from any goroutine).
func acquire(t *testing.T, s *resource.Semaphore, ctx context.Context, n int64) resource.Permit {
	t.Helper()
	p, err := s.Acquire(ctx, n)
	if err != nil {
		t.Errorf("Acquire(%d): %v", n, err)
	}
	return p
}

// semState is what a test compares a semaphore with.
type semState struct{ Size, InUse, Waiting, Misuse int64 }

func stateOf(s *resource.Semaphore) semState {
	return semState{s.Size(), s.InUse(), s.Waiting(), s.Resource().Misuse()}
}

func TestSemaphoreAcquireInvalid(t *testing.T) {
	tests := []struct {
		name string
		n    int64
	}{
		{"zero", 0},
		{"negative", -1},
		{"more than size", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			s := newSemaphore(t, e, 4)
			p := acquire(t, s, context.Background(), 4)
			// Fails at once although the semaphore is full.
			if got, err := s.Acquire(context.Background(), tt.n); err == nil {
				t.Errorf("Acquire(%d) = %v, nil; want an error", tt.n, got)
			}
			if _, ok := s.TryAcquire(context.Background(), tt.n); ok {
				t.Errorf("TryAcquire(%d) succeeded", tt.n)
			}
			if diff := cmp.Diff(semState{Size: 4, InUse: 4}, stateOf(s)); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
			if err := p.Release(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestSemaphoreWeightedFIFO checks that a large request at the head of the
// queue is not starved by small ones that would fit.
func TestSemaphoreWeightedFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		s := newSemaphore(t, e, 4)
		bg := context.Background()
		held := acquire(t, s, bg, 3)

		big := make(chan resource.Permit, 1)
		go func() { big <- acquire(t, s, bg, 4) }()
		synctest.Wait()
		// One unit is free, but the big request waits ahead.
		if _, ok := s.TryAcquire(bg, 1); ok {
			t.Fatal("TryAcquire(1) passed a waiting request")
		}
		small := make(chan resource.Permit, 1)
		go func() { small <- acquire(t, s, bg, 1) }()
		synctest.Wait()
		if diff := cmp.Diff(semState{Size: 4, InUse: 3, Waiting: 2}, stateOf(s)); diff != "" {
			t.Fatalf("with two waiting (-want +got):\n%s", diff)
		}
		if err := held.Release(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if len(big) != 1 || len(small) != 0 {
			t.Fatalf("after release: big granted %v, small granted %v; want true, false", len(big) == 1, len(small) == 1)
		}
		if err := (<-big).Release(); err != nil {
			t.Fatal(err)
		}
		if err := (<-small).Release(); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(semState{Size: 4}, stateOf(s)); diff != "" {
			t.Errorf("at the end (-want +got):\n%s", diff)
		}
	})
}

func TestSemaphoreCancel(t *testing.T) {
	tests := []struct {
		name string
		// queue is the requests queued, in order; the first is cancelled.
		queue []int64
		// want is the state after the cancellation, 2 of 4 units held.
		want semState
	}{
		{"only waiter", []int64{3}, semState{Size: 4, InUse: 2}},
		{"head, small one behind fits", []int64{4, 1}, semState{Size: 4, InUse: 3}},
		{"head, big one behind waits", []int64{4, 3}, semState{Size: 4, InUse: 2, Waiting: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				s := newSemaphore(t, e, 4)
				bg := context.Background()
				held := acquire(t, s, bg, 2)
				ctx, cancel := context.WithCancelCause(bg)
				first := goErr(func() error {
					_, err := s.Acquire(ctx, tt.queue[0])
					return err
				})
				synctest.Wait()
				var rest []chan resource.Permit
				for _, n := range tt.queue[1:] {
					ch := make(chan resource.Permit, 1)
					go func() { ch <- acquire(t, s, bg, n) }()
					rest = append(rest, ch)
					synctest.Wait()
				}
				cancel(errCause)
				if err := <-first; !errors.Is(err, errCause) {
					t.Fatalf("cancelled Acquire = %v, want %v", err, errCause)
				}
				synctest.Wait()
				if diff := cmp.Diff(tt.want, stateOf(s)); diff != "" {
					t.Errorf("after cancel (-want +got):\n%s", diff)
				}
				if err := held.Release(); err != nil {
					t.Fatal(err)
				}
				for _, ch := range rest {
					if err := (<-ch).Release(); err != nil {
						t.Fatal(err)
					}
				}
				if diff := cmp.Diff(semState{Size: 4}, stateOf(s)); diff != "" {
					t.Errorf("at the end (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestSemaphoreCancelledTask(t *testing.T) {
	e := newEnv(t)
	s := newSemaphore(t, e, 2)
	ctx, tk := e.begin(t, task.Spec{Cancellable: true})
	if err := taskx.Cancel(tk, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, 1); !errors.Is(err, task.ErrCancelled) {
		t.Errorf("Acquire = %v, want an error wrapping %v", err, task.ErrCancelled)
	}
	if diff := cmp.Diff(semState{Size: 2}, stateOf(s)); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}

func TestPermitRelease(t *testing.T) {
	tests := []struct {
		name string
		// others is the units other tasks hold while the permit of 1 unit
		// is released twice.
		others int64
	}{
		{"alone", 0},
		{"others hold units", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			s := newSemaphore(t, e, 4)
			if tt.others > 0 {
				octx, _ := e.begin(t, task.Spec{})
				acquire(t, s, octx, tt.others)
			}
			ctx, tk := e.begin(t, task.Spec{})
			p := acquire(t, s, ctx, 1)
			if got := p.Units(); got != 1 {
				t.Errorf("Units() = %d, want 1", got)
			}
			if err := p.Release(); err != nil {
				t.Fatalf("first Release: %v", err)
			}
			if err := p.Release(); err == nil {
				t.Error("second Release succeeded")
			}
			// The mistake is counted and changes nothing: the others keep
			// their units.
			if diff := cmp.Diff(semState{Size: 4, InUse: tt.others, Misuse: 1}, stateOf(s)); diff != "" {
				t.Errorf("after releasing twice (-want +got):\n%s", diff)
			}
			if got := usage(t, tk, s.Resource()).Held; got != 0 {
				t.Errorf("Held = %d, want 0", got)
			}
		})
	}
}

func TestPermitReleaseUntrackedTwice(t *testing.T) {
	e := newEnv(t)
	s := newSemaphore(t, e, 2)
	p := acquire(t, s, context.Background(), 2)
	if err := p.Release(); err != nil {
		t.Fatal(err)
	}
	if err := p.Release(); err == nil {
		t.Error("second Release succeeded")
	}
	if diff := cmp.Diff(semState{Size: 2, Misuse: 1}, stateOf(s)); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}

func TestZeroPermit(t *testing.T) {
	var p resource.Permit
	if err := p.Release(); !errors.Is(err, resource.ErrZeroPermit) {
		t.Errorf("Release() = %v, want %v", err, resource.ErrZeroPermit)
	}
	if got := p.Units(); got != 0 {
		t.Errorf("Units() = %d, want 0", got)
	}
}

func TestSemaphoreResize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		s := newSemaphore(t, e, 2)
		bg := context.Background()
		held := acquire(t, s, bg, 2)
		got := make(chan resource.Permit, 2)
		for range 2 {
			go func() { got <- acquire(t, s, bg, 1) }()
		}
		synctest.Wait()
		if err := s.Resize(3); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if diff := cmp.Diff(semState{Size: 3, InUse: 3, Waiting: 1}, stateOf(s)); diff != "" {
			t.Errorf("after growing by one (-want +got):\n%s", diff)
		}
		if err := s.Resize(4); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if diff := cmp.Diff(semState{Size: 4, InUse: 4}, stateOf(s)); diff != "" {
			t.Errorf("after growing by two (-want +got):\n%s", diff)
		}
		// Shrinking keeps what is held; nothing new fits until enough is
		// released.
		if err := s.Resize(1); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(semState{Size: 1, InUse: 4}, stateOf(s)); diff != "" {
			t.Errorf("after shrinking (-want +got):\n%s", diff)
		}
		if _, ok := s.TryAcquire(bg, 1); ok {
			t.Error("TryAcquire succeeded on an over-full semaphore")
		}
		for _, p := range []resource.Permit{held, <-got, <-got} {
			if err := p.Release(); err != nil {
				t.Fatal(err)
			}
		}
		for _, size := range []int64{0, -1} {
			if err := s.Resize(size); err == nil {
				t.Errorf("Resize(%d) succeeded", size)
			}
		}
		if diff := cmp.Diff(semState{Size: 1}, stateOf(s)); diff != "" {
			t.Errorf("at the end (-want +got):\n%s", diff)
		}
	})
}

func TestSemaphoreTryAcquire(t *testing.T) {
	e := newEnv(t)
	s := newSemaphore(t, e, 3)
	ctx, tk := e.begin(t, task.Spec{})
	p, ok := s.TryAcquire(ctx, 2)
	if !ok {
		t.Fatal("TryAcquire(2) of 3 free failed")
	}
	if got := usage(t, tk, s.Resource()).Held; got != 2 {
		t.Errorf("Held = %d, want 2", got)
	}
	if _, ok := s.TryAcquire(ctx, 2); ok {
		t.Fatal("TryAcquire(2) of 1 free succeeded")
	}
	q, ok := s.TryAcquire(ctx, 1)
	if !ok {
		t.Fatal("TryAcquire(1) of 1 free failed")
	}
	for _, p := range []resource.Permit{p, q} {
		if err := p.Release(); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(semState{Size: 3}, stateOf(s)); diff != "" {
		t.Errorf("at the end (-want +got):\n%s", diff)
	}
}

func TestSemaphoreAccounting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		s := newSemaphore(t, e, 4)
		id := s.Resource().ID()
		hctx, holder := e.begin(t, task.Spec{})
		wctx, waiter := e.begin(t, task.Spec{})
		p := acquire(t, s, hctx, 3)
		ch := make(chan resource.Permit, 1)
		go func() { ch <- acquire(t, s, wctx, 2) }()
		synctest.Wait()
		time.Sleep(4 * time.Millisecond)
		e.clk.Advance()
		if err := p.Release(); err != nil {
			t.Fatal(err)
		}
		q := <-ch
		time.Sleep(time.Millisecond)
		e.clk.Advance()
		if diff := cmp.Diff(task.Usage{Resource: id, Hold: 4 * time.Millisecond}, usage(t, holder, s.Resource())); diff != "" {
			t.Errorf("holder (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(task.Usage{Resource: id, Held: 2, Hold: time.Millisecond, Waits: 1, Wait: 4 * time.Millisecond}, usage(t, waiter, s.Resource())); diff != "" {
			t.Errorf("waiter (-want +got):\n%s", diff)
		}
		if err := q.Release(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestSemaphoreConcurrent(t *testing.T) {
	e := newEnv(t)
	const size = 5
	s := newSemaphore(t, e, size)
	var (
		wg   sync.WaitGroup
		held atomic.Int64
		over atomic.Int32
	)
	for i := range 6 {
		ctx, _ := e.begin(t, task.Spec{})
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 1))
			for range 150 {
				n := 1 + r.Int64N(size)
				p, err := s.Acquire(ctx, n)
				if err != nil {
					t.Error(err)
					return
				}
				if held.Add(n) > size {
					over.Add(1)
				}
				held.Add(-n)
				if err := p.Release(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := over.Load(); n != 0 {
		t.Errorf("more than %d units were held %d times", size, n)
	}
	if diff := cmp.Diff(semState{Size: size}, stateOf(s)); diff != "" {
		t.Errorf("at the end (-want +got):\n%s", diff)
	}
}

// TestResizeRefusesWaitersThatNoLongerFit: a waiter asking for more than a
// shrunken semaphore holds is refused at once, and those behind it go on.
func TestResizeRefusesWaitersThatNoLongerFit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		s := resource.NewSemaphore(e.register(t, "pool", resource.KindQueue, 4), 4)
		ctx := context.Background()
		hold, err := s.Acquire(ctx, 4)
		if err != nil {
			t.Fatal(err)
		}
		bigErr := make(chan error, 1)
		go func() {
			_, err := s.Acquire(ctx, 3)
			bigErr <- err
		}()
		synctest.Wait()
		smallDone := make(chan resource.Permit, 1)
		go func() {
			p, err := s.Acquire(ctx, 1)
			if err != nil {
				t.Error(err)
			}
			smallDone <- p
		}()
		synctest.Wait()
		if err := s.Resize(2); err != nil {
			t.Fatal(err)
		}
		if err := <-bigErr; err == nil || !strings.Contains(err.Error(), "below the 3 units") {
			t.Errorf("big waiter: %v, want refusal", err)
		}
		if err := hold.Release(); err != nil {
			t.Fatal(err)
		}
		p := <-smallDone
		if err := p.Release(); err != nil {
			t.Fatal(err)
		}
		if s.Waiting() != 0 || s.InUse() != 0 {
			t.Errorf("waiting %d, in use %d", s.Waiting(), s.InUse())
		}
	})
}
