package moirai_test

import (
	"context"
	"runtime"
	"testing"
	"weak"

	"github.com/moirai-go/moirai"
)

// TestLoopKeepsNoEndedTask: the loop's list of the live tasks is reused
// from step to step; the tasks a step saw that have ended since are not
// kept alive by it once the next step has run, whatever the live count did
// in between. A task's object may hold more than the task (httpmw keeps
// the request carrying the task's context in it: taskx.BeginWith), so a
// stale list would keep requests alive too.
func TestLoopKeepsNoEndedTask(t *testing.T) {
	ctl := moirai.New(moirai.WithoutMechanisms())
	defer ctl.Close()
	const spike = 500
	tasks := make([]*moirai.Task, spike)
	seen := make([]weak.Pointer[moirai.Task], spike)
	for i := range tasks {
		_, tasks[i] = ctl.Begin(context.Background(), moirai.Spec{Class: "spike"})
		seen[i] = weak.Make(tasks[i])
	}
	ctl.StepForTest() // the loop's list holds the spike
	for i := range tasks {
		tasks[i].End(nil)
		tasks[i] = nil
	}
	_, keep := ctl.Begin(context.Background(), moirai.Spec{Class: "calm"})
	defer keep.End(nil)
	ctl.StepForTest() // one live task: the list shrinks
	for range 3 {
		runtime.GC()
	}
	alive := 0
	for _, w := range seen {
		if w.Value() != nil {
			alive++
		}
	}
	if alive > 0 {
		t.Errorf("%d of %d ended tasks still reachable after the next step", alive, spike)
	}
}
