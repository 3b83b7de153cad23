package taskx_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/task"
)

func TestBeginEnd(t *testing.T) {
	e := newEnv(t, task.Options{})
	ctx, tk := e.reg.Begin(context.Background(), task.Spec{Class: "GET /"})

	if tk.ID() == 0 {
		t.Error("ID() = 0")
	}
	if got := task.FromContext(ctx); got != tk {
		t.Errorf("FromContext(ctx) = %p, want the task %p", got, tk)
	}
	if tk.Context() != ctx {
		t.Error("Context() is not the context Begin returned")
	}
	if taskx.Ended(tk) || tk.Cancelled() || !taskx.Active(tk) {
		t.Errorf("new task: Ended %v Cancelled %v Active %v, want false false true", taskx.Ended(tk), tk.Cancelled(), taskx.Active(tk))
	}
	if got := e.reg.Lookup(tk.ID()); got != tk {
		t.Errorf("Lookup(%d) = %p, want %p", tk.ID(), got, tk)
	}
	if got := e.reg.Len(); got != 1 {
		t.Errorf("Len() = %d, want 1", got)
	}

	tk.End(nil)
	if !taskx.Ended(tk) || taskx.Active(tk) {
		t.Errorf("ended task: Ended %v Active %v, want true false", taskx.Ended(tk), taskx.Active(tk))
	}
	if got := e.reg.Lookup(tk.ID()); got != nil {
		t.Errorf("Lookup after End = %p, want nil", got)
	}
	if got := task.FromContext(ctx); got != tk {
		t.Error("FromContext on an ended task's context lost the task")
	}
	if got := e.reg.Stats().EndedTwice; got != 0 {
		t.Errorf("EndedTwice = %d before a second End", got)
	}
	tk.End(errors.New("again"))
	tk.End(nil)
	var tot task.Totals
	e.reg.TotalsInto(&tot)
	if diff := cmp.Diff(task.Stats{EndedTwice: 2}, e.reg.Stats()); diff != "" {
		t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
	}
	if tot.Ended != 1 || tot.Failed != 0 {
		t.Errorf("Totals after repeated End: Ended %d Failed %d, want 1 0 (End is idempotent)", tot.Ended, tot.Failed)
	}
	if got := e.reg.Lookup(0); got != nil {
		t.Errorf("Lookup(0) = %p, want nil", got)
	}
}

func TestFromContext(t *testing.T) {
	e := newEnv(t, task.Options{})
	ctx, tk := e.begin(t, task.Spec{})
	type key struct{}
	timeout, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	tests := []struct {
		name string
		ctx  context.Context
		want *task.Task
	}{
		{name: "own", ctx: ctx, want: tk},
		{name: "WithValue", ctx: context.WithValue(ctx, key{}, 1), want: tk},
		{name: "WithTimeout", ctx: timeout, want: tk},
		{name: "WithoutCancel", ctx: context.WithoutCancel(ctx), want: tk},
		{name: "Background", ctx: context.Background(), want: nil},
		{name: "unrelated", ctx: context.WithValue(context.Background(), key{}, 1), want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := task.FromContext(tt.ctx); got != tt.want {
				t.Errorf("FromContext() = %p, want %p", got, tt.want)
			}
		})
	}
}

