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
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/task"
)

func newRWMutex(t *testing.T, e *env) *resource.RWMutex {
	t.Helper()
	return resource.NewRWMutex(e.register(t, "rw", resource.KindLock, 0))
}

func TestRWMutexReadersShareWriterExcludes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		m := newRWMutex(t, e)
		var readers []context.Context
		for range 3 {
			ctx, _ := e.begin(t, task.Spec{})
			if err := m.RLock(ctx); err != nil {
				t.Fatalf("RLock: %v", err)
			}
			readers = append(readers, ctx)
		}
		if got := m.Readers(); got != 3 {
			t.Fatalf("Readers() = %d, want 3", got)
		}
		wctx, _ := e.begin(t, task.Spec{})
		w := goErr(func() error { return m.Lock(wctx) })
		synctest.Wait()
		if len(w) != 0 || m.Waiting() != 1 {
			t.Fatalf("writer not waiting behind readers (Waiting() = %d)", m.Waiting())
		}
		for i, ctx := range readers {
			m.RUnlock(ctx)
			synctest.Wait()
			if last := i == len(readers)-1; (len(w) != 0) != last {
				t.Fatalf("after %d of %d RUnlocks, writer has the lock: %v", i+1, len(readers), !last)
			}
		}
		if err := <-w; err != nil {
			t.Fatalf("Lock: %v", err)
		}
		// A writer excludes readers and writers.
		rctx, _ := e.begin(t, task.Spec{})
		r := goErr(func() error { return m.RLock(rctx) })
		w2 := goErr(func() error { return m.Lock(wctx) })
		synctest.Wait()
		if len(r) != 0 || len(w2) != 0 {
			t.Fatal("a reader or writer got a write-locked RWMutex")
		}
		m.Unlock()
		synctest.Wait()
		// Whichever queued first is in; the other waits.
		if (len(r) == 0) == (len(w2) == 0) {
			t.Fatalf("after Unlock: reader in %v, writer in %v; want exactly one", len(r) != 0, len(w2) != 0)
		}
		if len(r) != 0 {
			<-r
			m.RUnlock(rctx)
			if err := <-w2; err != nil {
				t.Fatal(err)
			}
			m.Unlock()
		} else {
			<-w2
			m.Unlock()
			if err := <-r; err != nil {
				t.Fatal(err)
			}
			m.RUnlock(rctx)
		}
	})
}

// TestRWMutexArrivalOrder checks that grants follow arrival order: a
// queued writer holds back readers behind it, and a run of readers at the
// head of the queue is admitted together.
func TestRWMutexArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		m := newRWMutex(t, e)
		bg := context.Background()
		if err := m.RLock(bg); err != nil {
			t.Fatal(err)
		}
		var (
			mu    sync.Mutex
			order []string
		)
		record := func(s string) {
			mu.Lock()
			order = append(order, s)
			mu.Unlock()
		}
		release := map[string]chan struct{}{}
		done := map[string]<-chan error{}
		// The queue, in arrival order.
		queue := []string{"W1", "R2", "R3", "W4", "R5"}
		for _, name := range queue {
			ch := make(chan struct{})
			release[name] = ch
			write := name[0] == 'W'
			done[name] = goErr(func() error {
				if write {
					if err := m.Lock(bg); err != nil {
						return err
					}
					record(name)
					<-ch
					m.Unlock()
					return nil
				}
				if err := m.RLock(bg); err != nil {
					return err
				}
				record(name)
				<-ch
				m.RUnlock(bg)
				return nil
			})
			synctest.Wait() // queued before the next arrives
		}
		if got := m.Waiting(); got != len(queue) {
			t.Fatalf("Waiting() = %d, want %d", got, len(queue))
		}
		m.RUnlock(bg)
		// Let each holder go in turn and look at who has got in so far.
		steps := []struct {
			release []string
			want    []string
		}{
			{nil, []string{"W1"}},
			{[]string{"W1"}, []string{"W1", "R2", "R3"}},
			{[]string{"R2"}, []string{"W1", "R2", "R3"}}, // W4 waits for R3 too
			{[]string{"R3"}, []string{"W1", "R2", "R3", "W4"}},
			{[]string{"W4"}, []string{"W1", "R2", "R3", "W4", "R5"}},
			{[]string{"R5"}, []string{"W1", "R2", "R3", "W4", "R5"}},
		}
		for i, s := range steps {
			for _, name := range s.release {
				close(release[name])
			}
			synctest.Wait()
			mu.Lock()
			got := append([]string(nil), order...)
			mu.Unlock()
			// Readers admitted together may record in either order;
			// the order between steps is checked step by step.
			if diff := cmp.Diff(s.want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Fatalf("step %d: grant order (-want +got):\n%s", i, diff)
			}
		}
		for name, ch := range done {
			if err := <-ch; err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	})
}

func TestRWMutexCancelQueuedWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		m := newRWMutex(t, e)
		r1, _ := e.begin(t, task.Spec{})
		if err := m.RLock(r1); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancelCause(context.Background())
		w := goErr(func() error { return m.Lock(wctx) })
		synctest.Wait()
		r2, _ := e.begin(t, task.Spec{})
		r := goErr(func() error { return m.RLock(r2) })
		synctest.Wait()
		if len(r) != 0 {
			t.Fatal("a reader passed a queued writer")
		}
		cancel(errCause)
		if err := <-w; !errors.Is(err, errCause) {
			t.Fatalf("cancelled Lock = %v, want %v", err, errCause)
		}
		if err := <-r; err != nil {
			t.Fatalf("RLock behind the cancelled writer: %v", err)
		}
		if got, want := [2]int{m.Readers(), m.Waiting()}, [2]int{2, 0}; got != want {
			t.Errorf("Readers(), Waiting() = %v, want %v", got, want)
		}
		m.RUnlock(r1)
		m.RUnlock(r2)
		if err := m.Lock(context.Background()); err != nil {
			t.Fatalf("Lock after: %v", err)
		}
		m.Unlock()
	})
}

func TestRWMutexCancelledTask(t *testing.T) {
	e := newEnv(t)
	m := newRWMutex(t, e)
	ctx, tk := e.begin(t, task.Spec{Cancellable: true})
	if err := taskx.Cancel(tk, "x"); err != nil {
		t.Fatal(err)
	}
	if err := m.RLock(ctx); !errors.Is(err, task.ErrCancelled) {
		t.Errorf("RLock = %v, want an error wrapping %v", err, task.ErrCancelled)
	}
	if err := m.Lock(ctx); !errors.Is(err, task.ErrCancelled) {
		t.Errorf("Lock = %v, want an error wrapping %v", err, task.ErrCancelled)
	}
	if got := m.Readers(); got != 0 {
		t.Errorf("Readers() = %d, want 0", got)
	}
}

func TestRWMutexAccounting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		m := newRWMutex(t, e)
		id := m.Resource().ID()
		actx, a := e.begin(t, task.Spec{})
		bctx, b := e.begin(t, task.Spec{})
		wctx, w := e.begin(t, task.Spec{})

		if err := m.RLock(actx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
		e.clk.Advance()
		if err := m.RLock(bctx); err != nil {
			t.Fatal(err)
		}
		wdone := goErr(func() error { return m.Lock(wctx) })
		synctest.Wait()
		time.Sleep(3 * time.Millisecond)
		e.clk.Advance()
		m.RUnlock(actx)
		m.RUnlock(bctx)
		if err := <-wdone; err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		e.clk.Advance()

		tests := []struct {
			name string
			tk   *task.Task
			want task.Usage
		}{
			{"first reader", a, task.Usage{Resource: id, Hold: 5 * time.Millisecond}},
			{"second reader", b, task.Usage{Resource: id, Hold: 3 * time.Millisecond}},
			{"writer", w, task.Usage{Resource: id, Held: 1, Hold: time.Millisecond, Waits: 1, Wait: 3 * time.Millisecond}},
		}
		for _, tt := range tests {
			if diff := cmp.Diff(tt.want, usage(t, tt.tk, m.Resource())); diff != "" {
				t.Errorf("%s: usage (-want +got):\n%s", tt.name, diff)
			}
		}
		m.Unlock()
	})
}

