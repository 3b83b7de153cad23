package moirai

import (
	"context"
	"time"

	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/task"
)

// What instrumentation outside the core reads about a task while its
// request runs (package otelmoirai puts it on the request's span): the
// decisions on it ([Controller.DecisionsOn]), the penalties it served
// ([PenaltyServed]) and, for a re-execution, the run it replaces
// ([ReexecutionOf]). The decisions also reach observers
// ([WithDecisionObserverContext]) with the task's context, and carry the
// trace id [WithTraceID] reads from it.

// UsageOf calls fn with t's use so far of each resource t touched, by
// the resource's name: its waits and holds (a hold in progress counted to
// now), in the order it first touched them. Call it from the task's own
// goroutine before End, when its work is over, to record what the task
// waited for and held (package otelmoirai's histograms): after End, or on
// a nil task or one of another controller, it calls fn for nothing. It
// reads the task's lock-free counters and takes no lock of the
// controller's.
func (c *Controller) UsageOf(t *Task, fn func(resource string, u task.Usage)) {
	if t == nil || taskx.Owner(t) != c.tasks || taskx.Ended(t) {
		return
	}
	taskx.EachUsage(t, c.clock.Now(), func(u task.Usage) {
		if r := c.res.ByID(u.Resource); r != nil {
			fn(r.Name(), u)
		}
	})
}

// PenaltyServed returns the time t has spent serving penalties so far
// (pBox's delays at its safe points, which its execution time does not
// count), 0 for a nil task or once t has ended: read it from the task's
// own goroutine, before End. A penalty decided on a task that ended
// before serving it is served by the next task of its class, and counts
// there.
func PenaltyServed(t *Task) time.Duration { return taskx.PenaltyServed(t) }

// Reexecution describes a task that re-executes a cancelled run (see
// [Retry]).
type Reexecution struct {
	// Replaces is the ID of the cancelled task whose run this one
	// re-executes.
	Replaces uint64
	// Began is the context the cancelled task was begun from: its
	// request's values, such as the span the run belonged to.
	Began context.Context
	// FirstRun is when the cancelled run began.
	FirstRun time.Time
}

// reexecKey is the context key under which a re-execution's task finds
// what it replaces.
type reexecKey struct{}

// ReexecutionOf reports whether the task of ctx is a re-execution, and
// of what: [Retry] (and the middlewares' re-execution) begin the
// re-execution's task from a context that carries it. It costs a context
// lookup; call it once per run, not on a hot path.
func ReexecutionOf(ctx context.Context) (Reexecution, bool) {
	r, ok := ctx.Value(reexecKey{}).(*Reexecution)
	if !ok || r == nil {
		return Reexecution{}, false
	}
	return *r, true
}
