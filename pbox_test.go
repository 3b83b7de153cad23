package moirai_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/penalty"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/snapshot"
)

// noisyScenario runs, in a synctest bubble, a noisy task that takes a lock
// for 8 ms at a time, again and again for 2 s, while light requests arrive
// every 5 ms on average and hold it for 1 ms. It returns the light requests' mean
// latency and the noisy task's penalties served.
func noisyScenario(t *testing.T, ctl *moirai.Controller) (lightMean time.Duration, noisyPenalties int64) {
	t.Helper()
	table := ctl.Mutex("table")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		ctx, tk := ctl.Begin(context.Background(), moirai.Spec{Class: "noisy"})
		defer func() {
			noisyPenalties = taskx.Penalties(tk)
			tk.End(nil)
		}()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := table.Lock(ctx); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(8 * time.Millisecond)
			table.Unlock()
		}
	})
	lightMean = lightLoad(ctl, table, false)
	close(stop)
	wg.Wait()
	return lightMean, noisyPenalties
}

// lightLoad sends 400 light requests that take the lock for 1 ms each,
// arriving irregularly 5 ms apart on average (so that the loop's ticks do
// not fall in phase with them), and returns their mean latency.
func lightLoad(ctl *moirai.Controller, table *moirai.Mutex, cancellable bool) time.Duration {
	var total atomic.Int64
	const n = 400
	var lw sync.WaitGroup
	for i := range n {
		time.Sleep(time.Duration(2000+(i*1237)%6000) * time.Microsecond)
		lw.Go(func() {
			start := time.Now()
			ctx, tk := ctl.Begin(context.Background(), moirai.Spec{Class: "light", Cancellable: cancellable})
			err := table.Lock(ctx)
			if err == nil {
				time.Sleep(time.Millisecond)
				table.Unlock()
			}
			tk.End(err)
			total.Add(int64(time.Since(start)))
		})
	}
	lw.Wait()
	return time.Duration(total.Load() / n)
}

func TestPenaltiesReduceInterference(t *testing.T) {
	var without, with time.Duration
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithoutMechanisms())
		defer ctl.Close()
		without, _ = noisyScenario(t, ctl)
	})
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithPolicy(penalty.New()), moirai.WithTick(20*time.Millisecond, 5*time.Millisecond))
		defer ctl.Close()
		var served int64
		with, served = noisyScenario(t, ctl)
		if served == 0 {
			t.Errorf("the noisy task served no penalty; %d decisions", len(ctl.Decisions()))
		}
		for _, d := range ctl.Decisions() {
			if d.Action != policy.Penalize || d.TaskClass != "noisy" {
				t.Errorf("decision %+v; want penalties of the noisy task only", d)
			}
		}
	})
	if with >= without*3/4 {
		t.Errorf("light mean latency %v with penalties, %v without; want at least a quarter less", with, without)
	}
	t.Logf("light mean latency: %v without control, %v with penalties", without, with)
}

// script is a policy that returns the decisions a test gives it, once.
type script struct {
	mu   sync.Mutex
	next func(s *snapshot.Snapshot) []policy.Decision
}

func (p *script) set(next func(s *snapshot.Snapshot) []policy.Decision) {
	p.mu.Lock()
	p.next = next
	p.mu.Unlock()
}

func (p *script) Name() string   { return "script" }
func (p *script) Watching() bool { return true }
func (p *script) Decide(s *snapshot.Snapshot) []policy.Decision {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next == nil {
		return nil
	}
	return p.next(s)
}

