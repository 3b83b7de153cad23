package moirai_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/snapshot"
)

// reportRun is how one report of preemptScenario ended.
type reportRun struct {
	err      error
	atLock   bool // refused at Lock: it never held the table
	heldFor  time.Duration
	finished bool
}

// preemptScenario runs, in a synctest bubble, inserts every 2 ms into a
// table (each holds its lock for 100 µs) for the length of the scenario,
// and a report every 500 ms that holds the table's lock for 2 s unless
// cancelled, n reports in all, then quiet seconds with no insert and one
// last report. It returns how the reports ended and the longest time an
// insert waited for the lock after the first reports.
func preemptScenario(t *testing.T, ctl *moirai.Controller, n int, quiet time.Duration) (runs []reportRun, last reportRun, lateWait time.Duration, insertErrs int) {
	t.Helper()
	table := ctl.Mutex("table:orders")
	report := func() (r reportRun) {
		ctx, task := ctl.Begin(context.Background(), moirai.Spec{Class: "report", Cancellable: true})
		defer func() { task.End(r.err) }()
		if r.err = table.Lock(ctx); r.err != nil {
			r.atLock = true
			return r
		}
		defer table.Unlock()
		start := time.Now()
		defer func() { r.heldFor = time.Since(start) }()
		for i := range int64(200) {
			select {
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
				r.err = context.Cause(ctx)
				return r
			}
			task.Progress(i+1, 200)
		}
		r.finished = true
		return r
	}
	stop := make(chan struct{})
	var mu sync.Mutex
	var wg sync.WaitGroup
	begun := time.Now()
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			wg.Go(func() {
				ctx, task := ctl.Begin(context.Background(), moirai.Spec{Class: "insert", Cancellable: true})
				at := time.Now()
				err := table.Lock(ctx)
				waited := time.Since(at)
				if err == nil {
					time.Sleep(100 * time.Microsecond)
					table.Unlock()
				}
				task.End(err)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					insertErrs++
				}
				if at.Sub(begun) > 2*time.Second && waited > lateWait {
					lateWait = waited
				}
			})
		}
	})
	runs = make([]reportRun, n)
	var rwg sync.WaitGroup
	for i := range n {
		time.Sleep(500 * time.Millisecond)
		rwg.Go(func() { runs[i] = report() })
	}
	rwg.Wait()
	close(stop)
	wg.Wait()
	time.Sleep(quiet)
	last = report()
	return runs, last, lateWait, insertErrs
}

func TestRecurringCulpritCancelledAsItTakesTheLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond), moirai.WithPreemption(2))
		defer ctl.Close()
		runs, last, lateWait, insertErrs := preemptScenario(t, ctl, 8, 11*time.Second)
		for i, r := range runs {
			t.Logf("report %d: %v at lock %v, held %v", i, r.err, r.atLock, r.heldFor)
			if r.finished || !errors.Is(r.err, moirai.ErrCancelled) {
				t.Errorf("report %d ended with %v (finished %v); want it cancelled", i, r.err, r.finished)
			}
		}
		for i, r := range runs[4:] {
			if !r.atLock {
				t.Errorf("report %d held the table for %v; want it cancelled as it took the lock (a recurring culprit)", i+4, r.heldFor)
			}
		}
		if lateWait >= time.Millisecond {
			t.Errorf("an insert waited %v for the table once the reports were preempted; want under 1ms", lateWait)
		}
		if insertErrs != 0 {
			t.Errorf("%d inserts failed; want none", insertErrs)
		}
		// After 11 s with nobody waiting for the table, the report runs.
		if !last.finished || last.err != nil {
			t.Errorf("the report after the quiet: %v (at lock %v, held %v); want it to run to its end", last.err, last.atLock, last.heldFor)
		}
		var preempted int
		for _, r := range ctl.Decisions() {
			if r.Action == policy.Cancel && r.Outcome == policy.Acted && strings.Contains(r.Reason, "recurring culprit") {
				preempted++
				if r.TaskClass != "report" || r.Resource != "table:orders" {
					t.Errorf("preemption of class %q on %q; want report on table:orders", r.TaskClass, r.Resource)
				}
			}
		}
		if preempted < 4 {
			t.Errorf("%d preemptions in the decision log; want at least 4", preempted)
		}
	})
}

// TestNoPreemptionByDefault: without WithPreemption every report takes the
// lock and is cancelled once inserts wait behind it.
func TestNoPreemptionByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond))
		defer ctl.Close()
		runs, _, _, _ := preemptScenario(t, ctl, 6, 0)
		for i, r := range runs {
			if r.atLock {
				t.Errorf("report %d refused at the lock; want no preemption by default", i)
			}
			if !errors.Is(r.err, moirai.ErrCancelled) {
				t.Errorf("report %d ended with %v; want it cancelled", i, r.err)
			}
		}
	})
}

// orderPolicy orders every task of class "x" cancelled as it takes
// "table", and records what the controller tells it was preempted.
type orderPolicy struct {
	mu   sync.Mutex
	told []uint64
}

func (p *orderPolicy) Name() string                                { return "order" }
func (p *orderPolicy) Decide(*snapshot.Snapshot) []policy.Decision { return nil }
func (p *orderPolicy) Preempted(ids []uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.told = append(p.told, ids...)
}
func (p *orderPolicy) Preempt(s *snapshot.Snapshot, dst []policy.Preemption) []policy.Preemption {
	for i := range s.Resources {
		if s.Resources[i].Name == "table" {
			dst = append(dst, policy.Preemption{Resource: i, Class: "x", Reason: "test order"})
		}
	}
	return dst
}

// TestStandingOrders: a policy's order cancels a task of its class as it
// takes the resource, through the decision log, leaves the other classes
// and the tasks that are not cancellable alone, and the policy is told of
// the task before the next step's Observe.
func TestStandingOrders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &orderPolicy{}
		ctl := moirai.New(moirai.WithPolicy(p))
		defer ctl.Close()
		table := ctl.Mutex("table")
		lock := func(spec moirai.Spec) (uint64, error) {
			ctx, task := ctl.Begin(context.Background(), spec)
			err := table.Lock(ctx)
			if err == nil {
				table.Unlock()
			}
			task.End(err)
			return task.ID(), err
		}
		_, _ = lock(moirai.Spec{Class: "x", Cancellable: true}) // the resource appears in a snapshot
		time.Sleep(100 * time.Millisecond)
		id, err := lock(moirai.Spec{Class: "x", Cancellable: true})
		if !errors.Is(err, moirai.ErrCancelled) {
			t.Fatalf("a task of the ordered class took the lock: %v", err)
		}
		if _, err := lock(moirai.Spec{Class: "y", Cancellable: true}); err != nil {
			t.Errorf("another class: %v", err)
		}
		if _, err := lock(moirai.Spec{Class: "x"}); err != nil {
			t.Errorf("a task of the class, not cancellable: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
		p.mu.Lock()
		told := slices.Clone(p.told)
		p.mu.Unlock()
		if len(told) != 1 || told[0] != id {
			t.Errorf("the policy was told of %v; want [%d]", told, id)
		}
		var found bool
		for _, r := range ctl.Decisions() {
			found = found || (r.Task == id && r.Policy == "order" && r.Reason == "test order" && r.Outcome == policy.Acted && r.Resource == "table")
		}
		if !found {
			t.Errorf("no acted decision of the order's in the log: %+v", ctl.Decisions())
		}
	})
}
