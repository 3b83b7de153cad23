package taskx

import (
	"context"
	"time"

	"github.com/moirai-go/moirai/internal/sleep"
)

// statePenalized marks a task with a penalty to serve (see Task.penalize).
// It lives in the state word the primitives already load to see whether
// the task was cancelled, so an unpenalized task pays nothing for it.
const statePenalized = 1 << 5

// MaxPenalty bounds any single penalty the controller gives a task.
const MaxPenalty = time.Second

// flagged reports whether the task was cancelled, has a penalty to serve
// or its class to learn (pending.go): the one test the instrumented
// primitives make before they acquire.
func (t *Task) flagged() bool {
	return t != nil && t.state.Load()&(stateCancelled|statePenalized|statePending) != 0
}

// penalize asks the task to pause for d (at most [MaxPenalty]) at its next
// safe point: the next time it acquires an instrumented resource, or begins
// an activity, while holding none (pBox's penalty). A new penalty replaces
// one not yet served. A penalty still pending when the task ends passes to
// the next task of its class to begin, within [CarryFor]. Penalize does nothing on a nil, ended or cancelled
// task (a cancelled task's penalties are dropped) and for d ≤ 0. It is
// safe for concurrent use; policies never call it directly: the controller
// does.
func (t *Task) penalize(d time.Duration) {
	if t == nil || d <= 0 {
		return
	}
	d = min(d, MaxPenalty)
	if t.state.Load()&(stateEnded|stateCancelled) != 0 {
		return
	}
	t.meta().penalty.Store(int64(d))
	t.state.Or(statePenalized)
	if t.state.Load()&(stateEnded|stateCancelled) != 0 {
		t.dropPenalty()
	}
	t.clearIfEnded()
}

// dropPenalty forgets a penalty not yet served.
func (t *Task) dropPenalty() {
	if t.state.Load()&statePenalized != 0 {
		t.state.And(^uint32(statePenalized))
	}
	t.blk.meta.penalty.Store(0)
}

// penalty returns the length of the penalty the task has yet to serve, 0 if
// none (or once the task has ended).
func (t *Task) penalty() time.Duration {
	if t == nil || t.state.Load()&(statePenalized|stateEnded) != statePenalized {
		return 0
	}
	return time.Duration(t.blk.meta.penalty.Load())
}

// penaltyServed returns the time the task has spent serving penalties (0
// once the task has ended). It does not count as execution time.
func (t *Task) penaltyServed() time.Duration {
	if t == nil || t.ended() {
		return 0
	}
	return time.Duration(t.blk.meta.served.Load())
}

// penalties returns how many penalties the task has served.
func (t *Task) penalties() int64 {
	if t == nil || t.ended() {
		return 0
	}
	return t.blk.meta.penalties.Load()
}

// holding reports whether the task holds any unit of any instrumented
// resource, including the locks whose holder the primitive tracks itself.
// It reads every slot of the task: it is for safe points, not hot paths.
func (t *Task) holding() bool {
	if t == nil || t.ended() {
		return false
	}
	held := false
	t.eachUsage(t.reg.clock.Now(), func(u Usage) {
		if u.Held > 0 {
			held = true
		}
	})
	return held
}

// TakePenalty claims the task's pending penalty if the task is at a safe
// point (it holds nothing) and returns its length; it returns 0, leaving
// the penalty pending, while the task holds something. Call it in a worker
// that serves many tasks (an event loop, a pool), where [Task.Pause] would
// put the shared worker to sleep: before the worker runs a task's next
// activity; and, when it returns d > 0, puts the task back in its queue for
// d instead of sleeping the shared worker (pBox's unbind mode); the time is
// counted as served. Safe for concurrent use; at most one caller gets a
// given penalty.
func (t *Task) TakePenalty() time.Duration {
	if t == nil {
		return 0
	}
	s := t.state.Load()
	if s&statePenalized == 0 || s&stateEnded != 0 {
		return 0
	}
	if s&stateCancelled != 0 {
		t.dropPenalty()
		return 0
	}
	if t.holding() {
		return 0 // never while holding what victims need
	}
	if !t.state.CompareAndSwap(s, s&^statePenalized) {
		return 0 // a concurrent taker won, or the state moved: next time
	}
	d := time.Duration(t.blk.meta.penalty.Swap(0))
	if d <= 0 {
		return 0
	}
	t.blk.meta.served.Add(int64(d))
	t.blk.meta.penalties.Add(1)
	t.clearIfEnded()
	return d
}

// Pause is the safe point of a task on its own goroutine: if the task has
// a penalty pending and holds nothing, Pause sleeps for it, returning early
// with context.Cause(ctx) if ctx is done. Otherwise it returns nil at once.
// The instrumented primitives call it before they acquire; call it yourself
// at the top of a loop that does heavy work without them (a scan, a batch),
// so that a penalty the controller gives the task is served there.
func (t *Task) Pause(ctx context.Context) error {
	d := t.TakePenalty()
	if d <= 0 {
		return nil
	}
	return sleep.For(ctx, d)
}