func TestPenaltyPrecedence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := &script{}
		ctl := moirai.New(moirai.WithPolicy(sc))
		defer ctl.Close()
		ctx, tk := ctl.Begin(context.Background(), moirai.Spec{Cancellable: true})
		defer tk.End(nil)

		// A penalized task stays a candidate for cancellation, and the
		// cancellation drops its penalty.
		sc.mu.Lock()
		sc.next = func(*snapshot.Snapshot) []policy.Decision {
			return []policy.Decision{{Action: policy.Penalize, Task: tk.ID(), Delay: 50 * time.Millisecond, Reason: "test"}}
		}
		sc.mu.Unlock()
		time.Sleep(150 * time.Millisecond)
		sc.mu.Lock()
		sc.next = nil
		sc.mu.Unlock()
		if taskx.Penalty(tk) != 50*time.Millisecond {
			t.Fatalf("pending penalty %v, want 50ms", taskx.Penalty(tk))
		}
		if err := ctl.Cancel(tk.ID(), "test"); err != nil {
			t.Fatalf("cancel of a penalized task: %v", err)
		}
		if taskx.Penalty(tk) != 0 {
			t.Errorf("cancelled task keeps its penalty %v", taskx.Penalty(tk))
		}
		if !errors.Is(context.Cause(ctx), moirai.ErrCancelled) {
			t.Errorf("cause %v", context.Cause(ctx))
		}

		// A cancelled task is never penalized.
		sc.mu.Lock()
		sc.next = func(*snapshot.Snapshot) []policy.Decision {
			return []policy.Decision{{Action: policy.Penalize, Task: tk.ID(), Delay: time.Millisecond, Reason: "test"}}
		}
		sc.mu.Unlock()
		time.Sleep(150 * time.Millisecond)
		sc.mu.Lock()
		sc.next = nil
		sc.mu.Unlock()
		ds := ctl.Decisions()
		last := ds[len(ds)-1]
		if last.Action != policy.Penalize || last.Outcome != policy.Skipped || taskx.Penalty(tk) != 0 {
			t.Errorf("penalty of a cancelled task: %+v, pending %v", last, taskx.Penalty(tk))
		}
	})
}

// TestCancelSeenBySamePass: a policy that runs after the one that cancels
// a task, in the same step, sees the task cancelled, and so does not
// penalize it (the decision would only be skipped).
func TestCancelSeenBySamePass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cancels, penalties := &script{}, &script{}
		ctl := moirai.New(moirai.WithPolicy(cancels, penalties))
		defer ctl.Close()
		_, tk := ctl.Begin(context.Background(), moirai.Spec{Cancellable: true})
		defer tk.End(nil)

		var once atomic.Bool
		cancels.set(func(*snapshot.Snapshot) []policy.Decision {
			if once.Swap(true) {
				return nil
			}
			return []policy.Decision{{Action: policy.Cancel, Task: tk.ID(), Reason: "test"}}
		})
		penalties.set(func(s *snapshot.Snapshot) []policy.Decision {
			var ds []policy.Decision
			for _, st := range s.Tasks {
				if !st.Cancelled {
					ds = append(ds, policy.Decision{Action: policy.Penalize, Task: st.ID, Delay: time.Millisecond, Reason: "test"})
				}
			}
			return ds
		})
		time.Sleep(300 * time.Millisecond)
		ds := ctl.Decisions()
		if len(ds) == 0 {
			t.Fatal("no decision")
		}
		for _, d := range ds {
			if d.Action != policy.Cancel || d.Outcome != policy.Acted {
				t.Errorf("decision %+v; want the one cancellation only", d)
			}
		}
		if !tk.Cancelled() {
			t.Error("task not cancelled")
		}
	})
}

// TestPenaltiesLockOrdering penalizes every task on every step while tasks
// take two locks in order: no deadlock, and no penalty is served while a
// task holds a lock (the holds last exactly their critical sections).
func TestPenaltiesLockOrdering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := &script{next: func(s *snapshot.Snapshot) []policy.Decision {
			var ds []policy.Decision
			for _, x := range s.Tasks {
				ds = append(ds, policy.Decision{Action: policy.Penalize, Task: x.ID, Delay: 3 * time.Millisecond, Reason: "test"})
			}
			return ds
		}}
		ctl := moirai.New(moirai.WithPolicy(sc), moirai.WithTick(5*time.Millisecond, time.Millisecond))
		defer ctl.Close()
		a, b := ctl.Mutex("a"), ctl.Mutex("b")
		sem := ctl.Semaphore("slots", 2)
		var wg sync.WaitGroup
		var served atomic.Int64
		for i := range 16 {
			wg.Go(func() {
				ctx, tk := ctl.Begin(context.Background(), moirai.Spec{Cancellable: i%2 == 0})
				defer func() {
					served.Add(taskx.Penalties(tk))
					tk.End(nil)
				}()
				for range 20 {
					p, err := sem.Acquire(ctx, 1)
					if err != nil {
						t.Error(err)
						return
					}
					if err := a.Lock(ctx); err != nil {
						t.Error(err)
						return
					}
					start := time.Now()
					if err := b.Lock(ctx); err != nil {
						t.Error(err)
						return
					}
					time.Sleep(time.Millisecond)
					b.Unlock()
					a.Unlock()
					p.Release()
					if d := time.Since(start); d != time.Millisecond {
						t.Errorf("a held for %v: a penalty was served while holding", d)
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
		wg.Wait()
		if served.Load() == 0 {
			t.Error("no penalty served")
		}
	})
}

// noisyStreamScenario is noisyScenario with the noisy work as a stream of
// requests: two clients send, back to back, requests that each take the
// lock once for 8 ms. It returns the light requests' mean latency, the
// noisy requests' mean latency, and how many noisy requests served a
// penalty.
func noisyStreamScenario(t *testing.T, ctl *moirai.Controller) (lightMean, noisyMean time.Duration, penalized int64) {
	t.Helper()
	table := ctl.Mutex("table")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var served, noisy, noisyTotal atomic.Int64
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				ctx, tk := ctl.Begin(context.Background(), moirai.Spec{Class: "noisy", Cancellable: true})
				err := table.Lock(ctx)
				if err == nil {
					time.Sleep(8 * time.Millisecond)
					table.Unlock()
				}
				if taskx.Penalties(tk) > 0 {
					served.Add(1)
				}
				tk.End(err)
				noisy.Add(1)
				noisyTotal.Add(int64(time.Since(start)))
			}
		})
	}
	lightMean = lightLoad(ctl, table, true)
	close(stop)
	wg.Wait()
	return lightMean, time.Duration(noisyTotal.Load() / max(noisy.Load(), 1)), served.Load()
}

