package moirai_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/snapshot"
)

// lockScenario runs, in a synctest bubble, a culprit that holds a table
// lock for 5 s reporting progress while requests arrive every 5 ms and
// queue for the lock; it returns how each ended.
func lockScenario(t *testing.T, ctl *moirai.Controller) (victimErrs []error, culpritErr error) {
	t.Helper()
	table := ctl.Mutex("table:orders")
	var wg sync.WaitGroup
	wg.Go(func() {
		ctx, task := ctl.Begin(context.Background(), moirai.Spec{Class: "scan", Cancellable: true})
		defer func() { task.End(culpritErr) }()
		if culpritErr = table.Lock(ctx); culpritErr != nil {
			return
		}
		defer table.Unlock()
		for i := range int64(500) {
			select {
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
				culpritErr = context.Cause(ctx)
				return
			}
			task.Progress(i+1, 500)
		}
	})
	var mu sync.Mutex
	for i := range 200 {
		time.Sleep(5 * time.Millisecond)
		wg.Go(func() {
			ctx, task := ctl.Begin(context.Background(), moirai.Spec{Class: "insert", Cancellable: true})
			err := table.Lock(ctx)
			if err == nil {
				time.Sleep(time.Millisecond)
				table.Unlock()
			}
			task.End(err)
			if err != nil {
				mu.Lock()
				victimErrs = append(victimErrs, err)
				mu.Unlock()
			}
		})
		_ = i
	}
	wg.Wait()
	return victimErrs, culpritErr
}

func TestDefaultsCancelTheCulprit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond))
		defer ctl.Close()
		victims, culprit := lockScenario(t, ctl)
		if !errors.Is(culprit, moirai.ErrCancelled) {
			t.Fatalf("culprit ended with %v; want it cancelled", culprit)
		}
		if len(victims) != 0 {
			t.Errorf("%d victims failed: %v", len(victims), victims[0])
		}
		var ds []policy.Record
		for _, d := range ctl.Decisions() {
			if d.Action == policy.Cancel {
				ds = append(ds, d)
			}
		}
		if len(ds) != 1 || ds[0].Outcome != policy.Acted || ds[0].TaskClass != "scan" || ds[0].Policy != "atropos" {
			t.Fatalf("decisions %+v; want the scan cancelled once by atropos", ds)
		}
		if !strings.Contains(ds[0].Reason, "table:orders") || len(ds[0].Details) == 0 {
			t.Errorf("decision without its explanation: %q %v", ds[0].Reason, ds[0].Details)
		}
	})
}

func TestTraceOnlyActsOnNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond), moirai.WithoutMechanisms(),
			moirai.WithPolicy(policyFunc{"never", func(*snapshot.Snapshot) []policy.Decision { panic("ran") }}))
		defer ctl.Close()
		victims, culprit := lockScenario(t, ctl)
		if culprit != nil || len(victims) != 0 || len(ctl.Decisions()) != 0 {
			t.Errorf("trace-only controller acted: culprit %v, %d victims, %d decisions", culprit, len(victims), len(ctl.Decisions()))
		}
	})
}

func TestRegularOverload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls []bool
		var mu sync.Mutex
		fire := atomic.Bool{}
		ctl := moirai.New(
			moirai.WithDetector(detectorFunc{"d", func(*snapshot.Snapshot) (bool, string) { return fire.Load(), "test" }}),
			moirai.WithPolicy(confirmer{}),
			moirai.WithRegularOverload(func(on bool) { mu.Lock(); calls = append(calls, on); mu.Unlock() }),
			moirai.WithTick(10*time.Millisecond, 10*time.Millisecond))
		defer ctl.Close()
		time.Sleep(50 * time.Millisecond)
		fire.Store(true)
		time.Sleep(50 * time.Millisecond)
		fire.Store(false)
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		if len(calls) != 2 || !calls[0] || calls[1] {
			t.Errorf("regular-overload calls %v; want [true false]", calls)
		}
	})
}

// confirmer is a policy that never finds a contended resource.
type confirmer struct{}

func (confirmer) Name() string                                { return "confirmer" }
func (confirmer) Decide(*snapshot.Snapshot) []policy.Decision { return nil }
func (confirmer) Confirm(*snapshot.Snapshot) bool             { return false }

