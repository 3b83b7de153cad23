package resource_test

import (
	"context"
	"errors"
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

func TestMutexMutualExclusion(t *testing.T) {
	e := newEnv(t)
	m := e.mutex(t, "counter")
	const goroutines, iterations = 8, 300
	var (
		wg      sync.WaitGroup
		counter int // guarded by m
		inside  atomic.Int32
		overlap atomic.Int32
	)
	tasks := make([]*task.Task, goroutines)
	for i := range goroutines {
		ctx, tk := e.begin(t, task.Spec{})
		tasks[i] = tk
		wg.Go(func() {
			for range iterations {
				if err := m.Lock(ctx); err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				if inside.Add(1) != 1 {
					overlap.Add(1)
				}
				counter++
				inside.Add(-1)
				m.Unlock()
			}
		})
	}
	wg.Wait()
	if counter != goroutines*iterations {
		t.Errorf("counter = %d, want %d", counter, goroutines*iterations)
	}
	if n := overlap.Load(); n != 0 {
		t.Errorf("%d critical sections overlapped", n)
	}
	for _, tk := range tasks {
		if u := usage(t, tk, m.Resource()); u.Held != 0 || u.Waiting != 0 {
			t.Errorf("task %d after the run: Held %d, Waiting %d, want 0, 0", tk.ID(), u.Held, u.Waiting)
		}
	}
	if n := m.Resource().Misuse(); n != 0 {
		t.Errorf("Misuse() = %d, want 0", n)
	}
}

func TestMutexLockWaitEndsWithContext(t *testing.T) {
	tests := []struct {
		name string
		// ctx returns the waiter's context and a function that ends it.
		ctx     func(e *env, t *testing.T) (context.Context, func())
		wantErr error
	}{
		{
			name: "cancel cause",
			ctx: func(_ *env, _ *testing.T) (context.Context, func()) {
				ctx, cancel := context.WithCancelCause(context.Background())
				return ctx, func() { cancel(errCause) }
			},
			wantErr: errCause,
		},
		{
			name: "deadline",
			ctx: func(_ *env, t *testing.T) (context.Context, func()) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				t.Cleanup(cancel)
				return ctx, func() { time.Sleep(time.Second) }
			},
			wantErr: context.DeadlineExceeded,
		},
		{
			name: "task cancelled while waiting",
			ctx: func(e *env, t *testing.T) (context.Context, func()) {
				ctx, tk := e.begin(t, task.Spec{Cancellable: true})
				return ctx, func() {
					if err := taskx.Cancel(tk, "x"); err != nil {
						t.Errorf("Cancel: %v", err)
					}
				}
			},
			wantErr: task.ErrCancelled,
		},
		{
			name: "task's parent cancelled",
			ctx: func(e *env, t *testing.T) (context.Context, func()) {
				parent, cancel := context.WithCancelCause(context.Background())
				ctx, tk := e.tasks.Begin(parent, task.Spec{})
				t.Cleanup(func() { tk.End(nil) })
				return ctx, func() { cancel(errCause) }
			},
			wantErr: errCause,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				m := e.mutex(t, "m")
				holder, _ := e.begin(t, task.Spec{})
				if err := m.Lock(holder); err != nil {
					t.Fatalf("Lock: %v", err)
				}
				ctx, end := tt.ctx(e, t)
				done := goErr(func() error { return m.Lock(ctx) })
				synctest.Wait()
				if len(done) != 0 {
					t.Fatal("Lock of a held mutex returned")
				}
				end()
				if err := <-done; !errors.Is(err, tt.wantErr) {
					t.Errorf("Lock = %v, want %v", err, tt.wantErr)
				}
				if tk := task.FromContext(ctx); tk != nil {
					got := usage(t, tk, m.Resource())
					want := task.Usage{Resource: m.Resource().ID(), Waits: 1, Wait: got.Wait}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("waiter's usage (-want +got):\n%s", diff)
					}
				}
				// The mutex is still held by holder, and works after.
				if m.TryLock(context.Background()) {
					t.Fatal("TryLock succeeded on a held mutex")
				}
				m.Unlock()
				other, _ := e.begin(t, task.Spec{})
				if err := m.Lock(other); err != nil {
					t.Fatalf("Lock after the cancelled wait: %v", err)
				}
				m.Unlock()
			})
		})
	}
}

