package cpu

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const tick = 10 * time.Millisecond

// gauge counts the work running and the most ever seen at once.
type gauge struct {
	now, peak atomic.Int64
}

func (g *gauge) enter() {
	n := g.now.Add(1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (g *gauge) leave() { g.now.Add(-1) }

// blocker is work that runs until released, one piece at a time.
type blocker struct {
	g       gauge
	release chan struct{}
	done    atomic.Int64
}

func newBlocker() *blocker { return &blocker{release: make(chan struct{})} }

func (b *blocker) work(ctx context.Context) {
	b.g.enter()
	defer b.g.leave()
	<-b.release
	b.done.Add(1)
}

// settle lets the loop run n ticks and everything that can run, run.
func settle(n int) {
	time.Sleep(time.Duration(n) * tick)
	synctest.Wait()
}

// TestPoolExactlyActive: with work queued, exactly the active count runs,
// never one more, as the count goes up and down.
func TestPoolExactlyActive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &scriptReader{}
		r.setRate(1, 3) // neighbours use 2 of 4 CPUs: 2 free
		p, err := NewPool(WithBudget(4), withHost(4), WithReader(r), WithTick(tick), WithWindow(1), noPark)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		settle(3)
		if p.Active() != 2 {
			t.Fatalf("active %d, want 2", p.Active())
		}
		b := newBlocker()
		defer close(b.release) // on failure, lets the work end before Close
		for range 10 {
			if err := p.Go(context.Background(), b.work); err != nil {
				t.Fatal(err)
			}
		}
		settle(1)
		check := func(running, waiting int64) {
			t.Helper()
			st := p.Stats()
			if b.g.now.Load() != running || st.Running != running || st.Waiting != waiting {
				t.Fatalf("running %d (stats %d), waiting %d; want %d and %d", b.g.now.Load(), st.Running, st.Waiting, running, waiting)
			}
		}
		check(2, 8)
		if b.g.peak.Load() != 2 {
			t.Fatalf("peak %d, want 2", b.g.peak.Load())
		}

		// The neighbours use 1: 3 free. A grow also looks back four
		// windows (4 ticks), where they used 2 − j/4 after j ticks:
		// room for 3 from the second tick on, and one more starts.
		r.setRate(3, 4)
		settle(1)
		check(2, 8)
		settle(1)
		check(3, 7)

		// They use 3: the three running finish, then only one runs.
		r.setRate(1, 4)
		settle(2)
		if p.Active() != 1 {
			t.Fatalf("active %d, want 1", p.Active())
		}
		b.g.peak.Store(0)
		for range 3 {
			b.release <- struct{}{}
		}
		synctest.Wait()
		check(1, 6)
		for range 6 {
			b.release <- struct{}{}
			synctest.Wait()
			if b.g.peak.Load() != 1 {
				t.Fatalf("peak %d at an active count of 1", b.g.peak.Load())
			}
		}
		check(1, 0)
		b.release <- struct{}{}
		synctest.Wait()
		check(0, 0)
		if b.done.Load() != 10 {
			t.Errorf("%d done, want 10", b.done.Load())
		}
	})
}

// TestPoolDrainsAtOne: the active count drops to 1 with work queued; all
// of it still runs, and Close returns.
func TestPoolDrainsAtOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &scriptReader{}
		r.setRate(4, 4)
		p, err := NewPool(WithBudget(4), withHost(4), WithOvercommit(2), WithReader(r), WithTick(tick), WithWindow(1))
		if err != nil {
			t.Fatal(err)
		}
		var g gauge
		var done atomic.Int64
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				err := p.Submit(context.Background(), func(ctx context.Context) error {
					g.enter()
					defer g.leave()
					time.Sleep(3 * time.Millisecond)
					done.Add(1)
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			})
		}
		r.setRate(0, 4) // idle here, busy elsewhere: 1
		wg.Wait()
		if done.Load() != 50 {
			t.Errorf("%d done, want 50", done.Load())
		}
		if p.Active() != 1 {
			t.Errorf("active %d, want 1", p.Active())
		}
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
}

func TestPoolClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := NewPool(WithFixed(1))
		if err != nil {
			t.Fatal(err)
		}
		b := newBlocker()
		for range 3 {
			if err := p.Go(context.Background(), b.work); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		closed := make(chan struct{})
		go func() {
			p.Close()
			close(closed)
		}()
		synctest.Wait()
		if err := p.Go(context.Background(), b.work); !errors.Is(err, ErrClosed) {
			t.Errorf("Go after Close = %v, want ErrClosed", err)
		}
		if err := p.Submit(context.Background(), func(context.Context) error { return nil }); !errors.Is(err, ErrClosed) {
			t.Errorf("Submit after Close = %v, want ErrClosed", err)
		}
		// Close waits for the queued work, which still runs.
		for range 3 {
			select {
			case <-closed:
				t.Fatal("Close returned with work queued")
			default:
			}
			b.release <- struct{}{}
			synctest.Wait()
		}
		<-closed
		if b.done.Load() != 3 {
			t.Errorf("%d done, want 3", b.done.Load())
		}
		if err := p.Close(); err != nil {
			t.Errorf("second Close = %v", err)
		}
	})
}

func TestPoolContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := NewPool(WithFixed(1))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		b := newBlocker()
		defer close(b.release)
		p.Go(context.Background(), b.work)
		synctest.Wait()

		cause := errors.New("caller gave up")
		ctx, cancel := context.WithCancelCause(context.Background())
		ran := false
		errc := make(chan error, 1)
		go func() {
			errc <- p.Submit(ctx, func(context.Context) error { ran = true; return nil })
		}()
		p.Go(ctx, func(context.Context) { ran = true })
		synctest.Wait()
		cancel(cause)
		if err := <-errc; !errors.Is(err, cause) {
			t.Errorf("Submit = %v, want the cause", err)
		}
		synctest.Wait()
		b.release <- struct{}{}
		synctest.Wait()
		if ran {
			t.Error("work ran after its context was done")
		}
		if st := p.Stats(); st.Dropped != 2 || st.Running != 0 || st.Waiting != 0 {
			t.Errorf("stats %+v, want 2 dropped and nothing left", st)
		}
	})
}

func TestPoolSubmitError(t *testing.T) {
	p, err := NewPool(WithFixed(2))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want := errors.New("work failed")
	if err := p.Submit(context.Background(), func(context.Context) error { return want }); err != want {
		t.Errorf("Submit = %v, want %v", err, want)
	}
	// A panic frees the worker.
	func() {
		defer func() { recover() }()
		p.Submit(context.Background(), func(context.Context) error { panic("boom") })
	}()
	if st := p.Stats(); st.Running != 0 {
		t.Errorf("running %d after a panic", st.Running)
	}
}

func TestPoolBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := NewPool(WithFixed(1), WithBacklog(2))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		b := newBlocker()
		defer close(b.release)
		for i := range 3 { // one runs, two wait
			if err := p.Go(context.Background(), b.work); err != nil {
				t.Fatalf("Go %d: %v", i, err)
			}
		}
		synctest.Wait()
		if err := p.Go(context.Background(), b.work); !errors.Is(err, ErrRejected) {
			t.Errorf("Go over the backlog = %v, want ErrRejected", err)
		}
		if err := p.Submit(context.Background(), func(context.Context) error { return nil }); !errors.Is(err, ErrRejected) {
			t.Errorf("Submit over the backlog = %v, want ErrRejected", err)
		}
	})
}

// TestPoolReadErrors: a reader that fails keeps the active count.
func TestPoolReadErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &scriptReader{steps: []scriptStep{{d: ticks(1, 4)}, {d: ticks(1, 4)}, {err: true}, {err: true}, {err: true}}}
		p, err := NewPool(WithBudget(4), withHost(4), WithReader(r), WithTick(tick), WithWindow(1), noPark)
		if err != nil {
			t.Fatal(err)
		}
		settle(5)
		st := p.Stats()
		p.Close()
		if st.Active != 1 || st.ReadErrors != 3 || st.Ticks != 5 || st.Share != 0.25 {
			t.Errorf("stats %+v, want active 1, 3 read errors in 5 ticks, share 0.25", st)
		}
	})
}