// A background task whose resources never leave a window is not re-run
// anyway after the maximum wait (that re-creates the overload): it fails
// with an error saying so.
func TestRetryBackgroundNoWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := busyController()
		defer ctl.Close()
		var runs atomic.Int32
		start := time.Now()
		err := moirai.Retry(context.Background(), ctl, moirai.Spec{Class: "purge", Kind: moirai.Background, Cancellable: true},
			func(ctx context.Context) error {
				runs.Add(1)
				<-ctx.Done()
				return context.Cause(ctx)
			}, moirai.RetryMaxWait(2*time.Second))
		if !errors.Is(err, moirai.ErrNoWindow) || !errors.Is(err, moirai.ErrDropped) || runs.Load() != 1 {
			t.Fatalf("err %v after %d runs; want no window after one run", err, runs.Load())
		}
		if !strings.Contains(err.Error(), "no window within 2s") || !strings.Contains(err.Error(), "a detector fires") {
			t.Errorf("error %q does not say why", err)
		}
		if waited := time.Since(start); waited < 2*time.Second {
			t.Errorf("gave up after %v, before the maximum wait", waited)
		}
		if st := ctl.RetryStats(); st.Reexecuted != 0 || st.Cancelled != 1 || st.Dropped != 1 || st.Waiting != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

func TestRetryRequestDroppedAfterMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := busyController()
		defer ctl.Close()
		runs := 0
		err := moirai.Retry(context.Background(), ctl, moirai.Spec{Class: "q", Cancellable: true},
			func(ctx context.Context) error { runs++; <-ctx.Done(); return context.Cause(ctx) },
			moirai.RetryMaxWait(time.Second))
		if !errors.Is(err, moirai.ErrCancelled) || !errors.Is(err, moirai.ErrDropped) || runs != 1 {
			t.Errorf("err %v after %d runs; want dropped after one", err, runs)
		}
	})
}

func TestRetryLeavesOtherFailuresAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithoutMechanisms())
		defer ctl.Close()
		boom := errors.New("boom")
		runs := 0
		err := moirai.Retry(context.Background(), ctl, moirai.Spec{Cancellable: true},
			func(context.Context) error { runs++; return boom })
		if !errors.Is(err, boom) || runs != 1 {
			t.Errorf("err %v after %d runs", err, runs)
		}
		err = moirai.Retry(context.Background(), ctl, moirai.Spec{Cancellable: true},
			func(context.Context) error { panic("handler bug") })
		if err == nil || !strings.Contains(err.Error(), "panicked") || ctl.Stats().Live != 0 {
			t.Errorf("a panicking function: err %v, %d live tasks", err, ctl.Stats().Live)
		}
	})
}

// busyController returns a controller whose detector always fires (so a
// re-execution never finds the resources free) and whose policy cancels
// the first cancellable task it sees, once.
func busyController() *moirai.Controller {
	var once atomic.Bool
	return moirai.New(
		moirai.WithDetector(detectorFunc{"always", func(*snapshot.Snapshot) (bool, string) { return true, "busy" }}),
		moirai.WithPolicy(policyFunc{"once", func(s *snapshot.Snapshot) []policy.Decision {
			for _, t := range s.Tasks {
				if t.Cancellable && once.CompareAndSwap(false, true) {
					return []policy.Decision{{Action: policy.Cancel, Task: t.ID, Reason: "test"}}
				}
			}
			return nil
		}}),
		moirai.WithTick(10*time.Millisecond, 10*time.Millisecond))
}

// TestKnownHeavyWaiterWakesTheLoop: once a class is known to hold a lock
// for long (a report that held it 300 ms), the next task of it holding
// the lock is the culprit as soon as a request waits behind it, and the
// wait itself steps the loop (policy.Waker): the report is cancelled at
// the instant the request starts waiting, not at the loop's next tick
// (here 17 ms later).
func TestKnownHeavyWaiterWakesTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond))
		defer ctl.Close()
		table := ctl.Mutex("table:orders")
		report := func(hold time.Duration) (cancelledAt time.Time, err error) {
			ctx, task := ctl.Begin(context.Background(), moirai.Spec{Class: "report", Cancellable: true})
			defer func() { task.End(err) }()
			if err = table.Lock(ctx); err != nil {
				return time.Time{}, err
			}
			defer table.Unlock()
			select {
			case <-time.After(hold):
				return time.Time{}, nil
			case <-ctx.Done():
				return time.Now(), context.Cause(ctx)
			}
		}
		if _, err := report(300 * time.Millisecond); err != nil {
			t.Fatalf("the first report, alone: %v", err)
		}
		// Seen to end, then the second report at 3 ms past a tick of the
		// loop (20 ms apart from the start), and a request 2 ms later.
		time.Sleep(100*time.Millisecond - time.Duration(time.Now().UnixNano())%(20*time.Millisecond) + 3*time.Millisecond)
		var wg sync.WaitGroup
		var at time.Time
		var rerr error
		wg.Go(func() { at, rerr = report(time.Second) })
		time.Sleep(2 * time.Millisecond)
		waited := time.Now()
		ctx, task := ctl.Begin(context.Background(), moirai.Spec{Class: "insert", Cancellable: true})
		err := table.Lock(ctx)
		if err == nil {
			table.Unlock()
		}
		task.End(err)
		wg.Wait()
		if err != nil {
			t.Fatalf("the request: %v; want it served", err)
		}
		if !errors.Is(rerr, moirai.ErrCancelled) {
			t.Fatalf("the second report ended with %v; want it cancelled", rerr)
		}
		if d := at.Sub(waited); d > time.Millisecond {
			t.Errorf("the report was cancelled %v after the request began to wait; want at once (the wait steps the loop)", d)
		}
	})
}

