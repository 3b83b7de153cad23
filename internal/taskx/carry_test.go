package taskx_test

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/task"
)

// A penalty that a task ends without serving passes to the next task of
// its class, once, and is forgotten after task.CarryFor.
func TestPenaltyCarriesToClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		_, noisy := e.begin(t, task.Spec{Class: "report"})
		taskx.Penalize(noisy, 40*time.Millisecond)
		noisy.End(nil)
		if got := taskx.Carried(e.reg, "report"); got != 1 {
			t.Fatalf("carried after End: %d, want 1", got)
		}

		_, other := e.begin(t, task.Spec{Class: "insert"})
		if taskx.Penalty(other) != 0 {
			t.Errorf("a task of another class got %v", taskx.Penalty(other))
		}
		_, next := e.begin(t, task.Spec{Class: "report"})
		if taskx.Penalty(next) != 40*time.Millisecond {
			t.Errorf("next task of the class: penalty %v, want 40ms", taskx.Penalty(next))
		}
		_, third := e.begin(t, task.Spec{Class: "report"})
		if taskx.Penalty(third) != 0 || taskx.Carried(e.reg, "report") != 0 {
			t.Errorf("one carried penalty served twice: %v, %d left", taskx.Penalty(third), taskx.Carried(e.reg, "report"))
		}

		// Served, cancelled and unclassed tasks leave nothing.
		ctx, served := e.begin(t, task.Spec{Class: "report"})
		taskx.Penalize(served, time.Millisecond)
		if err := served.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		served.End(nil)
		_, cancelled := e.begin(t, task.Spec{Class: "report", Cancellable: true})
		taskx.Penalize(cancelled, time.Millisecond)
		if err := taskx.Cancel(cancelled, "test"); err != nil {
			t.Fatal(err)
		}
		cancelled.End(errors.New("cancelled"))
		_, anon := e.begin(t, task.Spec{})
		taskx.Penalize(anon, time.Millisecond)
		anon.End(nil)
		if got := taskx.Carried(e.reg, "report") + taskx.Carried(e.reg, ""); got != 0 {
			t.Errorf("carried %d after served, cancelled and unclassed tasks", got)
		}

		// A penalty decided on a task that ended before it was given.
		taskx.LeavePenalty(e.reg, "report", 2*task.MaxPenalty)
		if _, tk := e.begin(t, task.Spec{Class: "report"}); taskx.Penalty(tk) != task.MaxPenalty {
			t.Errorf("left penalty: %v, want the bound %v", taskx.Penalty(tk), task.MaxPenalty)
		}

		// An old penalty is forgotten.
		_, stale := e.begin(t, task.Spec{Class: "report"})
		taskx.Penalize(stale, time.Millisecond)
		stale.End(nil)
		e.sleep(task.CarryFor + time.Millisecond)
		_, late := e.begin(t, task.Spec{Class: "report"})
		if taskx.Penalty(late) != 0 {
			t.Errorf("a penalty older than CarryFor was served: %v", taskx.Penalty(late))
		}
	})
}

// Carried penalties are bounded per class, and the newest length wins.
func TestCarriedBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		var tasks []*task.Task
		for range 40 {
			_, tk := e.begin(t, task.Spec{Class: "bulk"})
			tasks = append(tasks, tk)
		}
		for i, tk := range tasks {
			taskx.Penalize(tk, time.Duration(i+1)*time.Millisecond)
			tk.End(nil)
		}
		if got := taskx.Carried(e.reg, "bulk"); got != 16 {
			t.Fatalf("carried %d, want the bound 16", got)
		}
		_, tk := e.begin(t, task.Spec{Class: "bulk"})
		if taskx.Penalty(tk) != 40*time.Millisecond {
			t.Errorf("carried length %v, want the newest, 40ms", taskx.Penalty(tk))
		}
	})
}

// TestCarriedClassesBounded: penalties carried to later tasks are kept
// for at most 1,024 classes at once (classes come from requests); the
// penalties of further classes are counted and dropped.
func TestCarriedClassesBounded(t *testing.T) {
	reg := task.NewRegistry(task.Options{})
	for i := range 1500 {
		taskx.LeavePenalty(reg, fmt.Sprintf("GET /users/%d", i), time.Millisecond)
	}
	if got := reg.Stats().CarryDropped; got != 1500-1024 {
		t.Errorf("CarryDropped = %d, want %d", got, 1500-1024)
	}
}