// TestPoolGOMAXPROCS: in GOMAXPROCS mode the loop moves GOMAXPROCS, the
// queue admits up to the limit, and Close restores the value it found.
func TestPoolGOMAXPROCS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		procs := 8
		var calls []int
		set := func(n int) int {
			old := procs
			procs = n
			calls = append(calls, n)
			return old
		}
		r := &scriptReader{}
		r.setRate(1, 4)
		p, err := NewPool(WithBudget(4), withHost(4), WithReader(r), WithTick(tick), WithWindow(1), WithGOMAXPROCS(), noPark,
			func(c *config) { c.setProcs = set })
		if err != nil {
			t.Fatal(err)
		}
		settle(3)
		if procs != 1 || p.Queue().Slots() != 4 {
			t.Errorf("GOMAXPROCS %d, slots %d; want 1 and 4", procs, p.Queue().Slots())
		}
		p.Close()
		if procs != 8 {
			t.Errorf("GOMAXPROCS %d after Close, want 8 restored (calls %v)", procs, calls)
		}
	})
}

func TestNewPoolOptions(t *testing.T) {
	for _, c := range []struct {
		name string
		o    Option
	}{
		{"WithBudget", WithBudget(0)}, {"WithBudget", WithBudget(-1)}, {"WithBudget", WithBudget(math.NaN())},
		{"WithOvercommit", WithOvercommit(0)}, {"WithOvercommit", WithOvercommit(17)},
		{"WithFixed", WithFixed(0)}, {"WithTolerance", WithTolerance(1)}, {"WithTolerance", WithTolerance(-0.1)},
		{"WithReader", WithReader(nil)}, {"WithTick", WithTick(time.Microsecond)}, {"WithWindow", WithWindow(0)},
		{"WithQueue", WithQueue(nil)}, {"WithBacklog", WithBacklog(-1)},
	} {
		p, err := NewPool(c.o)
		if err == nil {
			p.Close()
			t.Errorf("NewPool accepted an invalid %s", c.name)
		} else if !strings.Contains(err.Error(), c.name) {
			t.Errorf("NewPool's error %q does not name %s", err, c.name)
		}
	}
	// The configuration is validated once, after every option ran: a
	// later option replaces an invalid value.
	p, err := NewPool(WithFixed(0), WithFixed(1), WithBudget(-1), WithBudget(1))
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	p.Close()
}

// TestPoolDefault starts a pool on the real /proc and budget.
func TestPoolDefault(t *testing.T) {
	p, err := NewPool()
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	defer p.Close()
	if err := p.Submit(context.Background(), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Limit < 1 || st.CPUs <= 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestPoolParksWhenIdle: after a window without work the loop stops
// ticking; new work wakes it, and the window starts afresh.
func TestPoolParksWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &scriptReader{}
		r.setRate(1, 4)
		p, err := NewPool(WithBudget(4), withHost(4), WithReader(r), WithTick(tick), WithWindow(3))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		settle(10)
		parked := p.Stats().Ticks
		if parked != 3 || p.Active() != 1 {
			t.Fatalf("%d ticks, active %d; want the loop parked after 3 ticks at 1", parked, p.Active())
		}
		settle(100)
		if n := p.Stats().Ticks; n != parked {
			t.Fatalf("%d ticks while parked, want %d", n, parked)
		}
		b := newBlocker()
		defer close(b.release)
		if err := p.Go(context.Background(), b.work); err != nil {
			t.Fatal(err)
		}
		r.setRate(4, 4)
		settle(5)
		if n := p.Stats().Ticks; n != parked+5 || p.Active() != 4 {
			t.Errorf("%d ticks, active %d after new work; want %d and 4", n, p.Active(), parked+5)
		}
	})
}
