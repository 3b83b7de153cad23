package task_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai/task"
)

func TestPenaltyServedAtSafePoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		ctx, tk := e.begin(t, task.Spec{})
		if tk.Flagged() {
			t.Fatal("a new task is flagged")
		}
		tk.Penalize(30 * time.Millisecond)
		if !tk.Flagged() || tk.Penalty() != 30*time.Millisecond {
			t.Fatalf("after Penalize: flagged %v, penalty %v", tk.Flagged(), tk.Penalty())
		}
		start := time.Now()
		if err := tk.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 30*time.Millisecond {
			t.Errorf("paused %v, want 30ms", got)
		}
		if tk.Flagged() || tk.Penalty() != 0 || tk.Penalties() != 1 || tk.PenaltyServed() != 30*time.Millisecond {
			t.Errorf("after Pause: flagged %v, pending %v, served %d for %v", tk.Flagged(), tk.Penalty(), tk.Penalties(), tk.PenaltyServed())
		}
		e.clk.Advance()
		if ex := tk.ExecTime(e.clk.Now()); ex != 0 {
			t.Errorf("exec time %v counts the penalty", ex)
		}
		// Nothing pending: Pause returns at once.
		start = time.Now()
		if err := tk.Pause(ctx); err != nil || time.Since(start) != 0 {
			t.Errorf("Pause without a penalty: %v after %v", err, time.Since(start))
		}
	})
}

func TestPenaltyNeverWhileHolding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		ctx, tk := e.begin(t, task.Spec{})
		if err := tk.Acquire(1, 1); err != nil {
			t.Fatal(err)
		}
		tk.Penalize(time.Second)
		start := time.Now()
		if err := tk.Pause(ctx); err != nil || time.Since(start) != 0 {
			t.Fatalf("Pause while holding: %v after %v; want nil at once", err, time.Since(start))
		}
		if tk.TakePenalty() != 0 || tk.Penalty() != time.Second {
			t.Fatalf("penalty taken while holding; pending %v", tk.Penalty())
		}
		if err := tk.Release(1, 1); err != nil {
			t.Fatal(err)
		}
		if d := tk.TakePenalty(); d != time.Second {
			t.Fatalf("TakePenalty after release: %v, want 1s", d)
		}
		if d := tk.TakePenalty(); d != 0 {
			t.Fatalf("second TakePenalty: %v, want 0 (taken once)", d)
		}
	})
}

func TestPenaltyBoundsAndCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		_, tk := e.begin(t, task.Spec{Cancellable: true})
		tk.Penalize(time.Hour)
		if tk.Penalty() != task.MaxPenalty {
			t.Errorf("penalty %v, want the cap %v", tk.Penalty(), task.MaxPenalty)
		}
		tk.Penalize(-time.Second) // ignored
		if tk.Penalty() != task.MaxPenalty {
			t.Errorf("a negative penalty changed the pending one to %v", tk.Penalty())
		}
		if err := tk.Cancel("test"); err != nil {
			t.Fatal(err)
		}
		if tk.Penalty() != 0 {
			t.Errorf("a cancelled task keeps its penalty %v", tk.Penalty())
		}
		tk.Penalize(time.Millisecond)
		if tk.Penalty() != 0 {
			t.Errorf("a cancelled task was penalized: %v", tk.Penalty())
		}
		if !tk.Flagged() {
			t.Error("a cancelled task is not flagged")
		}
	})
}

func TestPauseGivesUpOnDoneContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		_, tk := e.begin(t, task.Spec{})
		tk.Penalize(time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		start := time.Now()
		if err := tk.Pause(ctx); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 10*time.Millisecond {
			t.Errorf("Pause: %v after %v; want the deadline after 10ms", err, time.Since(start))
		}
	})
}

func TestPenaltyNilAndEnded(t *testing.T) {
	var nilTask *task.Task
	nilTask.Penalize(time.Second)
	if nilTask.Flagged() || nilTask.Penalty() != 0 || nilTask.TakePenalty() != 0 || nilTask.Pause(context.Background()) != nil {
		t.Error("a nil task has a penalty")
	}
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		_, tk := e.reg.Begin(context.Background(), task.Spec{})
		tk.End(nil)
		tk.Penalize(time.Second)
		if tk.Penalty() != 0 || tk.TakePenalty() != 0 {
			t.Error("an ended task has a penalty")
		}
	})
}