func TestRWMutexConcurrent(t *testing.T) {
	e := newEnv(t)
	m := newRWMutex(t, e)
	var (
		wg              sync.WaitGroup
		readers, writer atomic.Int32
		bad             atomic.Int32
	)
	for i := range 6 {
		ctx, _ := e.begin(t, task.Spec{})
		wg.Go(func() {
			for range 150 {
				if i%3 == 0 {
					if err := m.Lock(ctx); err != nil {
						t.Error(err)
						return
					}
					if writer.Add(1) != 1 || readers.Load() != 0 {
						bad.Add(1)
					}
					writer.Add(-1)
					m.Unlock()
					continue
				}
				if err := m.RLock(ctx); err != nil {
					t.Error(err)
					return
				}
				readers.Add(1)
				if writer.Load() != 0 {
					bad.Add(1)
				}
				readers.Add(-1)
				m.RUnlock(ctx)
			}
		})
	}
	wg.Wait()
	if n := bad.Load(); n != 0 {
		t.Errorf("%d times a writer overlapped another holder", n)
	}
	if got := [2]int{m.Readers(), m.Waiting()}; got != [2]int{} {
		t.Errorf("Readers(), Waiting() after = %v, want [0 0]", got)
	}
	if n := m.Resource().Misuse(); n != 0 {
		t.Errorf("Misuse() = %d, want 0", n)
	}
}

// TestUnlockPanics checks that every primitive panics, as its sync
// counterpart does, when unlocked without being locked.
func TestUnlockPanics(t *testing.T) {
	tests := []struct {
		name string
		fn   func(e *env, t *testing.T)
		want string
	}{
		{
			name: "Mutex never locked",
			fn:   func(e *env, t *testing.T) { e.mutex(t, "m").Unlock() },
			want: "moirai: unlock of unlocked mutex",
		},
		{
			name: "Mutex unlocked twice",
			fn: func(e *env, t *testing.T) {
				m := e.mutex(t, "m")
				if err := m.Lock(context.Background()); err != nil {
					t.Fatal(err)
				}
				m.Unlock()
				m.Unlock()
			},
			want: "moirai: unlock of unlocked mutex",
		},
		{
			name: "RWMutex RUnlock without RLock",
			fn:   func(e *env, t *testing.T) { newRWMutex(t, e).RUnlock(context.Background()) },
			want: "moirai: RUnlock of unlocked RWMutex",
		},
		{
			name: "RWMutex RUnlock of a write lock",
			fn: func(e *env, t *testing.T) {
				m := newRWMutex(t, e)
				if err := m.Lock(context.Background()); err != nil {
					t.Fatal(err)
				}
				m.RUnlock(context.Background())
			},
			want: "moirai: RUnlock of unlocked RWMutex",
		},
		{
			name: "RWMutex Unlock without Lock",
			fn:   func(e *env, t *testing.T) { newRWMutex(t, e).Unlock() },
			want: "moirai: Unlock of unlocked RWMutex",
		},
		{
			name: "RWMutex Unlock of a read lock",
			fn: func(e *env, t *testing.T) {
				m := newRWMutex(t, e)
				if err := m.RLock(context.Background()); err != nil {
					t.Fatal(err)
				}
				m.Unlock()
			},
			want: "moirai: Unlock of unlocked RWMutex",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			got := mustPanic(t, func() { tt.fn(e, t) })
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("panic value (-want +got):\n%s", diff)
			}
		})
	}
}
