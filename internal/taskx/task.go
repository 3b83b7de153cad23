package taskx

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// ErrCancelled is the cause with which the controller cancels a task's
// context. errors.Is(context.Cause(ctx), ErrCancelled) tells a handler that
// moirai picked its task; ctx.Err() is then context.Canceled.
var ErrCancelled = errors.New("moirai: task cancelled by the overload controller")

// ErrUnended is the outcome recorded for a task the registry evicted
// because its context had ended long before without End.
var ErrUnended = errors.New("task: evicted: its context ended long ago without End")

const (
	stateEnded     = 1 << 0
	stateCancelled = 1 << 1
	stateFrozen    = 1 << 2
	stateUnended   = 1 << 3 // reported as never ended
	stateMeta      = 1 << 4 // blk.meta has been written
	claimedOne     = 1 << 8 // one claimed slot, in the state word
)

// claimed returns how many slots of blk the task has claimed.
func (t *Task) claimed() int { return int(t.state.Load() >> 8) }

// meta returns the task's rarely used state for writing, marking it used.
func (t *Task) meta() *blockMeta {
	if t.state.Load()&stateMeta == 0 {
		t.state.Or(stateMeta)
	}
	return &t.blk.meta
}

// actStart returns the clock value at which the current activity began.
func (t *Task) actStart() int64 {
	if v := t.blk.meta.actStart.Load(); v != 0 {
		return v
	}
	return t.begin
}

// Task is one unit of work the runtime accounts for: a request, a
// connection serving many requests, or a background job. A Task is created
// by [Registry.Begin] and lives until [Task.End]; its context is cancelled
// with cause [ErrCancelled] if the controller picks it.
//
// Most handlers call only [Task.End] (deferred, right after Begin) and,
// for long work, [Task.Progress]. The other methods are for particular
// shapes of service:
//
//   - a connection or session that serves many requests: [Task.Freeze]
//     between requests, [Task.Activate] at the start of each;
//   - work the application can abort itself (a query on another server, a
//     job on a worker): [Task.OnCancel], and [Task.Cancelled] to tell a
//     cancellation from other errors;
//   - code that waits or loops without an instrumented primitive: a safe
//     point for penalties, [Task.Pause] on the task's own goroutine, or
//     [Task.TakePenalty] in a worker that serves many tasks;
//   - logging and middleware: [Task.ID], [Task.Spec], [Task.Context],
//     [Task.MarkAdmittedDownstream] and [Task.AdmittedDownstream].
//
// The events the instrumented primitives emit and the controller's readings
// and actions are not methods: applications emit events through package
// resource, and read the runtime's view of their tasks in its snapshots.
//
// All methods are safe for concurrent use, and all are no-ops on a nil
// *Task, so code can call task.FromContext(ctx).Progress(...) whether or not
// the context carries a task.
type Task struct {
	// Fields holding pointers come first, so the collector scans a short
	// prefix of the object.
	reg  *Registry
	ctx  taskCtx
	lazy atomic.Pointer[cancelPair] // the cancellable context, once used
	spec Spec

	// blk holds the task's resource accounting. It comes from the
	// registry's recycled blocks at Begin and goes back at End (see
	// Registry.Rotate), after which the task's state says ended and
	// nothing reads it through this task.
	blk *slotBlock
	// rare holds the cancel hooks and the cancellation reason, allocated
	// the first time either is needed.
	rare atomic.Pointer[rareState]
	// refined is the spec an inner layer of middleware refined the task
	// to (see Task.refine), or its Resolver gave it (pending.go), nil
	// until either does.
	refined atomic.Pointer[Spec]
	// pend holds the Resolver of a task begun before its class was known
	// until it runs (pending.go).
	pend atomic.Pointer[Pending]

	id    uint64
	begin int64 // clock value at Begin
	// state holds the state bits (low byte) and the number of slots of
	// blk claimed (above it).
	state atomic.Uint32
	idx   int32  // position in the shard's list, guarded by its lock
	shard uint32 // the shard's index in the registry (Registry.lockShard)
}

// rareState is what few tasks need: cancel hooks and a cancellation
// reason.
type rareState struct {
	mu     sync.Mutex
	hooks  []*hook
	fired  bool
	reason atomic.Pointer[cancelError]
}