// TestIDsAndLive begins and ends tasks from many goroutines and checks that
// IDs are unique and non-zero and that Len, AppendLive and Lookup agree.
func TestIDsAndLive(t *testing.T) {
	const goroutines, each = 8, 200
	e := newEnv(t, task.Options{})
	var mu sync.Mutex
	var all []*task.Task
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			var mine []*task.Task
			for range each {
				_, tk := e.reg.Begin(context.Background(), task.Spec{})
				mine = append(mine, tk)
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()

	ids := make(map[uint64]bool)
	for _, tk := range all {
		if tk.ID() == 0 || ids[tk.ID()] {
			t.Fatalf("ID %d is zero or repeated", tk.ID())
		}
		ids[tk.ID()] = true
		if e.reg.Lookup(tk.ID()) != tk {
			t.Fatalf("Lookup(%d) did not return its task", tk.ID())
		}
	}
	if got := e.reg.Len(); got != goroutines*each {
		t.Errorf("Len() = %d, want %d", got, goroutines*each)
	}
	live := taskx.AppendLive(e.reg, nil)
	sortByID := func(ts []*task.Task) {
		slices.SortFunc(ts, func(a, b *task.Task) int { return int(a.ID()) - int(b.ID()) })
	}
	sortByID(live)
	sortByID(all)
	if !slices.Equal(live, all) {
		t.Errorf("AppendLive returned %d tasks, not the %d begun", len(live), len(all))
	}

	// End every other task, concurrently.
	for i := range goroutines {
		wg.Go(func() {
			for j := i; j < len(all); j += goroutines {
				if j%2 == 0 {
					all[j].End(nil)
				}
			}
		})
	}
	wg.Wait()
	var want []*task.Task
	for j, tk := range all {
		if j%2 == 1 {
			want = append(want, tk)
		} else if e.reg.Lookup(tk.ID()) != nil {
			t.Fatalf("Lookup(%d) found an ended task", tk.ID())
		}
	}
	live = taskx.AppendLive(e.reg, live[:0])
	sortByID(live)
	if !slices.Equal(live, want) {
		t.Errorf("AppendLive after End returned %d tasks, want the %d live", len(live), len(want))
	}
	if got := e.reg.Stats().Live; got != len(want) {
		t.Errorf("Stats().Live = %d, want %d", got, len(want))
	}
	for _, tk := range want {
		tk.End(nil)
	}
	if got := e.reg.Len(); got != 0 {
		t.Errorf("Len() = %d after ending everything", got)
	}
}

func TestContextDone(t *testing.T) {
	parentCause := errors.New("client went away")
	tests := []struct {
		name        string
		cancellable bool
		// touch calls Done before the event, so that the lazy context
		// exists when it happens.
		touch     bool
		event     func(tk *task.Task, cancelParent context.CancelCauseFunc)
		wantErr   error
		wantCause error
	}{
		{name: "parent cancelled", event: func(_ *task.Task, c context.CancelCauseFunc) { c(parentCause) },
			wantErr: context.Canceled, wantCause: parentCause},
		{name: "parent cancelled, touched", touch: true, event: func(_ *task.Task, c context.CancelCauseFunc) { c(parentCause) },
			wantErr: context.Canceled, wantCause: parentCause},
		{name: "End", event: func(tk *task.Task, _ context.CancelCauseFunc) { tk.End(nil) },
			wantErr: context.Canceled, wantCause: context.Canceled},
		{name: "End, touched", touch: true, event: func(tk *task.Task, _ context.CancelCauseFunc) { tk.End(nil) },
			wantErr: context.Canceled, wantCause: context.Canceled},
		{name: "Cancel", cancellable: true, event: func(tk *task.Task, _ context.CancelCauseFunc) { taskx.Cancel(tk, "") },
			wantErr: context.Canceled, wantCause: task.ErrCancelled},
		{name: "Cancel, touched", cancellable: true, touch: true, event: func(tk *task.Task, _ context.CancelCauseFunc) { taskx.Cancel(tk, "") },
			wantErr: context.Canceled, wantCause: task.ErrCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, task.Options{})
			parent, cancelParent := context.WithCancelCause(context.Background())
			defer cancelParent(nil)
			ctx, tk := e.reg.Begin(parent, task.Spec{Cancellable: tt.cancellable})
			defer tk.End(nil)

			if err := ctx.Err(); err != nil {
				t.Fatalf("Err() = %v before anything happened", err)
			}
			if tt.touch {
				if isClosed(ctx.Done()) {
					t.Fatal("Done() closed before anything happened")
				}
			}
			tt.event(tk, cancelParent)
			if !isClosed(ctx.Done()) {
				t.Fatal("Done() not closed")
			}
			if err := ctx.Err(); err != tt.wantErr {
				t.Errorf("Err() = %v, want %v", err, tt.wantErr)
			}
			if got := context.Cause(ctx); got != tt.wantCause {
				t.Errorf("Cause() = %v, want %v", got, tt.wantCause)
			}
		})
	}
}

