package task_test

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai/task"
)

// A penalty that a task ends without serving passes to the next task of
// its class, once, and is forgotten after task.CarryFor.
func TestPenaltyCarriesToClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, task.Options{})
		_, noisy := e.begin(t, task.Spec{Class: "report"})
		noisy.Penalize(40 * time.Millisecond)
		noisy.End(nil)
		if got := e.reg.Carried("report"); got != 1 {
			t.Fatalf("carried after End: %d, want 1", got)
		}

		_, other := e.begin(t, task.Spec{Class: "insert"})
		if other.Penalty() != 0 {
			t.Errorf("a task of another class got %v", other.Penalty())
		}
		_, next := e.begin(t, task.Spec{Class: "report"})
		if next.Penalty() != 40*time.Millisecond {
			t.Errorf("next task of the class: penalty %v, want 40ms", next.Penalty())
		}
		_, third := e.begin(t, task.Spec{Class: "report"})
		if third.Penalty() != 0 || e.reg.Carried("report") != 0 {
			t.Errorf("one carried penalty served twice: %v, %d left", third.Penalty(), e.reg.Carried("report"))
		}

		// Served, cancelled and unclassed tasks leave nothing.
		ctx, served := e.begin(t, task.Spec{Class: "report"})
		served.Penalize(time.Millisecond)
		if err := served.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		served.End(nil)
		_, cancelled := e.begin(t, task.Spec{Class: "report", Cancellable: true})
		cancelled.Penalize(time.Millisecond)
		if err := cancelled.Cancel("test"); err != nil {
			t.Fatal(err)
		}
		cancelled.End(errors.New("cancelled"))
		_, anon := e.begin(t, task.Spec{})
		anon.Penalize(time.Millisecond)
		anon.End(nil)
		if got := e.reg.Carried("report") + e.reg.Carried(""); got != 0 {
			t.Errorf("carried %d after served, cancelled and unclassed tasks", got)
		}

		// A penalty decided on a task that ended before it was given.
		e.reg.LeavePenalty("report", 2*task.MaxPenalty)
		if _, tk := e.begin(t, task.Spec{Class: "report"}); tk.Penalty() != task.MaxPenalty {
			t.Errorf("left penalty: %v, want the bound %v", tk.Penalty(), task.MaxPenalty)
		}

		// An old penalty is forgotten.
		_, stale := e.begin(t, task.Spec{Class: "report"})
		stale.Penalize(time.Millisecond)
		stale.End(nil)
		e.sleep(task.CarryFor + time.Millisecond)
		_, late := e.begin(t, task.Spec{Class: "report"})
		if late.Penalty() != 0 {
			t.Errorf("a penalty older than CarryFor was served: %v", late.Penalty())
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
			tk.Penalize(time.Duration(i+1) * time.Millisecond)
			tk.End(nil)
		}
		if got := e.reg.Carried("bulk"); got != 16 {
			t.Fatalf("carried %d, want the bound 16", got)
		}
		_, tk := e.begin(t, task.Spec{Class: "bulk"})
		if tk.Penalty() != 40*time.Millisecond {
			t.Errorf("carried length %v, want the newest, 40ms", tk.Penalty())
		}
	})
}

// TestCarriedClassesBounded: penalties carried to later tasks are kept
// for at most 1,024 classes at once (classes come from requests); the
// penalties of further classes are counted and dropped.
func TestCarriedClassesBounded(t *testing.T) {
	reg := task.NewRegistry(nil, task.Options{})
	for i := range 1500 {
		reg.LeavePenalty(fmt.Sprintf("GET /users/%d", i), time.Millisecond)
	}
	if got := reg.Stats().CarryDropped; got != 1500-1024 {
		t.Errorf("CarryDropped = %d, want %d", got, 1500-1024)
	}
}
