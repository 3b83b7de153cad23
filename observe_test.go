package moirai_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// traceKey carries a test's trace id in a context, as a tracing library's
// span would.
type traceKey struct{}

// TestDecisionsCarryTheTasksContextAndTraceID: a decision on a task
// reaches the context observer with the context the task was begun from,
// its record (log, observers, Decisions) carries the trace id WithTraceID
// reads there, an id that is not a W3C trace id is dropped, and the
// task's own goroutine finds the decision with DecisionsOn as soon as it
// sees the cancellation.
func TestDecisionsCarryTheTasksContextAndTraceID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
		var mu sync.Mutex
		var seen []string // trace ids the context observer found in the contexts
		var recs []policy.Record
		var targets []uint64
		p := policyFunc{name: "test", fn: func(s *snapshot.Snapshot) []policy.Decision {
			mu.Lock()
			defer mu.Unlock()
			var ds []policy.Decision
			for _, id := range targets {
				ds = append(ds, policy.Decision{Action: policy.Cancel, Task: id, Resource: "table:orders", Gain: 0.5, Reason: "test decided"})
			}
			targets = nil
			return ds
		}}
		ctl := moirai.New(moirai.WithPolicy(p), moirai.WithMinCancelInterval(0),
			moirai.WithTraceID(func(ctx context.Context) string { s, _ := ctx.Value(traceKey{}).(string); return s }),
			moirai.WithDecisionObserverContext(func(ctx context.Context, r policy.Record) {
				mu.Lock()
				defer mu.Unlock()
				s, _ := ctx.Value(traceKey{}).(string)
				seen = append(seen, s)
				recs = append(recs, r)
			}))
		defer ctl.Close()

		traced, a := ctl.Begin(context.WithValue(context.Background(), traceKey{}, tid), moirai.Spec{Class: "dump", Cancellable: true})
		_, b := ctl.Begin(context.WithValue(context.Background(), traceKey{}, "not-a-trace-id"), moirai.Spec{Class: "dump", Cancellable: true})
		_, c := ctl.Begin(context.Background(), moirai.Spec{Class: "dump", Cancellable: true})
		defer a.End(nil)
		defer b.End(nil)
		defer c.End(nil)
		mu.Lock()
		targets = []uint64{a.ID(), b.ID(), c.ID()}
		mu.Unlock()

		<-traced.Done()
		on := ctl.DecisionsOn(a.ID())
		if len(on) != 1 || on[0].Task != a.ID() || on[0].Outcome != policy.Acted || on[0].Resource != "table:orders" {
			t.Fatalf("DecisionsOn(%d) right after the cancellation = %+v, want its acted cancellation", a.ID(), on)
		}
		time.Sleep(time.Second)
		synctest.Wait()

		mu.Lock()
		defer mu.Unlock()
		if diff := cmp.Diff([]string{tid, "not-a-trace-id", ""}, seen); diff != "" {
			t.Errorf("contexts the observer saw (-want +got):\n%s", diff)
		}
		var got []string
		for _, r := range recs {
			got = append(got, r.TraceID)
		}
		want := []string{tid, "", ""}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("observed records' trace ids (-want +got):\n%s", diff)
		}
		got = got[:0]
		for _, r := range ctl.Decisions() {
			got = append(got, r.TraceID)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("decision log's trace ids (-want +got):\n%s", diff)
		}
		if on := ctl.DecisionsOn(a.ID()); len(on) != 1 || on[0].TraceID != tid {
			t.Errorf("DecisionsOn(%d) = %+v, want its record with trace id %s", a.ID(), on, tid)
		}
		if on := ctl.DecisionsOn(12345); on != nil {
			t.Errorf("DecisionsOn(unknown) = %+v, want nil", on)
		}
		found := false
		for _, at := range recs[0].Attrs() {
			found = found || at.Key == "trace_id" && at.Value.String() == tid
		}
		if !found {
			t.Errorf("record attrs %v lack trace_id", recs[0].Attrs())
		}
	})
}

// TestTraceIDFunctionPanicIsReported: a panicking trace-id function
// leaves the record without a trace id and the loop running.
func TestTraceIDFunctionPanicIsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var errs []error
		ctl := moirai.New(moirai.WithoutMechanisms(),
			moirai.WithTraceID(func(context.Context) string { panic("boom") }),
			moirai.WithErrorHandler(func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }))
		defer ctl.Close()
		_, tk := ctl.Begin(context.Background(), moirai.Spec{Cancellable: true})
		defer tk.End(nil)
		if err := ctl.Cancel(tk.ID(), "operator"); err != nil {
			t.Fatal(err)
		}
		if d := ctl.Decisions(); len(d) != 1 || d[0].TraceID != "" {
			t.Errorf("decisions = %+v, want one without trace id", d)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "trace-id function panicked") {
			t.Errorf("reported %v, want the trace-id function's panic", errs)
		}
	})
}

