package taskx_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/task"
)

func TestPenaltyServedAtSafePoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		ctx, tk := e.begin(t, task.Spec{})
		if taskx.Flagged(tk) {
			t.Fatal("a new task is flagged")
		}
		taskx.Penalize(tk, 30*time.Millisecond)
		if !taskx.Flagged(tk) || taskx.Penalty(tk) != 30*time.Millisecond {
			t.Fatalf("after Penalize: flagged %v, penalty %v", taskx.Flagged(tk), taskx.Penalty(tk))
		}
		start := time.Now()
		if err := tk.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 30*time.Millisecond {
			t.Errorf("paused %v, want 30ms", got)
		}
		if taskx.Flagged(tk) || taskx.Penalty(tk) != 0 || taskx.Penalties(tk) != 1 || taskx.PenaltyServed(tk) != 30*time.Millisecond {
			t.Errorf("after Pause: flagged %v, pending %v, served %d for %v", taskx.Flagged(tk), taskx.Penalty(tk), taskx.Penalties(tk), taskx.PenaltyServed(tk))
		}
		e.clk.Advance()
		if ex := taskx.ExecTime(tk, e.clk.Now()); ex != 0 {
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
		if err := taskx.Acquire(tk, 1, 1); err != nil {
			t.Fatal(err)
		}
		taskx.Penalize(tk, time.Second)
		start := time.Now()
		if err := tk.Pause(ctx); err != nil || time.Since(start) != 0 {
			t.Fatalf("Pause while holding: %v after %v; want nil at once", err, time.Since(start))
		}
		if tk.TakePenalty() != 0 || taskx.Penalty(tk) != time.Second {
			t.Fatalf("penalty taken while holding; pending %v", taskx.Penalty(tk))
		}
		if err := taskx.Release(tk, 1, 1); err != nil {
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
		taskx.Penalize(tk, time.Hour)
		if taskx.Penalty(tk) != task.MaxPenalty {
			t.Errorf("penalty %v, want the cap %v", taskx.Penalty(tk), task.MaxPenalty)
		}
		taskx.Penalize(tk, -time.Second) // ignored
		if taskx.Penalty(tk) != task.MaxPenalty {
			t.Errorf("a negative penalty changed the pending one to %v", taskx.Penalty(tk))
		}
		if err := taskx.Cancel(tk, "test"); err != nil {
			t.Fatal(err)
		}
		if taskx.Penalty(tk) != 0 {
			t.Errorf("a cancelled task keeps its penalty %v", taskx.Penalty(tk))
		}
		taskx.Penalize(tk, time.Millisecond)
		if taskx.Penalty(tk) != 0 {
			t.Errorf("a cancelled task was penalized: %v", taskx.Penalty(tk))
		}
		if !taskx.Flagged(tk) {
			t.Error("a cancelled task is not flagged")
		}
	})
}

func TestPauseGivesUpOnDoneContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		_, tk := e.begin(t, task.Spec{})
		taskx.Penalize(tk, time.Second)
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
	taskx.Penalize(nilTask, time.Second)
	if taskx.Flagged(nilTask) || taskx.Penalty(nilTask) != 0 || nilTask.TakePenalty() != 0 || nilTask.Pause(context.Background()) != nil {
		t.Error("a nil task has a penalty")
	}
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		_, tk := e.reg.Begin(context.Background(), task.Spec{})
		tk.End(nil)
		taskx.Penalize(tk, time.Second)
		if taskx.Penalty(tk) != 0 || tk.TakePenalty() != 0 {
			t.Error("an ended task has a penalty")
		}
	})
}