// rareState returns the task's rare state, allocating it on first use.
func (t *Task) rareState() *rareState {
	if rs := t.rare.Load(); rs != nil {
		return rs
	}
	t.rare.CompareAndSwap(nil, new(rareState))
	return t.rare.Load()
}

type hook struct{ fn func() }

// ID returns the task's identifier, unique within its registry and never 0
// (0 on a nil task). Call it to name the task in logs and traces: it is the
// ID the debug page, the snapshots and the controller's decisions use.
func (t *Task) ID() uint64 {
	if t == nil {
		return 0
	}
	return t.id
}

// Spec returns the spec the task began with, after defaults were applied,
// or the one an inner layer of middleware refined it to since (the zero
// Spec on a nil task). Middleware calls it to read the class, key or
// priority a handler's task was begun with.
func (t *Task) Spec() Spec {
	if t == nil {
		return Spec{}
	}
	if t.state.Load()&statePending != 0 {
		t.settle(false, false) // the class, read without the task's work (pending.go)
	}
	return *t.specRef()
}

// specRef returns the task's current spec, not to be modified.
func (t *Task) specRef() *Spec {
	if p := t.refined.Load(); p != nil {
		return p
	}
	return &t.spec
}

// refine replaces the task's spec with s, its invalid fields defaulted:
// an inner layer of middleware, nested in an outer one that began the
// task, applies its own route's options (class, objective, kind,
// cancellability) to the task rather than beginning a second one. The
// controller's next snapshot, the learners at End and the cancellation's
// check of Cancellable see the refined spec. A task already cancelled or
// ended keeps its spec; refine reports whether it took s.
func (t *Task) refine(s Spec) bool {
	Settled(t) // a refinement replaces the class it would give
	if t == nil || t.state.Load()&(stateEnded|stateCancelled) != 0 {
		return false
	}
	if err := s.normalize(); err != nil {
		t.reg.invalidSpecs.Add(1)
		t.reg.report(err)
	}
	t.refined.Store(&s)
	return true
}

// parent returns the context the task was begun from: what a run of the
// same work after the task's cancellation starts from.
func (t *Task) parent() context.Context { return t.ctx.parent }

// Context returns the task's own context: the one Begin returned, which is
// cancelled when the controller cancels the task. Call it where work for
// the task runs under another context (one [NewContext] made, or a
// worker's), to wait on the task's cancellation there.
func (t *Task) Context() context.Context {
	if t == nil {
		return context.Background()
	}
	return &t.ctx
}

// started returns the clock value at which the task began.
func (t *Task) started() int64 {
	if t == nil {
		return 0
	}
	return t.begin
}

// ended reports whether End has been called.
func (t *Task) ended() bool { return t != nil && t.state.Load()&stateEnded != 0 }

// Cancelled reports whether the controller has cancelled the task. Call it
// where an error ends the work, to tell a cancellation by moirai from other
// failures (for a metric, a retry, a status code); errors.Is on
// context.Cause of the task's context with [ErrCancelled] says the same.
func (t *Task) Cancelled() bool { return t != nil && t.state.Load()&stateCancelled != 0 }

// Progress reports that done of total units of work are complete (the
// GetNext model: rows returned of rows expected, bytes sent of bytes to
// send). Call it from long work, as it advances: the estimator uses it to
// predict how much more of each resource the task will use, and a task
// that reports none is estimated from its class. Values outside
// 0 ≤ done ≤ total are clamped; a call after End does nothing.
func (t *Task) Progress(done, total int64) {
	if t == nil || t.ended() {
		return
	}
	if total < 0 {
		total = 0
	}
	done = min(max(done, 0), total)
	m := t.meta()
	m.total.Store(total)
	m.done.Store(done)
	t.clearIfEnded()
}

// progressOf returns the last progress the task reported (0, 0 if none,
// or if the task has ended).
func (t *Task) progressOf() (done, total int64) {
	if t == nil || t.ended() {
		return 0, 0
	}
	return t.blk.meta.done.Load(), t.blk.meta.total.Load()
}

// Freeze ends the task's current activity: until [Task.Activate], time does
// not count as the task's execution time. Call it when a task that spans
// many requests (a connection, a session) goes idle between two of them
// (pBox's freeze). Freezing a frozen task does nothing.
func (t *Task) Freeze() {
	if t == nil {
		return
	}
	for {
		s := t.state.Load()
		if s&(stateFrozen|stateEnded) != 0 {
			return
		}
		if t.state.CompareAndSwap(s, s|stateFrozen|stateMeta) {
			if d := t.reg.clock.Now() - t.actStart(); d > 0 {
				t.blk.meta.exec.Add(d)
			}
			t.clearIfEnded()
			return
		}
	}
}