func TestMutexLockCancelledTask(t *testing.T) {
	e := newEnv(t)
	m := e.mutex(t, "m")
	ctx, tk := e.begin(t, task.Spec{Cancellable: true})
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	m.Unlock()
	if err := taskx.Cancel(tk, "x"); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	// The next Lock fails at once, even on a free mutex, and whatever
	// context the task is carried by.
	for name, ctx := range map[string]context.Context{
		"task context":  ctx,
		"bound context": task.NewContext(context.Background(), tk),
	} {
		if err := m.Lock(ctx); !errors.Is(err, task.ErrCancelled) {
			t.Errorf("%s: Lock of a cancelled task = %v, want an error wrapping %v", name, err, task.ErrCancelled)
		}
	}
	if !m.TryLock(context.Background()) {
		t.Error("the failed Lock left the mutex locked")
	}
	m.Unlock()
}

func TestMutexAccounting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		m := e.mutex(t, "m")
		id := m.Resource().ID()
		hctx, holder := e.begin(t, task.Spec{})
		wctx, waiter := e.begin(t, task.Spec{})

		if err := m.Lock(hctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
		done := goErr(func() error { return m.Lock(wctx) })
		synctest.Wait()
		time.Sleep(10 * time.Millisecond)
		e.clk.Advance()

		check := func(when string, tk *task.Task, want task.Usage) {
			t.Helper()
			if diff := cmp.Diff(want, usage(t, tk, m.Resource())); diff != "" {
				t.Errorf("%s: task %d usage (-want +got):\n%s", when, tk.ID(), diff)
			}
		}
		check("while held", holder, task.Usage{Resource: id, Held: 1, Hold: 10 * time.Millisecond})
		check("while held", waiter, task.Usage{Resource: id, Waiting: 1, Waits: 1, Wait: 10 * time.Millisecond})

		m.Unlock()
		if err := <-done; err != nil {
			t.Fatalf("waiter's Lock: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
		e.clk.Advance()
		check("after handover", holder, task.Usage{Resource: id, Hold: 10 * time.Millisecond})
		check("after handover", waiter, task.Usage{Resource: id, Held: 1, Hold: 5 * time.Millisecond, Waits: 1, Wait: 10 * time.Millisecond})

		m.Unlock()
		check("after unlock", waiter, task.Usage{Resource: id, Hold: 5 * time.Millisecond, Waits: 1, Wait: 10 * time.Millisecond})
	})
}

func TestMutexTryLock(t *testing.T) {
	e := newEnv(t)
	m := e.mutex(t, "m")
	ctx, tk := e.begin(t, task.Spec{})
	if !m.TryLock(ctx) {
		t.Fatal("TryLock of a free mutex failed")
	}
	if got := usage(t, tk, m.Resource()).Held; got != 1 {
		t.Errorf("Held after TryLock = %d, want 1", got)
	}
	other, _ := e.begin(t, task.Spec{})
	if m.TryLock(other) {
		t.Fatal("TryLock of a held mutex succeeded")
	}
	m.Unlock()
	if got := usage(t, tk, m.Resource()).Held; got != 0 {
		t.Errorf("Held after Unlock = %d, want 0", got)
	}
	if !m.TryLock(other) {
		t.Fatal("TryLock after Unlock failed")
	}
	m.Unlock()
}