// TestDefaultPenalizesNoisyStream: the default controller holds back a
// noisy stream of requests, each taking the lock once, through the
// penalties its requests leave to the next, within the slowdown the
// penalty policy allows the stream; WithPenalties(false) does not.
func TestDefaultPenalizesNoisyStream(t *testing.T) {
	var without, with, noisyWithout, noisyWith time.Duration
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithPenalties(false))
		defer ctl.Close()
		var served int64
		without, noisyWithout, served = noisyStreamScenario(t, ctl)
		if served != 0 || len(ctl.Decisions()) != 0 {
			t.Errorf("without penalties: %d noisy requests penalized, %d decisions", served, len(ctl.Decisions()))
		}
	})
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New()
		defer ctl.Close()
		var served int64
		with, noisyWith, served = noisyStreamScenario(t, ctl)
		if served == 0 {
			t.Errorf("no noisy request served a penalty; %d decisions", len(ctl.Decisions()))
		}
		for _, d := range ctl.Decisions() {
			if d.Action != policy.Penalize || d.TaskClass != "noisy" {
				t.Errorf("decision %+v; want penalties of noisy requests only", d)
			}
		}
	})
	if with >= without*3/4 {
		t.Errorf("light mean latency %v with the defaults, %v without penalties; want at least a quarter less", with, without)
	}
	// The budget aims at penalty.DefaultMaxSlowdown; the limit
	// is 1.5.
	if slow := float64(noisyWith) / float64(noisyWithout); slow > 1.5 {
		t.Errorf("noisy mean latency %v with the defaults, %v without penalties: %.2f× slower, want at most 1.5×", noisyWith, noisyWithout, slow)
	}
	t.Logf("light mean latency: %v without penalties, %v with the defaults; noisy: %v and %v", without, with, noisyWithout, noisyWith)
}

// TestPenaltyOfEndedTask: a penalty decided on a task that ended before
// the controller acted on it goes to the next task of its class; without
// a class it is skipped.
func TestPenaltyOfEndedTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := &script{}
		ctl := moirai.New(moirai.WithPolicy(sc))
		defer ctl.Close()
		_, gone := ctl.Begin(context.Background(), moirai.Spec{Class: "noisy"})
		gone.End(nil)
		var once sync.Once
		sc.mu.Lock()
		sc.next = func(*snapshot.Snapshot) []policy.Decision {
			var ds []policy.Decision
			once.Do(func() {
				ds = []policy.Decision{
					{Action: policy.Penalize, Task: gone.ID(), Class: "noisy", Delay: 30 * time.Millisecond, Reason: "test"},
					{Action: policy.Penalize, Task: gone.ID(), Delay: 30 * time.Millisecond, Reason: "test, no class"},
				}
			})
			return ds
		}
		sc.mu.Unlock()
		time.Sleep(150 * time.Millisecond)
		recs := ctl.Decisions()
		if len(recs) != 2 || recs[0].Outcome != policy.Acted || recs[0].TaskClass != "noisy" || recs[1].Outcome != policy.Skipped {
			t.Fatalf("decisions %+v; want the classed one acted, the other skipped", recs)
		}
		_, next := ctl.Begin(context.Background(), moirai.Spec{Class: "noisy"})
		defer next.End(nil)
		if taskx.Penalty(next) != 30*time.Millisecond {
			t.Errorf("next task of the class: penalty %v, want 30ms", taskx.Penalty(next))
		}
	})
}