// Activate starts a new activity of a frozen task (pBox's activate). Call
// it when a connection-scoped task frozen by [Task.Freeze] begins serving
// its next request. Activating an active task does nothing.
func (t *Task) Activate() {
	if t == nil {
		return
	}
	for {
		s := t.state.Load()
		if s&stateFrozen == 0 || s&stateEnded != 0 {
			return
		}
		t.meta().actStart.Store(t.reg.clock.Now())
		if t.state.CompareAndSwap(s, s&^stateFrozen) {
			t.blk.meta.extra.Add(1)
			t.clearIfEnded()
			return
		}
		if t.ended() {
			t.clearIfEnded()
			return
		}
	}
}

// clearIfEnded clears what a call that raced End wrote into the task's
// block after End cleared it, so the block's next task starts clean. (The
// block is reused no sooner than a quarter tick after End, far longer than
// the race.)
func (t *Task) clearIfEnded() {
	if t.ended() {
		t.blk.meta.clear()
	}
}

// active reports whether the task is in an activity (not frozen, not ended).
func (t *Task) active() bool {
	return t != nil && t.state.Load()&(stateFrozen|stateEnded) == 0
}

// activities returns how many activities the task has begun, counting the
// one Begin starts (0 once the task has ended).
func (t *Task) activities() int64 {
	if t == nil || t.ended() {
		return 0
	}
	return 1 + t.blk.meta.extra.Load()
}

// execTime returns the task's execution time at clock value now: the time
// spent in activities, including the current one, less the penalties served
// (0 once the task has ended).
func (t *Task) execTime(now int64) time.Duration {
	if t == nil || t.ended() {
		return 0
	}
	e := t.blk.meta.exec.Load() - t.blk.meta.served.Load()
	if t.state.Load()&(stateFrozen|stateEnded) == 0 {
		if d := now - t.actStart(); d > 0 {
			e += d
		}
	}
	return time.Duration(e)
}

// OnCancel registers fn as the application's own cancellation initiator
// (Atropos' setCancelAction). Call it when cancelling the task's context is
// not enough to stop its work: a query running on a database server, a job
// handed to another process. When the controller cancels the task it
// cancels the task's context and then calls every registered fn, each at
// most once, in its own goroutine and outside every runtime lock. A panic in
// fn is recovered and reported; a fn that blocks is reported and does not
// hold up the controller. If the task has already been cancelled, fn is
// called at once (in its own goroutine). The returned stop function
// unregisters fn and reports whether it did so before fn was called.
func (t *Task) OnCancel(fn func()) (stop func() bool) {
	if t == nil || fn == nil {
		return func() bool { return false }
	}
	hs := t.rareState()
	h := &hook{fn: fn}
	hs.mu.Lock()
	if hs.fired || t.state.Load()&stateCancelled != 0 {
		hs.mu.Unlock()
		t.reg.runHook(t, h)
		return func() bool { return false }
	}
	hs.hooks = append(hs.hooks, h)
	hs.mu.Unlock()
	return func() bool {
		hs.mu.Lock()
		defer hs.mu.Unlock()
		for i, x := range hs.hooks {
			if x == h {
				hs.hooks = append(hs.hooks[:i], hs.hooks[i+1:]...)
				return true
			}
		}
		return false
	}
}

