package taskx

import (
	"context"
	"time"

	"github.com/moirai-go/moirai/internal/clock"
)

// The runtime's entry points: what the primitives of package resource,
// the controller, its snapshot builder and the middleware call on a task
// or a registry, and applications never do. They are functions, not
// exported methods, because package task declares [Task] and [Registry]
// as aliases of this package's types: an exported method here would be
// one of task.Task's methods, callable by every application. Each is a
// direct call of the method that does the work, which the compiler
// inlines.

// WaitBegin records that t starts waiting for resource id. Every WaitBegin
// is followed by one WaitEnd.
func WaitBegin(t *Task, id ResourceID) { t.waitBegin(id) }

// WaitEnd records that a wait begun by WaitBegin is over.
func WaitEnd(t *Task, id ResourceID) { t.waitEnd(id) }

// Acquire records that t now holds n more units of resource id; past
// [MaxUnits] it returns [ErrTooManyUnits] and changes nothing.
func Acquire(t *Task, id ResourceID, n int64) error { return t.acquire(id, n) }

// Release records that t gave back n units of resource id; releasing more
// than t holds returns [ErrOverRelease] and changes nothing.
func Release(t *Task, id ResourceID, n int64) error { return t.release(id, n) }

// Evicted records that t evicted n units of resource id that others used.
func Evicted(t *Task, id ResourceID, n int64) { t.evicted(id, n) }

// Claim makes sure t has an accounting entry for resource id, for a
// primitive that tracks its holds in progress itself.
func Claim(t *Task, id ResourceID) { t.claim(id) }

// AddHold adds a finished hold of d to t's accounting for resource id.
func AddHold(t *Task, id ResourceID, d time.Duration) { t.addHold(id, d) }

// Units returns the units of resource id in t's accounting, without the
// holds in progress that primitives track themselves.
func Units(t *Task, id ResourceID) int64 { return t.units(id) }

// Flagged reports whether t was cancelled, has a penalty to serve or its
// class to learn (see BeginWith): the one test a primitive makes
// before it acquires, one load of t's state word. It is false for a nil
// t.
func Flagged(t *Task) bool { return t.flagged() }

// ReadSlots stores t's accounting in dst, up to its length, without the
// holds in progress that primitives track themselves, and returns how many
// entries it stored.
func ReadSlots(t *Task, dst []Usage, now int64) int { return t.readSlots(dst, now) }

// Claimed returns how many resources t has touched (0 once it has ended).
func Claimed(t *Task) int { return t.claims() }

// EachUsage calls fn with t's accounting for every resource it touched,
// read at clock value now, holds in progress included.
func EachUsage(t *Task, now int64, fn func(Usage)) { t.eachUsage(now, fn) }

// AppendUsage appends what EachUsage reports to dst.
func AppendUsage(t *Task, dst []Usage, now int64) []Usage {
	t.eachUsage(now, func(u Usage) { dst = append(dst, u) })
	return dst
}

// UsageOf returns t's accounting for resource id now, and false if t
// never touched it.
func UsageOf(t *Task, id ResourceID) (Usage, bool) { return t.usage(id) }

// Holding reports whether t holds any unit of any instrumented resource.
func Holding(t *Task) bool { return t.holding() }

// Penalty returns the penalty t has yet to serve.
func Penalty(t *Task) time.Duration { return t.penalty() }

// PenaltyServed returns the time t has spent serving penalties.
func PenaltyServed(t *Task) time.Duration { return t.penaltyServed() }

// Penalties returns how many penalties t has served.
func Penalties(t *Task) int64 { return t.penalties() }

// Activities returns how many activities t has begun.
func Activities(t *Task) int64 { return t.activities() }

// ExecTime returns t's execution time at clock value now.
func ExecTime(t *Task, now int64) time.Duration { return t.execTime(now) }

// Started returns the clock value at which t began.
func Started(t *Task) int64 { return t.started() }

// Ended reports whether t has ended.
func Ended(t *Task) bool { return t.ended() }

// Active reports whether t is in an activity (not frozen, not ended).
func Active(t *Task) bool { return t.active() }

// ProgressOf returns the last progress t reported.
func ProgressOf(t *Task) (done, total int64) { return t.progressOf() }

// Cancel cancels t on the controller's behalf, with reason.
func Cancel(t *Task, reason string) error { return t.cancel(reason, nil) }

// CancelBecause cancels t on the controller's behalf, with reason and a
// cause that the context's cause wraps beside [ErrCancelled].
func CancelBecause(t *Task, reason string, because error) error { return t.cancel(reason, because) }

// Penalize asks t to pause for d at its next safe point.
func Penalize(t *Task, d time.Duration) { t.penalize(d) }

// Refine replaces t's spec with s, as an inner layer of middleware nested
// in the one that began t does with its own route's options; it reports
// false, changing nothing, when t is nil, cancelled or ended.
func Refine(t *Task, s Spec) bool { return t.refine(s) }

// Parent returns the context t was begun from.
func Parent(t *Task) context.Context { return t.parent() }

// Owner returns the registry t was begun in, nil for a nil t.
func Owner(t *Task) *Registry {
	if t == nil {
		return nil
	}
	return t.reg
}

// NewRegistry returns an empty registry reading time from clk (the
// controller's coarse clock); a nil clk is a clock of its own.
func NewRegistry(clk *clock.Clock, o Options) *Registry { return newRegistry(clk, o) }

// Clock returns the clock r reads.
func Clock(r *Registry) *clock.Clock { return r.clock }

// AppendLive appends every live task of r to dst.
func AppendLive(r *Registry, dst []*Task) []*Task { return r.appendLive(dst) }

// CheckUnended evicts t from r, and reports true, if its context has been
// done for longer than grace without End.
func CheckUnended(r *Registry, t *Task, now int64, grace time.Duration) bool {
	return r.checkUnended(t, now, grace)
}

// LeavePenalty leaves a penalty of d to the next task of the class to
// begin in r.
func LeavePenalty(r *Registry, class string, d time.Duration) { r.leavePenalty(class, d) }

// Carried returns how many penalties wait in r for a task of the class.
func Carried(r *Registry, class string) int { return r.carriedFor(class) }

// HolderTagBits is the width of a holder tag (see [HolderTag]).
const HolderTagBits = 29

// HolderTag returns the tag by which a primitive that tracks its holder
// itself (resource.Mutex, the controller's semaphores) names the task with
// the given ID: the low 29 bits of the ID. Tasks whose IDs differ by a
// multiple of 2²⁹ share a tag; 0 names no task.
func HolderTag(id uint64) uint64 { return id & (1<<HolderTagBits - 1) }