// TestPenaltyServedIsReadable: a task's own goroutine reads the penalty
// it served, and the penalty decision on it.
func TestPenaltyServedIsReadable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var target uint64
		p := policyFunc{name: "test", fn: func(s *snapshot.Snapshot) []policy.Decision {
			mu.Lock()
			defer mu.Unlock()
			if target == 0 {
				return nil
			}
			d := []policy.Decision{{Action: policy.Penalize, Task: target, Delay: 30 * time.Millisecond, Resource: "table:orders", Reason: "noisy"}}
			target = 0
			return d
		}}
		ctl := moirai.New(moirai.WithPolicy(p))
		defer ctl.Close()
		ctx, tk := ctl.Begin(context.Background(), moirai.Spec{Class: "report"})
		defer tk.End(nil)
		if got := moirai.PenaltyServed(tk); got != 0 {
			t.Fatalf("PenaltyServed before any penalty = %v", got)
		}
		mu.Lock()
		target = tk.ID()
		mu.Unlock()
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if err := tk.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		if got := moirai.PenaltyServed(tk); got != 30*time.Millisecond {
			t.Errorf("PenaltyServed = %v, want 30ms", got)
		}
		on := ctl.DecisionsOn(tk.ID())
		if len(on) != 1 || on[0].Action != policy.Penalize || on[0].Outcome != policy.Acted {
			t.Errorf("DecisionsOn = %+v, want the acted penalty", on)
		}
		if moirai.PenaltyServed(nil) != 0 {
			t.Error("PenaltyServed(nil) != 0")
		}
	})
}

// TestReexecutionOfNamesTheRunReplaced: the re-execution's context names
// the cancelled task it replaces and the context that task began from;
// the first run's names nothing.
func TestReexecutionOfNamesTheRunReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithoutMechanisms())
		defer ctl.Close()
		parent := context.WithValue(context.Background(), traceKey{}, "request")
		type run struct {
			id   uint64
			re   moirai.Reexecution
			isRe bool
		}
		var runs []run
		err := moirai.Retry(parent, ctl, moirai.Spec{Class: "job", Cancellable: true}, func(ctx context.Context) error {
			tk := moirai.From(ctx)
			re, ok := moirai.ReexecutionOf(ctx)
			runs = append(runs, run{tk.ID(), re, ok})
			if len(runs) == 1 {
				if err := ctl.Cancel(tk.ID(), "operator"); err != nil {
					t.Error(err)
				}
				<-ctx.Done()
				return context.Cause(ctx)
			}
			return nil
		}, moirai.RetryQuiet(0))
		if err != nil {
			t.Fatalf("Retry = %v", err)
		}
		if len(runs) != 2 {
			t.Fatalf("%d runs, want 2", len(runs))
		}
		if runs[0].isRe {
			t.Errorf("first run is a re-execution: %+v", runs[0].re)
		}
		re := runs[1].re
		if !runs[1].isRe || re.Replaces != runs[0].id || re.Began.Value(traceKey{}) != "request" || re.FirstRun.IsZero() {
			t.Errorf("second run's ReexecutionOf = %+v, %v; want it to replace task %d begun from the request", re, runs[1].isRe, runs[0].id)
		}
		if _, ok := moirai.ReexecutionOf(context.Background()); ok {
			t.Error("ReexecutionOf(Background) reports a re-execution")
		}
	})
}

// TestUsageOfNamesTheResourcesATaskUsed: a task's waits and holds, by
// resource name, from its own goroutine; nothing once it has ended or
// for another controller's task.
func TestUsageOfNamesTheResourcesATaskUsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctl := moirai.New(moirai.WithoutMechanisms())
		defer ctl.Close()
		other := moirai.New(moirai.WithoutMechanisms())
		defer other.Close()
		mu := ctl.Mutex("table:orders")
		hctx, holder := ctl.Begin(context.Background(), moirai.Spec{Class: "report"})
		if err := mu.Lock(hctx); err != nil {
			t.Fatal(err)
		}
		wctx, waiter := ctl.Begin(context.Background(), moirai.Spec{Class: "insert"})
		locked := make(chan struct{})
		go func() {
			if err := mu.Lock(wctx); err == nil {
				close(locked)
			}
		}()
		time.Sleep(30 * time.Millisecond)
		synctest.Wait()
		mu.Unlock()
		<-locked
		time.Sleep(10 * time.Millisecond)
		mu.Unlock()

		type use struct {
			Res        string
			Wait, Hold time.Duration
			Waits      int64
		}
		read := func(tk *moirai.Task) []use {
			var out []use
			ctl.UsageOf(tk, func(name string, u task.Usage) { out = append(out, use{name, u.Wait, u.Hold, u.Waits}) })
			return out
		}
		// The controller's clock is coarse while no detector fires (a
		// tick a millisecond), and which of the goroutines woken at one
		// instant runs first is not fixed: a reading is exact to a tick.
		tick := cmp.Comparer(func(a, b time.Duration) bool { return a-b <= time.Millisecond && b-a <= time.Millisecond })
		if diff := cmp.Diff([]use{{"table:orders", 0, 30 * time.Millisecond, 0}}, read(holder), tick); diff != "" {
			t.Errorf("holder's usage (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]use{{"table:orders", 30 * time.Millisecond, 10 * time.Millisecond, 1}}, read(waiter), tick); diff != "" {
			t.Errorf("waiter's usage (-want +got):\n%s", diff)
		}
		var n int
		other.UsageOf(holder, func(string, task.Usage) { n++ })
		holder.End(nil)
		waiter.End(nil)
		ctl.UsageOf(holder, func(string, task.Usage) { n++ })
		ctl.UsageOf(nil, func(string, task.Usage) { n++ })
		if n != 0 {
			t.Errorf("UsageOf reported %d uses of an ended task, nil, or another controller's task", n)
		}
	})
}