// TestKnownHeavyHandoffWakesTheLoop: a task of a class known to be heavy
// on a lock waits behind a light holder, and a request queues behind both;
// when the light holder lets go, the heavy task takes the lock with the
// request already waiting, so no wait begins then. The handoff itself
// steps the loop (the request's own wait found a light holder), and a
// handoff within pokeGap of the last step gets a step pokeGap after it,
// not the next tick: the heavy task is cancelled within a millisecond of
// taking the lock, on every primitive a lock is made of. Before, it was
// cancelled at the loop's next tick, 8–10 ms later.
func TestKnownHeavyHandoffWakesTheLoop(t *testing.T) {
	type lock struct {
		lock   func(ctx context.Context) error
		unlock func()
	}
	prims := map[string]func(ctl *moirai.Controller) lock{
		"Mutex": func(ctl *moirai.Controller) lock {
			m := ctl.Mutex("table:orders")
			return lock{m.Lock, m.Unlock}
		},
		"RWMutex": func(ctl *moirai.Controller) lock {
			m := ctl.RWMutex("table:orders")
			return lock{m.Lock, m.Unlock}
		},
		"Semaphore": func(ctl *moirai.Controller) lock {
			s := ctl.Semaphore("table:orders", 1)
			var p moirai.Permit
			return lock{func(ctx context.Context) (err error) { p, err = s.Acquire(ctx, 1); return err }, func() { _ = p.Release() }}
		},
	}
	for name, mk := range prims {
		for _, lightHold := range []time.Duration{300 * time.Microsecond, 1800 * time.Microsecond} {
			t.Run(fmt.Sprintf("%s/%v", name, lightHold), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond), moirai.WithTick(10*time.Millisecond, 5*time.Millisecond))
					defer ctl.Close()
					table := mk(ctl)
					report := func(hold time.Duration) (took, cancelled time.Time, err error) {
						ctx, task := ctl.Begin(context.Background(), moirai.Spec{Class: "report", Cancellable: true})
						defer func() { task.End(err) }()
						if err = table.lock(ctx); err != nil {
							return time.Time{}, time.Time{}, err
						}
						defer table.unlock()
						took = time.Now()
						select {
						case <-time.After(hold):
							return took, time.Time{}, nil
						case <-ctx.Done():
							return took, time.Now(), context.Cause(ctx)
						}
					}
					light := func(hold time.Duration) error {
						ctx, task := ctl.Begin(context.Background(), moirai.Spec{Class: "insert", Cancellable: true})
						err := table.lock(ctx)
						if err == nil {
							time.Sleep(hold)
							table.unlock()
						}
						task.End(err)
						return err
					}
					if _, _, err := report(300 * time.Millisecond); err != nil {
						t.Fatalf("the first report, alone: %v", err)
					}
					// 3 ms past a tick of the loop: a light request holds the
					// lock, the report waits behind it, a second request
					// behind both.
					time.Sleep(100*time.Millisecond - time.Duration(time.Now().UnixNano())%(10*time.Millisecond) + 3*time.Millisecond)
					var wg sync.WaitGroup
					errs := make([]error, 2)
					wg.Go(func() { errs[0] = light(lightHold) })
					time.Sleep(50 * time.Microsecond)
					var took, cancelled time.Time
					var rerr error
					wg.Go(func() { took, cancelled, rerr = report(time.Second) })
					time.Sleep(50 * time.Microsecond)
					wg.Go(func() { errs[1] = light(lightHold) })
					wg.Wait()
					for i, err := range errs {
						if err != nil {
							t.Fatalf("request %d: %v; want it served", i, err)
						}
					}
					if !errors.Is(rerr, moirai.ErrCancelled) {
						t.Fatalf("the second report ended with %v; want it cancelled", rerr)
					}
					if d := cancelled.Sub(took); d > time.Millisecond {
						t.Errorf("the report was cancelled %v after it took the lock with a request waiting; want within 1ms", d)
					}
				})
			})
		}
	}
}