func TestMutexUntracked(t *testing.T) {
	e := newEnv(t)
	m := e.mutex(t, "m")
	ctx := context.Background()
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	m.Unlock()
	if !m.TryLock(ctx) {
		t.Fatal("TryLock failed")
	}
	m.Unlock()
	// Contended, and unlocked by another goroutine than the locker.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				if err := m.Lock(ctx); err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				m.Unlock()
			}
		})
	}
	wg.Wait()
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	unlocked := make(chan struct{})
	go func() { m.Unlock(); close(unlocked) }()
	<-unlocked
	if got := m.Resource().Untracked(); got < 402 {
		t.Errorf("Untracked() = %d, want at least 402", got)
	}
	if got := m.Resource().Misuse(); got != 0 {
		t.Errorf("Misuse() = %d, want 0", got)
	}
}

// TestMutexWokenWaiterGivesUp checks that a waiter woken by Unlock whose
// context is done at the same moment passes the wake-up on to the waiters
// behind it, rather than leaving them asleep on a free lock.
func TestMutexWokenWaiterGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		m := e.mutex(t, "m")
		bg := context.Background()
		// The race is decided by a select between two ready cases, so
		// try it enough times to lose it.
		for i := range 32 {
			if err := m.Lock(bg); err != nil {
				t.Fatalf("Lock: %v", err)
			}
			bctx, cancel := context.WithCancelCause(bg)
			b := goErr(func() error {
				err := m.Lock(bctx)
				if err == nil {
					m.Unlock()
				}
				return err
			})
			synctest.Wait()
			c := goErr(func() error {
				err := m.Lock(bg)
				if err == nil {
					m.Unlock()
				}
				return err
			})
			synctest.Wait()
			cancel(errCause)
			m.Unlock()
			synctest.Wait()
			if len(c) == 0 {
				t.Errorf("round %d: the waiter behind a cancelled one was never woken", i)
				// Unstick it so the bubble can end.
				if err := m.Lock(bg); err != nil {
					t.Fatalf("Lock: %v", err)
				}
				m.Unlock()
			}
			if err := <-c; err != nil {
				t.Fatalf("round %d: Lock: %v", i, err)
			}
			if err := <-b; err != nil && !errors.Is(err, errCause) {
				t.Fatalf("round %d: cancelled Lock = %v, want nil or %v", i, err, errCause)
			}
		}
	})
}

// TestMutexNoStarvation checks that a goroutine that relocks at once
// cannot keep the lock from waiters: after a millisecond of waiting they
// are served in order.
func TestMutexNoStarvation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		start := time.Now()
		// Fake time, so that the starvation threshold is crossed as the
		// bubble's clock moves.
		now := func() int64 { return int64(time.Since(start)) + 1 }
		m := resource.NewMutex(e.register(t, "m", resource.KindLock, 0), now)
		bg := context.Background()

		const rounds = 1000 // of 100µs each
		var (
			hogRound atomic.Int64
			stop     atomic.Bool
			hog      sync.WaitGroup
		)
		if err := m.Lock(bg); err != nil {
			t.Fatalf("Lock: %v", err)
		}
		hog.Go(func() {
			for i := int64(1); i <= rounds && !stop.Load(); i++ {
				hogRound.Store(i)
				time.Sleep(100 * time.Microsecond)
				m.Unlock()
				if err := m.Lock(bg); err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
			}
			m.Unlock()
		})
		const waiters = 4
		got := make(chan int64, waiters)
		var wg sync.WaitGroup
		for range waiters {
			wg.Go(func() {
				ctx, _ := e.tasks.Begin(bg, task.Spec{})
				defer task.FromContext(ctx).End(nil)
				if err := m.Lock(ctx); err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				got <- hogRound.Load()
				m.Unlock()
			})
		}
		wg.Wait()
		stop.Store(true)
		hog.Wait()
		close(got)
		for r := range got {
			if r >= rounds {
				t.Errorf("a waiter got the lock only after the hog's %d rounds", r)
			}
		}
	})
}
