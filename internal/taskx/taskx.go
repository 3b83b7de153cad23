// Package taskx is how the runtime's packages (the controller, the
// snapshot builder, the primitives of package resource, the middleware and
// the tests) reach the parts of a task that applications never call. Each
// function is the unexported method of package task it names, typed here
// once from internal/taskrt; see the methods' comments in package task for
// what each does.
package taskx

import (
	"context"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/moirai-go/moirai/internal/clock"
	"github.com/moirai-go/moirai/internal/taskrt"
	"github.com/moirai-go/moirai/task"
)

var h = taskrt.Get[task.Task, task.Usage, task.ResourceID, task.Registry, task.Options, clock.Clock, task.Spec]()

// WaitBegin records that t starts waiting for resource id. Every WaitBegin
// is followed by one WaitEnd.
func WaitBegin(t *task.Task, id task.ResourceID) { h.WaitBegin(t, id) }

// WaitEnd records that a wait begun by WaitBegin is over.
func WaitEnd(t *task.Task, id task.ResourceID) { h.WaitEnd(t, id) }

// Acquire records that t now holds n more units of resource id; past
// task.MaxUnits it returns task.ErrTooManyUnits and changes nothing.
func Acquire(t *task.Task, id task.ResourceID, n int64) error { return h.Acquire(t, id, n) }

// Release records that t gave back n units of resource id; releasing more
// than t holds returns task.ErrOverRelease and changes nothing.
func Release(t *task.Task, id task.ResourceID, n int64) error { return h.Release(t, id, n) }

// Evicted records that t evicted n units of resource id that others used.
func Evicted(t *task.Task, id task.ResourceID, n int64) { h.Evicted(t, id, n) }

// Claim makes sure t has an accounting entry for resource id, for a
// primitive that tracks its holds in progress itself.
func Claim(t *task.Task, id task.ResourceID) { h.Claim(t, id) }

// AddHold adds a finished hold of d to t's accounting for resource id.
func AddHold(t *task.Task, id task.ResourceID, d time.Duration) { h.AddHold(t, id, d) }

// Units returns the units of resource id in t's accounting, without the
// holds in progress that primitives track themselves.
func Units(t *task.Task, id task.ResourceID) int64 { return h.Units(t, id) }

// Flagged reports whether t was cancelled or has a penalty to serve: one
// load of t's state word, inline, on every acquisition of an instrumented
// primitive (TestFlaggedInline checks it agrees with the method).
func Flagged(t *task.Task) bool {
	return t != nil && (*atomic.Uint32)(unsafe.Add(unsafe.Pointer(t), stateOffset)).Load()&flagBits != 0
}

// FlaggedSlow is Flagged through package task's method, for the test that
// the two agree.
func FlaggedSlow(t *task.Task) bool { return h.Flagged(t) }

var stateOffset, flagBits = h.StateOffset, h.FlagBits

// ReadSlots stores t's accounting in dst, up to its length, without the
// holds in progress that primitives track themselves, and returns how many
// entries it stored.
func ReadSlots(t *task.Task, dst []task.Usage, now int64) int { return h.ReadSlots(t, dst, now) }

// Claimed returns how many resources t has touched (0 once it has ended).
func Claimed(t *task.Task) int { return h.Claimed(t) }

// EachUsage calls fn with t's accounting for every resource it touched,
// read at clock value now, holds in progress included.
func EachUsage(t *task.Task, now int64, fn func(task.Usage)) { h.EachUsage(t, now, fn) }

// AppendUsage appends what EachUsage reports to dst.
func AppendUsage(t *task.Task, dst []task.Usage, now int64) []task.Usage {
	h.EachUsage(t, now, func(u task.Usage) { dst = append(dst, u) })
	return dst
}

// Usage returns t's accounting for resource id now, and false if t never
// touched it.
func Usage(t *task.Task, id task.ResourceID) (task.Usage, bool) { return h.Usage(t, id) }

// Holding reports whether t holds any unit of any instrumented resource.
func Holding(t *task.Task) bool { return h.Holding(t) }

// Penalty returns the penalty t has yet to serve.
func Penalty(t *task.Task) time.Duration { return h.Penalty(t) }

// PenaltyServed returns the time t has spent serving penalties.
func PenaltyServed(t *task.Task) time.Duration { return h.PenaltyServed(t) }

// Penalties returns how many penalties t has served.
func Penalties(t *task.Task) int64 { return h.Penalties(t) }

// Activities returns how many activities t has begun.
func Activities(t *task.Task) int64 { return h.Activities(t) }

// ExecTime returns t's execution time at clock value now.
func ExecTime(t *task.Task, now int64) time.Duration { return h.ExecTime(t, now) }

// Started returns the clock value at which t began.
func Started(t *task.Task) int64 { return h.Started(t) }

// Ended reports whether t has ended.
func Ended(t *task.Task) bool { return h.Ended(t) }

// Active reports whether t is in an activity (not frozen, not ended).
func Active(t *task.Task) bool { return h.Active(t) }

// ProgressOf returns the last progress t reported.
func ProgressOf(t *task.Task) (done, total int64) { return h.ProgressOf(t) }

// Cancel cancels t on the controller's behalf, with reason.
func Cancel(t *task.Task, reason string) error { return h.Cancel(t, reason, nil) }

// CancelBecause cancels t on the controller's behalf, with reason and a
// cause that the context's cause wraps beside ErrCancelled.
func CancelBecause(t *task.Task, reason string, because error) error {
	return h.Cancel(t, reason, because)
}

// Penalize asks t to pause for d at its next safe point.
func Penalize(t *task.Task, d time.Duration) { h.Penalize(t, d) }

// Refine replaces t's spec with s, as an inner layer of middleware nested
// in the one that began t does with its own route's options; it reports
// false, changing nothing, when t is nil, cancelled or ended.
func Refine(t *task.Task, s task.Spec) bool { return h.Refine(t, s) }

// Parent returns the context t was begun from.
func Parent(t *task.Task) context.Context { return h.Parent(t) }

// Owner returns the registry t was begun in, nil for a nil t.
func Owner(t *task.Task) *task.Registry {
	if t == nil {
		return nil
	}
	return h.Owner(t)
}

// NewRegistry returns an empty registry reading time from clk (the
// controller's coarse clock).
func NewRegistry(clk *clock.Clock, o task.Options) *task.Registry { return h.NewRegistry(clk, o) }

// Clock returns the clock r reads.
func Clock(r *task.Registry) *clock.Clock { return h.Clock(r) }

// AppendLive appends every live task of r to dst.
func AppendLive(r *task.Registry, dst []*task.Task) []*task.Task { return h.AppendLive(r, dst) }

// CheckUnended evicts t from r, and reports true, if its context has been
// done for longer than grace without End.
func CheckUnended(r *task.Registry, t *task.Task, now int64, grace time.Duration) bool {
	return h.CheckUnended(r, t, now, grace)
}

// LeavePenalty leaves a penalty of d to the next task of the class to
// begin in r.
func LeavePenalty(r *task.Registry, class string, d time.Duration) { h.LeavePenalty(r, class, d) }

// Carried returns how many penalties wait in r for a task of the class.
func Carried(r *task.Registry, class string) int { return h.Carried(r, class) }

// HolderTag is taskrt.HolderTag.
func HolderTag(id uint64) uint64 { return taskrt.HolderTag(id) }