func TestCancelCause(t *testing.T) {
	e := newEnv(t, task.Options{})
	ctx, tk := e.begin(t, task.Spec{Cancellable: true})
	child, cancelChild := context.WithCancel(ctx) // before the cancellation
	defer cancelChild()

	if err := taskx.Cancel(tk, "memory pressure"); err != nil {
		t.Fatalf("Cancel() = %v", err)
	}
	if !tk.Cancelled() {
		t.Error("Cancelled() = false after Cancel")
	}
	later, cancelLater := context.WithCancel(ctx) // after it
	defer cancelLater()
	for name, c := range map[string]context.Context{"task": ctx, "child": child, "later child": later} {
		if !isClosed(c.Done()) {
			t.Errorf("%s: Done() not closed", name)
			continue
		}
		if c.Err() != context.Canceled {
			t.Errorf("%s: Err() = %v, want context.Canceled", name, c.Err())
		}
		cause := context.Cause(c)
		if !errors.Is(cause, task.ErrCancelled) {
			t.Errorf("%s: Cause() = %v, want ErrCancelled", name, cause)
		}
		if cause == nil || !strings.Contains(cause.Error(), "memory pressure") {
			t.Errorf("%s: Cause() = %v, want the reason in it", name, cause)
		}
	}
}

// TestContextDelegates checks what the task's context takes from its
// parent while the task runs.
func TestContextDelegates(t *testing.T) {
	e := newEnv(t, task.Options{})
	type key struct{}
	deadline := time.Now().Add(time.Hour)
	parent, cancel := context.WithDeadline(context.WithValue(context.Background(), key{}, "v"), deadline)
	defer cancel()
	ctx, tk := e.reg.Begin(parent, task.Spec{})
	defer tk.End(nil)

	if d, ok := ctx.Deadline(); !ok || !d.Equal(deadline) {
		t.Errorf("Deadline() = %v, %v; want %v, true", d, ok, deadline)
	}
	if got := ctx.Value(key{}); got != "v" {
		t.Errorf("Value(key) = %v, want v", got)
	}
	if got := ctx.Value("missing"); got != nil {
		t.Errorf("Value(missing) = %v, want nil", got)
	}
	if _, ok := (context.Background()).Deadline(); ok {
		t.Fatal("Background has a deadline")
	}
	ctx2, tk2 := e.reg.Begin(context.Background(), task.Spec{})
	defer tk2.End(nil)
	if _, ok := ctx2.Deadline(); ok {
		t.Error("Deadline() ok with a parent without deadline")
	}
	if got := context.Cause(ctx2); got != nil {
		t.Errorf("Cause() = %v on a live task", got)
	}
}

func TestContextParentDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		parent, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		ctx, tk := e.reg.Begin(parent, task.Spec{})
		defer tk.End(nil)
		done := ctx.Done()
		time.Sleep(time.Second - time.Nanosecond)
		if isClosed(done) || ctx.Err() != nil {
			t.Fatal("task context done before its parent's deadline")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !isClosed(done) {
			t.Fatal("task context not done at its parent's deadline")
		}
		if ctx.Err() != context.DeadlineExceeded {
			t.Errorf("Err() = %v, want DeadlineExceeded", ctx.Err())
		}
	})
}

// TestContextAfterFunc checks that context.AfterFunc, which finds the
// task's canceller through Value, fires on Cancel.
func TestContextAfterFunc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		ctx, tk := e.begin(t, task.Spec{Cancellable: true})
		var fired atomic.Bool
		context.AfterFunc(ctx, func() { fired.Store(true) })
		taskx.Cancel(tk, "x")
		synctest.Wait()
		if !fired.Load() {
			t.Error("AfterFunc did not run on Cancel")
		}
	})
}

func TestNewContext(t *testing.T) {
	e := newEnv(t, task.Options{})
	_, tk := e.begin(t, task.Spec{Cancellable: true})
	_, other := e.begin(t, task.Spec{})
	type key struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	defer cancel()

	bound := task.NewContext(parent, tk)
	if got := task.FromContext(bound); got != tk {
		t.Errorf("FromContext(NewContext(parent, tk)) = %p, want %p", got, tk)
	}
	if got := bound.Value(key{}); got != "v" {
		t.Errorf("Value(key) = %v, want the parent's v", got)
	}
	rebound := task.NewContext(other.Context(), tk)
	if got := task.FromContext(rebound); got != tk {
		t.Errorf("FromContext(NewContext(other's context, tk)) = %p, want tk %p", got, tk)
	}
	if got := task.FromContext(task.NewContext(context.Background(), nil)); got != nil {
		t.Errorf("FromContext(NewContext(bg, nil)) = %p, want nil", got)
	}

	taskx.Cancel(tk, "")
	if isClosed(bound.Done()) {
		t.Error("the bound context is done when its task is cancelled; it follows its parent only")
	}
	cancel()
	if !isClosed(bound.Done()) || bound.Err() != context.Canceled {
		t.Errorf("the bound context is not done with its parent: Err() = %v", bound.Err())
	}

	defer func() {
		if recover() == nil {
			t.Error("NewContext(nil, tk) did not panic")
		}
	}()
	var nilCtx context.Context
	task.NewContext(nilCtx, tk)
}