// cancel cancels the task on the controller's behalf: the task is marked
// cancelled, its context is cancelled with cause [ErrCancelled] wrapped in
// reason (when reason is non-empty) and with because (when non-nil: what
// the cause also wraps, such as a tree.Culprit from a downstream), and its
// OnCancel hooks are started.
// Cancel refuses, returning an error and changing nothing, a task that is
// not cancellable, already cancelled, or ended. Policies never call it
// directly: the controller does, after its safety checks.
func (t *Task) cancel(reason string, because error) error {
	if t == nil {
		return errors.New("task: cancel of a nil task")
	}
	if !t.specRef().Cancellable {
		return fmt.Errorf("task: %d is not cancellable", t.id)
	}
	if t.ended() {
		return fmt.Errorf("task: %d has ended", t.id)
	}
	// The first Cancel to record its reason is the one that cancels, so
	// the cause always carries the reason of the cancellation that won.
	rs := t.rareState()
	if !rs.reason.CompareAndSwap(nil, &cancelError{reason: reason, because: because}) {
		return fmt.Errorf("task: %d is already cancelled", t.id)
	}
	for {
		s := t.state.Load()
		if s&stateEnded != 0 {
			return fmt.Errorf("task: %d has ended", t.id)
		}
		if t.state.CompareAndSwap(s, (s|stateCancelled)&^statePenalized) {
			break
		}
	}
	// The hooks run after the context is done, so create it if nobody has
	// yet: a hook that looks at the context must find it cancelled.
	t.cancelCtx().cancel(t.cause())
	t.reg.cancelled.Add(1)
	rs.mu.Lock()
	hooks := rs.hooks
	rs.hooks, rs.fired = nil, true
	rs.mu.Unlock()
	for _, h := range hooks {
		t.reg.runHook(t, h)
	}
	return nil
}

// cause returns the cause with which the task's context is cancelled.
func (t *Task) cause() error {
	if rs := t.rare.Load(); rs != nil {
		if r := rs.reason.Load(); r != nil && (r.reason != "" || r.because != nil) {
			return r
		}
	}
	return ErrCancelled
}

// cancelError is ErrCancelled with the controller's reason attached, and
// what else the cancellation is because of.
type cancelError struct {
	reason  string
	because error
}

func (e *cancelError) Error() string {
	if e.reason == "" {
		return ErrCancelled.Error() + ": " + e.because.Error()
	}
	return ErrCancelled.Error() + ": " + e.reason
}

func (e *cancelError) Unwrap() []error {
	if e.because == nil {
		return []error{ErrCancelled}
	}
	return []error{ErrCancelled, e.because}
}

// End ends the task: it leaves the registry, its accounting is folded into
// the resources' totals, its latency is recorded, and its context is
// released. Every task must be ended: defer End right after Begin. err is
// the outcome of the work (nil for success). End is idempotent: a second
// call does nothing but count the mistake. Events after End are counted and
// dropped.
func (t *Task) End(err error) {
	if t == nil {
		return
	}
	if t.state.Load()&statePending != 0 {
		t.settle(true, true) // statePending is cleared below
	}
	for {
		s := t.state.Load()
		if s&stateEnded != 0 {
			if s&stateUnended == 0 { // an evicted task's late End is no mistake
				t.reg.endedTwice.Add(1)
			}
			if s&statePending != 0 {
				t.state.And(^uint32(statePending))
			}
			return
		}
		if t.state.CompareAndSwap(s, (s|stateEnded)&^statePending) {
			now := t.reg.clock.Now()
			if s&(statePenalized|stateCancelled) == statePenalized {
				// Ended before its next safe point: the next task of its
				// class serves the penalty (see carry.go).
				t.reg.carry.leave(t.specRef().Class, time.Duration(t.blk.meta.penalty.Load()), now)
			}
			t.reg.end(t, now, err, s)
			if p := t.lazy.Load(); p != nil {
				p.cancel(nil)
			}
			return
		}
	}
}

// runHook runs a hook in a goroutine of its own, recovering a panic and
// reporting the hook if it is still running after the registry's hook
// timeout.
func (r *Registry) runHook(t *Task, h *hook) {
	r.hooksRunning.Add(1)
	go func() {
		defer r.hooksRunning.Add(-1)
		r.callHook(t, h)
	}()
}

func (r *Registry) callHook(t *Task, h *hook) {
	finished := make(chan struct{})
	var watchdog *time.Timer
	if r.hookTimeout > 0 {
		watchdog = time.AfterFunc(r.hookTimeout, func() {
			select {
			case <-finished:
			default:
				r.hookBlocked.Add(1)
				r.report(fmt.Errorf("task: cancel hook of task %d (%s) still running after %v", t.id, t.specRef().Class, r.hookTimeout))
			}
		})
	}
	defer func() {
		close(finished)
		if watchdog != nil {
			watchdog.Stop()
		}
		if v := recover(); v != nil {
			r.hookPanics.Add(1)
			r.report(fmt.Errorf("task: cancel hook of task %d (%s) panicked: %v\n%s", t.id, t.specRef().Class, v, debug.Stack()))
		}
	}()
	h.fn()
}