func TestCancel(t *testing.T) {
	tests := []struct {
		name        string
		cancellable bool
		before      func(tk *task.Task)
		wantErr     string // a substring; "" for success
		wantState   bool   // Cancelled() afterwards
	}{
		{name: "cancellable", cancellable: true, wantState: true},
		{name: "not cancellable", wantErr: "not cancellable"},
		{name: "twice", cancellable: true, before: func(tk *task.Task) { taskx.Cancel(tk, "first") }, wantErr: "already cancelled", wantState: true},
		{name: "after End", cancellable: true, before: func(tk *task.Task) { tk.End(nil) }, wantErr: "has ended"},
		{name: "after End, not cancellable", before: func(tk *task.Task) { tk.End(nil) }, wantErr: "not cancellable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, task.Options{})
			ctx, tk := e.begin(t, task.Spec{Cancellable: tt.cancellable})
			if tt.before != nil {
				tt.before(tk)
			}
			wasDone := isClosed(ctx.Done())
			before := e.reg.Stats().Cancelled
			err := taskx.Cancel(tk, "reason")
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Cancel() = %v", err)
				}
				if got := e.reg.Stats().Cancelled; got != before+1 {
					t.Errorf("Stats().Cancelled = %d, want %d", got, before+1)
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), "task: ") {
					t.Fatalf("Cancel() = %v, want an error containing %q", err, tt.wantErr)
				}
				if got := e.reg.Stats().Cancelled; got != before {
					t.Errorf("a refused Cancel changed Stats().Cancelled from %d to %d", before, got)
				}
				if !wasDone && isClosed(ctx.Done()) {
					t.Error("a refused Cancel cancelled the context")
				}
			}
			if got := tk.Cancelled(); got != tt.wantState {
				t.Errorf("Cancelled() = %v, want %v", got, tt.wantState)
			}
		})
	}
}

// TestCancelFirstReasonWins checks that a refused second Cancel does not
// change the cause.
func TestCancelFirstReasonWins(t *testing.T) {
	e := newEnv(t, task.Options{})
	ctx, tk := e.begin(t, task.Spec{Cancellable: true})
	taskx.Cancel(tk, "first")
	taskx.Cancel(tk, "second")
	if got, want := context.Cause(ctx).Error(), task.ErrCancelled.Error()+": first"; got != want {
		t.Errorf("Cause() = %q, want %q", got, want)
	}
}

func TestOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		ctx, tk := e.begin(t, task.Spec{Cancellable: true})
		var order []string
		var mu sync.Mutex
		hook := func(name string) func() {
			return func() {
				if !isClosed(ctx.Done()) {
					t.Errorf("hook %s ran before the context was cancelled", name)
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
			}
		}
		tk.OnCancel(hook("a"))
		stopB := tk.OnCancel(hook("b"))
		tk.OnCancel(hook("c"))
		if !stopB() {
			t.Error("stop() before the cancellation = false, want true")
		}
		if stopB() {
			t.Error("second stop() = true, want false")
		}
		stopNil := tk.OnCancel(nil)
		if stopNil() {
			t.Error("stop of OnCancel(nil) = true")
		}
		synctest.Wait()
		if len(order) != 0 {
			t.Fatalf("hooks ran before Cancel: %v", order)
		}

		if err := taskx.Cancel(tk, "go"); err != nil {
			t.Fatal(err)
		}
		taskx.Cancel(tk, "again")
		synctest.Wait()
		// Each hook runs in its own goroutine: in no particular order.
		sorted := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Sorted(slices.Values(order)) }
		if diff := cmp.Diff([]string{"a", "c"}, sorted()); diff != "" {
			t.Errorf("hooks run (-want +got):\n%s", diff)
		}

		// A hook registered after the cancellation runs at once.
		stopD := tk.OnCancel(hook("d"))
		synctest.Wait()
		if diff := cmp.Diff([]string{"a", "c", "d"}, sorted()); diff != "" {
			t.Errorf("hooks run (-want +got):\n%s", diff)
		}
		if stopD() {
			t.Error("stop() of a hook that ran = true")
		}
		tk.End(nil)
		synctest.Wait()
		if diff := cmp.Diff(task.Stats{Cancelled: 1}, e.reg.Stats()); diff != "" {
			t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestOnCancelNotRunOnEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		_, tk := e.begin(t, task.Spec{Cancellable: true})
		var ran atomic.Bool
		stop := tk.OnCancel(func() { ran.Store(true) })
		tk.End(nil)
		taskx.Cancel(tk, "late")
		synctest.Wait()
		if ran.Load() {
			t.Error("a hook ran although the task ended without being cancelled")
		}
		if !stop() {
			t.Error("stop() = false for a hook that never ran")
		}
	})
}

func TestOnCancelPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		_, tk := e.begin(t, task.Spec{Class: "q", Cancellable: true})
		var ran atomic.Int32
		tk.OnCancel(func() { panic("boom") })
		tk.OnCancel(func() { ran.Add(1) })
		taskx.Cancel(tk, "")
		synctest.Wait()
		if ran.Load() != 1 {
			t.Errorf("the hook after a panicking one ran %d times, want 1", ran.Load())
		}
		// A hook registered after the cancellation panics on its own goroutine.
		tk.OnCancel(func() { panic(fmt.Errorf("late boom")) })
		synctest.Wait()
		if got := e.reg.Stats().HookPanics; got != 2 {
			t.Errorf("Stats().HookPanics = %d, want 2", got)
		}
		reps := e.reports.get()
		if len(reps) != 2 {
			t.Fatalf("Report got %d errors, want 2: %v", len(reps), reps)
		}
		for i, want := range []string{"panicked: boom", "panicked: late boom"} {
			if !strings.Contains(reps[i].Error(), want) || !strings.Contains(reps[i].Error(), fmt.Sprint(tk.ID())) {
				t.Errorf("report %d = %q, want it to name the task and contain %q", i, reps[i], want)
			}
		}
	})
}

func TestOnCancelBlocked(t *testing.T) {
	tests := []struct {
		name        string
		timeout     time.Duration
		wantAfter   time.Duration // when the block is reported; 0 for never
		wantMessage string
	}{
		{name: "default timeout", timeout: 0, wantAfter: time.Second, wantMessage: "still running after 1s"},
		{name: "custom timeout", timeout: 50 * time.Millisecond, wantAfter: 50 * time.Millisecond, wantMessage: "still running after 50ms"},
		{name: "disabled", timeout: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, task.Options{HookTimeout: tt.timeout})
				_, tk := e.begin(t, task.Spec{Cancellable: true})
				unblock := make(chan struct{})
				var after atomic.Bool
				tk.OnCancel(func() { <-unblock })
				tk.OnCancel(func() { after.Store(true) })
				taskx.Cancel(tk, "")
				synctest.Wait()
				if got := e.reg.Stats().HooksRunning; got != 1 {
					t.Errorf("Stats().HooksRunning = %d, want 1", got)
				}
				wait := tt.wantAfter
				if wait == 0 {
					wait = time.Hour
				}
				time.Sleep(wait - time.Nanosecond)
				synctest.Wait()
				if got := e.reg.Stats().HookBlocked; got != 0 {
					t.Errorf("Stats().HookBlocked = %d before the timeout", got)
				}
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				want := int64(0)
				if tt.wantAfter > 0 {
					want = 1
				}
				if got := e.reg.Stats().HookBlocked; got != want {
					t.Errorf("Stats().HookBlocked = %d, want %d", got, want)
				}
				reps := e.reports.get()
				if len(reps) != int(want) {
					t.Fatalf("Report got %v, want %d errors", reps, want)
				}
				if want == 1 && !strings.Contains(reps[0].Error(), tt.wantMessage) {
					t.Errorf("report = %q, want it to contain %q", reps[0], tt.wantMessage)
				}

				close(unblock)
				synctest.Wait()
				if !after.Load() {
					t.Error("the hook after the blocked one did not run")
				}
				if got := e.reg.Stats().HooksRunning; got != 0 {
					t.Errorf("Stats().HooksRunning = %d after the hooks returned", got)
				}
				time.Sleep(time.Hour)
				if got := e.reg.Stats().HookBlocked; got != want {
					t.Errorf("Stats().HookBlocked changed to %d after the hook returned", got)
				}
			})
		})
	}
}

func TestProgress(t *testing.T) {
	tests := []struct {
		name              string
		done, total       int64
		wantDone, wantTot int64
	}{
		{name: "in range", done: 5, total: 10, wantDone: 5, wantTot: 10},
		{name: "complete", done: 10, total: 10, wantDone: 10, wantTot: 10},
		{name: "negative done", done: -3, total: 10, wantDone: 0, wantTot: 10},
		{name: "done above total", done: 11, total: 10, wantDone: 10, wantTot: 10},
		{name: "negative total", done: 5, total: -1, wantDone: 0, wantTot: 0},
		{name: "zero", done: 0, total: 0, wantDone: 0, wantTot: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, task.Options{})
			_, tk := e.begin(t, task.Spec{})
			if d, n := taskx.ProgressOf(tk); d != 0 || n != 0 {
				t.Fatalf("ProgressOf() = %d, %d before any report", d, n)
			}
			tk.Progress(1, 2)
			tk.Progress(tt.done, tt.total)
			if d, n := taskx.ProgressOf(tk); d != tt.wantDone || n != tt.wantTot {
				t.Errorf("Progress(%d, %d): ProgressOf() = %d, %d; want %d, %d", tt.done, tt.total, d, n, tt.wantDone, tt.wantTot)
			}
			tk.End(nil)
			tk.Progress(1, 2)
			if d, n := taskx.ProgressOf(tk); d != 0 || n != 0 {
				t.Errorf("ProgressOf() = %d, %d after End", d, n)
			}
		})
	}
}

func TestFreezeActivate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		_, tk := e.reg.Begin(context.Background(), task.Spec{})
		exec := func() time.Duration { return taskx.ExecTime(tk, e.clk.Now()) }
		check := func(step string, wantExec time.Duration, wantActive bool, wantActs int64) {
			t.Helper()
			if got := exec(); got != wantExec {
				t.Errorf("%s: ExecTime = %v, want %v", step, got, wantExec)
			}
			if got := taskx.Active(tk); got != wantActive {
				t.Errorf("%s: Active() = %v, want %v", step, got, wantActive)
			}
			if got := taskx.Activities(tk); got != wantActs {
				t.Errorf("%s: Activities() = %d, want %d", step, got, wantActs)
			}
		}
		check("begin", 0, true, 1)
		tk.Activate() // already active: nothing
		e.sleep(2 * time.Millisecond)
		check("running", 2*time.Millisecond, true, 1)
		tk.Freeze()
		e.sleep(3 * time.Millisecond)
		tk.Freeze() // already frozen: nothing
		check("frozen", 2*time.Millisecond, false, 1)
		tk.Activate()
		e.sleep(4 * time.Millisecond)
		check("second activity", 6*time.Millisecond, true, 2)
		tk.Freeze()
		e.sleep(time.Millisecond)
		tk.Activate()
		tk.Activate()
		e.sleep(time.Millisecond)
		check("third activity", 7*time.Millisecond, true, 3)
		if got := taskx.ExecTime(tk, taskx.Started(tk)); got != 6*time.Millisecond {
			t.Errorf("ExecTime(before the activity began) = %v, want the finished activities' 6ms", got)
		}

		tk.End(nil)
		check("ended", 0, false, 0)
		tk.Activate()
		check("activated after End", 0, false, 0)
		var tot task.Totals
		e.reg.TotalsInto(&tot)
		if tot.Exec != 7*time.Millisecond {
			t.Errorf("Totals.Exec = %v, want 7ms (11ms minus 4ms frozen)", tot.Exec)
		}
		if got := tot.Latency.Mean(); got < 10*time.Millisecond || got > 13*time.Millisecond {
			t.Errorf("latency mean = %v, want about 11ms", got)
		}
	})
}

// TestEndWhileFrozen checks that the time a task spends frozen before End
// is not execution time.
func TestEndWhileFrozen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		_, tk := e.reg.Begin(context.Background(), task.Spec{})
		e.sleep(2 * time.Millisecond)
		tk.Freeze()
		e.sleep(5 * time.Millisecond)
		tk.End(nil)
		var tot task.Totals
		e.reg.TotalsInto(&tot)
		if tot.Exec != 2*time.Millisecond {
			t.Errorf("Totals.Exec = %v, want 2ms", tot.Exec)
		}
	})
}

// TestNilTask checks that every method is a no-op on a nil *Task.
func TestNilTask(t *testing.T) {
	var tk *task.Task
	tk.Progress(1, 2)
	tk.Freeze()
	tk.Activate()
	tk.End(nil)
	taskx.WaitBegin(tk, 1)
	taskx.WaitEnd(tk, 1)
	taskx.Evicted(tk, 1, 1)
	if err := taskx.Acquire(tk, 1, 1); err != nil {
		t.Errorf("Acquire = %v", err)
	}
	if err := taskx.Release(tk, 1, 1); err != nil {
		t.Errorf("Release = %v", err)
	}
	if taskx.Cancel(tk, "x") == nil {
		t.Error("Cancel on a nil task succeeded")
	}
	if tk.OnCancel(func() {})() {
		t.Error("stop = true")
	}
	type result struct {
		ID                        uint64
		Spec                      task.Spec
		Started, Activities, Done int64
		Ended, Cancelled, Active  bool
		Exec                      time.Duration
		Claimed                   int
		Found                     bool
		Usages                    []task.Usage
	}
	done, _ := taskx.ProgressOf(tk)
	_, found := taskx.UsageOf(tk, 1)
	got := result{ID: tk.ID(), Spec: tk.Spec(), Started: taskx.Started(tk), Activities: taskx.Activities(tk), Done: done,
		Ended: taskx.Ended(tk), Cancelled: tk.Cancelled(), Active: taskx.Active(tk), Exec: taskx.ExecTime(tk, 100),
		Claimed: taskx.Claimed(tk), Found: found, Usages: taskx.AppendUsage(tk, nil, 1)}
	if diff := cmp.Diff(result{}, got); diff != "" {
		t.Errorf("nil task (-want +got):\n%s", diff)
	}
	if tk.Context() != context.Background() {
		t.Error("Context() of a nil task is not Background")
	}
}

// TestConcurrentCancelsAgreeOnTheReason: of several concurrent Cancels
// exactly one succeeds, and the context's cause carries its reason.
func TestConcurrentCancelsAgreeOnTheReason(t *testing.T) {
	for range 50 {
		e := newEnv(t, task.Options{})
		ctx, tk := e.begin(t, task.Spec{Cancellable: true})
		_ = ctx.Done() // the context exists before the race
		reasons := []string{"a", "b", "c", "d"}
		won := make(chan string, len(reasons))
		var wg sync.WaitGroup
		for _, r := range reasons {
			wg.Go(func() {
				if taskx.Cancel(tk, r) == nil {
					won <- r
				}
			})
		}
		wg.Wait()
		close(won)
		var winners []string
		for r := range won {
			winners = append(winners, r)
		}
		if len(winners) != 1 {
			t.Fatalf("%d Cancels succeeded, want 1", len(winners))
		}
		if cause := context.Cause(ctx); !strings.HasSuffix(cause.Error(), ": "+winners[0]) {
			t.Fatalf("cause %q does not carry the winner's reason %q", cause, winners[0])
		}
		tk.End(nil)
	}
}

// TestBlockedHookDoesNotDelayOthers: each OnCancel hook runs in its own
// goroutine, so one that blocks does not hold up the next.
func TestBlockedHookDoesNotDelayOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		_, tk := e.begin(t, task.Spec{Cancellable: true})
		release := make(chan struct{})
		second := make(chan struct{})
		tk.OnCancel(func() { <-release })
		tk.OnCancel(func() { close(second) })
		if err := taskx.Cancel(tk, "test"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if !isClosed(second) {
			t.Error("the second hook waited for the blocked first one")
		}
		close(release)
		synctest.Wait()
		tk.End(nil)
	})
}
