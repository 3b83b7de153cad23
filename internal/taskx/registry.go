package taskx

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/moirai-go/moirai/internal/clock"
	"github.com/moirai-go/moirai/latency"
)

// shardsPerCPU sets the number of independently locked parts of a
// registry: sixteen per GOMAXPROCS at creation, rounded up to a power of
// two. A core keeps to the shard of the page it allocates tasks from
// (pageShift), so two cores meet on one lock only while their pages fall
// in the same shard: one time in 32 on two cores. With four per
// GOMAXPROCS, one in 8, the shards' locks took 4 % of a parallel
// request's CPU time in a profile of httpmw's BenchmarkRequest, 1.5 %
// with sixteen. The controller's step merges every shard's totals (a
// histogram of 280 buckets each).
const shardsPerCPU = 16

// pageShift is log2 of the runtime's page size (8 KiB). A task lives in
// the shard of the page its memory lies in (lockShard; the next shard
// when that one is full). The allocator hands
// each P the objects of pages of its own (its cache's spans), so the
// tasks a core begins and ends meet on a shard the other cores seldom use
// at the same time: shards taken in turn by task had every core write
// every shard's lock and lists in turn, each write a cache line taken
// from another core.
const pageShift = 13

// Registry holds the live tasks of one controller. Begin and End are O(1)
// and take one of several shard locks, never a global one; the controller
// iterates the live tasks shard by shard without stopping anyone else. It
// is safe for concurrent use.
type Registry struct {
	clock       *clock.Clock
	onEnd       func(*Task, int64, []Usage)
	liveHold    func(ResourceID, uint64, int64) (time.Duration, bool)
	report      func(error)
	hookTimeout time.Duration
	objective   time.Duration

	shards   []shard
	mask     uint64
	maxShard int // live tasks a shard holds at most

	cancelled    atomic.Int64
	endedTwice   atomic.Int64
	lateEvents   atomic.Int64
	badEvents    atomic.Int64
	invalidSpecs atomic.Int64
	hookPanics   atomic.Int64
	hookBlocked  atomic.Int64
	hooksRunning atomic.Int64
	unended      atomic.Int64
	refused      atomic.Int64

	carry carrier // penalties ended tasks left to their class

	// nextID is the end of the last run of IDs handed to a shard
	// (newID), on a cache line of its own, away from what every Begin and
	// End reads.
	_      [64]byte
	nextID atomic.Uint64
	_      [56]byte
}

// idRun is a run of task IDs, [next, end), that the Begins of one shard
// take from under its lock: one write of the registry's counter per
// idRunLen tasks, where a counter written by every Begin moved its cache
// line between the cores at every request (5 % of a parallel request's
// CPU time in a profile of httpmw's BenchmarkRequest), and no cost beyond
// the shard's lock, which Begin takes anyway. IDs stay unique, from 1 in
// a new registry.
type idRun struct{ next, end uint64 }

// idRunLen is the length of an idRun.
const idRunLen = 64

// newID returns a new task ID from sh's run; sh's lock is held.
func (r *Registry) newID(sh *shard) uint64 {
	if sh.ids.next == sh.ids.end {
		end := r.nextID.Add(idRunLen) + 1
		sh.ids = idRun{end - idRunLen, end}
	}
	id := sh.ids.next
	sh.ids.next++
	return id
}

type shard struct {
	mu     sync.Mutex
	live   []*Task // unordered; each task knows its index
	begun  uint64
	ended  uint64
	failed uint64
	exec   int64
	lat    latency.Histogram
	// Accounting blocks of ended tasks wait two rotations in limbo before
	// they are free for reuse, so an event racing a task's End never lands
	// in another task's block (see Rotate).
	limbo   [2][]*slotBlock
	free    []*slotBlock
	rotated int64    // clock value of the last rotation
	scratch []Usage  // the usage handed to OnEnd
	ids     idRun    // the IDs this shard's Begins take (newID)
	_       [64]byte // keep neighbouring shards' locks off one cache line
}

// maxRecycled bounds each shard's limbo and free lists.
const maxRecycled = 1024

// Options configure a [Registry]. The zero value is usable.
type Options struct {
	// OnEnd is called by End, with the clock value of the end and the
	// task's final accounting, while the task leaves the registry (under
	// its shard's lock: it must be quick, must not keep usage, and must not
	// call back into the registry). The controller uses it to fold the
	// task's accounting into the resources' totals.
	OnEnd func(t *Task, now int64, usage []Usage)
	// Report receives errors the registry recovers from: invalid specs,
	// panicking or blocked cancel hooks. Nil discards them.
	Report func(error)
	// HookTimeout is how long a cancel hook may run before it is reported
	// as blocked. Zero means one second; negative disables the report.
	HookTimeout time.Duration
	// LiveHold reports a hold in progress of a resource whose primitive
	// tracks its holders itself rather than in their accounting (the
	// controller passes resource.Registry.LiveHold): whether the task with
	// tag (the low 29 bits of its Task.ID) holds resource id that way, and
	// for how long it has held it at clock value now. The runtime's
	// readings of a task and End's final accounting add such holds.
	LiveHold func(id ResourceID, tag uint64, now int64) (held time.Duration, ok bool)
	// MaxLive bounds the live tasks (see [Registry.Begin]). Zero means
	// [DefaultMaxLive]; negative means no bound.
	MaxLive int
	// Objective is the default latency objective: a task whose spec has an
	// objective of its own ends with its latency recorded in
	// [Totals].Latency scaled by Objective/Spec.Objective, so that one
	// histogram, read against Objective, counts every task's miss of its
	// own objective. Zero records latencies as they are (objectives of
	// their own are then ignored).
	Objective time.Duration
}

// DefaultMaxLive is the default bound on a registry's live tasks.
const DefaultMaxLive = 1 << 17

// ErrTooManyTasks is reported (Options.Report) when Begin refuses a task
// because the registry holds its bound of live tasks.
var ErrTooManyTasks = errors.New("task: too many live tasks: Begin refused (tasks begun on contexts that never end and never ended?)")

// newRegistry returns an empty registry reading time from clk.
func newRegistry(clk *clock.Clock, o Options) *Registry {
	if clk == nil {
		clk = clock.New()
	}
	n := 1
	for n < shardsPerCPU*runtime.GOMAXPROCS(0) {
		n <<= 1
	}
	r := &Registry{clock: clk, onEnd: o.OnEnd, report: o.Report, hookTimeout: o.HookTimeout, liveHold: o.LiveHold, objective: max(o.Objective, 0),
		shards: make([]shard, n), mask: uint64(n - 1)}
	if r.report == nil {
		r.report = func(error) {}
	}
	if r.hookTimeout == 0 {
		r.hookTimeout = time.Second
	}
	switch {
	case o.MaxLive == 0:
		r.maxShard = (DefaultMaxLive + n - 1) / n
	case o.MaxLive < 0:
		r.maxShard = math.MaxInt
	default:
		r.maxShard = (o.MaxLive + n - 1) / n
	}
	return r
}

// Now returns the registry's clock value: nanoseconds since the clock's
// epoch, the time base of the snapshots' ages and holds.
// resource.NewMutex takes r.Now as its clock.
func (r *Registry) Now() int64 { return r.clock.Now() }

// Begin starts a task described by spec and returns its context, a child of
// parent that carries the task and is cancelled with cause [ErrCancelled]
// when the controller picks the task. The caller must call [Task.End] when
// the work is over. An invalid spec field is replaced by its default and
// reported. Begin panics on a nil parent, as context.WithCancel does.
//
// The live tasks are bounded by Options.MaxLive (rounded up to a multiple
// of the shard count; [DefaultMaxLive] by default): a task whose context
// ends without End is evicted ([Registry.CheckUnended]), but one begun on
// a context that never ends and never ended would stay for ever. Past the
// bound Begin refuses: it returns parent itself and a nil *Task (every
// method of which is a no-op, so the work runs, untracked), counts the
// refusal in Stats().Refused and reports [ErrTooManyTasks] (the first
// refusal, then at every power of two).
func (r *Registry) Begin(parent context.Context, spec Spec) (context.Context, *Task) {
	return r.begin(new(Task), parent, spec, nil)
}

// begin is Begin of t, a zero Task its caller allocated (BeginWith: in
// one object with the caller's own), whose class p's Resolver gives when
// p is not nil.
func (r *Registry) begin(t *Task, parent context.Context, spec Spec, p *Pending) (context.Context, *Task) {
	if parent == nil {
		panic("moirai: Begin with nil parent context")
	}
	t.spec, t.reg, t.ctx.parent = spec, r, parent
	if p != nil {
		t.pend.Store(p)
		t.state.Store(statePending)
	}
	if err := t.spec.normalize(); err != nil {
		r.invalidSpecs.Add(1)
		r.report(err)
	}
	now := r.clock.Now()
	t.begin = now

	sh := r.lockShard(t)
	if sh == nil {
		if n := r.refused.Add(1); n&(n-1) == 0 {
			r.report(fmt.Errorf("%w (%d refused so far)", ErrTooManyTasks, n))
		}
		return parent, nil
	}
	t.id = r.newID(sh)
	if now-sh.rotated >= r.clock.Resolution() {
		sh.rotateLocked(now)
	} else if len(sh.free) == 0 && len(sh.limbo[0])+len(sh.limbo[1]) > 0 {
		// Out of blocks between two ticks of the coarse clock: ask the
		// precise clock, and rotate if a quarter tick has passed, before
		// allocating a new block.
		if p := r.clock.Precise(); p-sh.rotated >= r.clock.Resolution()/4 {
			sh.rotateLocked(p)
		}
	}
	var b *slotBlock
	if n := len(sh.free); n > 0 {
		b = sh.free[n-1]
		sh.free[n-1] = nil
		sh.free = sh.free[:n-1]
	} else {
		b = new(slotBlock)
	}
	t.blk = b
	t.idx = int32(len(sh.live))
	sh.live = append(sh.live, t)
	sh.begun++
	sh.mu.Unlock()
	if p == nil {
		if d := r.carry.take(spec.Class, now); d > 0 {
			t.penalize(d)
		}
	}
	return &t.ctx, t
}

// end removes t from its shard, folds its accounting into the resources'
// totals and records its outcome; called once, by End.
func (r *Registry) end(t *Task, now int64, err error, state uint32) {
	lat := time.Duration(now - t.begin)
	exec := lat
	if state&stateMeta != 0 {
		exec = time.Duration(t.blk.meta.exec.Load())
		if state&stateFrozen == 0 {
			exec += time.Duration(now - t.actStart())
		}
	}

	sh := r.shardOf(t)
	sh.mu.Lock()
	// A task that touched no resource and no rarely used state leaves its
	// block as it found it: End does not touch it either.
	claimed := state>>8 != 0
	if r.onEnd != nil {
		var usage []Usage // none: the task touched no resource
		if claimed {
			sh.scratch = sh.scratch[:0]
			tag := HolderTag(t.id)
			t.blk.each(t.tag(), now, func(u Usage) {
				if r.liveHold != nil {
					if held, ok := r.liveHold(u.Resource, tag, now); ok {
						u.Held++ // a lock held past End: charge the hold so far
						u.Hold += held
					}
				}
				sh.scratch = append(sh.scratch, u)
			})
			usage = sh.scratch
		}
		r.onEnd(t, now, usage)
	}
	if len(sh.limbo[0]) < maxRecycled {
		if claimed || state&stateMeta != 0 {
			t.blk.reset(state&stateMeta != 0)
		}
		sh.limbo[0] = append(sh.limbo[0], t.blk)
	}
	last := len(sh.live) - 1
	moved := sh.live[last]
	sh.live[t.idx] = moved
	moved.idx = t.idx
	sh.live[last] = nil
	sh.live = sh.live[:last]
	sh.ended++
	if err != nil || state&stateCancelled != 0 {
		sh.failed++
	}
	sh.exec += int64(exec)
	if sp := t.specRef(); sp.HasObjective() {
		if sp.Objective > 0 && r.objective > 0 && sp.Objective != r.objective {
			lat = scaleLatency(lat, r.objective, sp.Objective)
		}
		sh.lat.Record(lat)
	}
	sh.mu.Unlock()
}

// rotateLocked ages the accounting blocks of ended tasks: blocks that have
// waited through two rotations become free for new tasks. A shard rotates
// itself at a Begin once a tick of the clock's resolution has passed since
// its last rotation (a quarter tick when it has run out of free blocks), so
// a block is reused at least a quarter tick (250 µs by default) after its
// task ended: an event racing its task's End does not land in another
// task's block. A reader that finds a task ended after reading its block
// discards what it read (the controller's snapshot does).
func (sh *shard) rotateLocked(now int64) {
	old := sh.limbo[1]
	if room := maxRecycled - len(sh.free); room > 0 {
		sh.free = append(sh.free, old[:min(room, len(old))]...)
	}
	clear(old)
	sh.limbo[1] = sh.limbo[0]
	sh.limbo[0] = old[:0]
	sh.rotated = now
}

// Len returns the number of live tasks.
func (r *Registry) Len() int {
	n := 0
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		n += len(sh.live)
		sh.mu.Unlock()
	}
	return n
}

// appendLive appends every live task to dst and returns the extended slice.
// It locks one shard at a time: tasks that begin or end meanwhile may or may
// not appear.
func (r *Registry) appendLive(dst []*Task) []*Task {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		dst = append(dst, sh.live...)
		sh.mu.Unlock()
	}
	return dst
}

// lockShard locks the shard a new task t is to live in and returns it,
// t.shard set: its page's (see pageShift) or, when that one holds its
// bound of live tasks, the next that does not; nil when every shard
// does.
func (r *Registry) lockShard(t *Task) *shard {
	i := uint64(uintptr(unsafe.Pointer(t))>>pageShift) & r.mask
	for range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		if len(sh.live) < r.maxShard {
			t.shard = uint32(i)
			return sh
		}
		sh.mu.Unlock()
		i = (i + 1) & r.mask
	}
	return nil
}

// shardOf is the shard t lives in.
func (r *Registry) shardOf(t *Task) *shard { return &r.shards[t.shard] }

// Lookup returns the live task with the given ID, or nil. It looks
// through every shard: an ID does not say which holds its task.
func (r *Registry) Lookup(id uint64) *Task {
	if id == 0 {
		return nil
	}
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for _, t := range sh.live {
			if t.id == id {
				sh.mu.Unlock()
				return t
			}
		}
		sh.mu.Unlock()
	}
	return nil
}

// Totals are the cumulative outcomes of the tasks that have ended.
type Totals struct {
	Begun  uint64
	Ended  uint64
	Failed uint64        // ended with an error or after being cancelled
	Exec   time.Duration // execution time of ended tasks
	// Latency holds the latencies of the ended tasks that have an
	// objective (Spec.HasObjective), each in the scale of the default
	// objective (see Options.Objective): background tasks and tasks of
	// NoObjective are counted in Ended but not here.
	Latency latency.Histogram
}

// scaleLatency returns lat × def/own, saturating.
func scaleLatency(lat, def, own time.Duration) time.Duration {
	v := float64(lat) * float64(def) / float64(own)
	if v >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(v)
}

// TotalsInto stores the registry's cumulative totals in dst, reusing its
// storage.
func (r *Registry) TotalsInto(dst *Totals) {
	dst.Begun, dst.Ended, dst.Failed, dst.Exec = 0, 0, 0, 0
	dst.Latency.Reset()
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		dst.Begun += sh.begun
		dst.Ended += sh.ended
		dst.Failed += sh.failed
		dst.Exec += time.Duration(sh.exec)
		dst.Latency.Merge(&sh.lat)
		sh.mu.Unlock()
	}
}

// Stats are the registry's counters of events worth an operator's look.
type Stats struct {
	Live         int   // tasks begun and not ended
	Cancelled    int64 // tasks cancelled by the controller
	EndedTwice   int64 // End calls on a task already ended
	LateEvents   int64 // events on tasks that had ended, dropped
	BadEvents    int64 // releases without acquires, WaitEnds without WaitBegins
	InvalidSpecs int64 // specs with an invalid field, defaulted
	HookPanics   int64 // cancel hooks that panicked
	HookBlocked  int64 // cancel hooks still running after the hook timeout
	HooksRunning int64 // cancel hooks running now
	Unended      int64 // tasks whose context ended long ago without End
	Refused      int64 // Begins refused because MaxLive tasks were live
	CarryDropped int64 // penalties left by ended tasks not carried: 1,024 classes had some waiting
}

// Stats returns the registry's counters.
func (r *Registry) Stats() Stats {
	return Stats{
		Live:         r.Len(),
		Cancelled:    r.cancelled.Load(),
		EndedTwice:   r.endedTwice.Load(),
		LateEvents:   r.lateEvents.Load(),
		BadEvents:    r.badEvents.Load(),
		InvalidSpecs: r.invalidSpecs.Load(),
		HookPanics:   r.hookPanics.Load(),
		HookBlocked:  r.hookBlocked.Load(),
		HooksRunning: r.hooksRunning.Load(),
		Unended:      r.unended.Load(),
		Refused:      r.refused.Load(),
		CarryDropped: r.carryDropped(),
	}
}

// checkUnended looks for a task that was never ended: its context has been
// done for longer than grace (the request it served is over) but End has not
// been called. It reports such a task once, the first time it is found,
// evicts it from the registry (ending it with [ErrUnended]), and returns
// true then. The controller calls it on every live task it visits.
func (r *Registry) checkUnended(t *Task, now int64, grace time.Duration) bool {
	if t.state.Load()&(stateEnded|stateUnended) != 0 || t.ctx.Err() == nil {
		return false
	}
	seen := t.blk.meta.doneSeen.Load()
	if seen == 0 {
		t.meta().doneSeen.CompareAndSwap(0, max(now, 1))
		t.clearIfEnded()
		return false
	}
	if time.Duration(now-seen) < grace {
		return false
	}
	var prev uint32
	for {
		s := t.state.Load()
		if s&(stateEnded|stateUnended) != 0 {
			return false
		}
		if t.state.CompareAndSwap(s, s|stateUnended|stateEnded) {
			prev = s
			break
		}
	}
	r.unended.Add(1)
	r.report(&UnendedError{ID: t.id, Class: t.specRef().Class, Key: t.specRef().Key, Age: time.Duration(now - t.begin)})
	// Evict it, as End would have, so that a service that forgets End
	// keeps a bounded registry: its accounting folds into the totals, its
	// later events are dropped as late, and its own End, if it ever
	// comes, is accepted silently.
	r.end(t, now, ErrUnended, prev)
	if p := t.lazy.Load(); p != nil {
		p.cancel(nil)
	}
	return true
}

// UnendedError reports a task whose context ended without a call to End:
// a leak in the application's instrumentation.
type UnendedError struct {
	ID         uint64
	Class, Key string
	Age        time.Duration
}

// Error describes the task that was never ended.
func (e *UnendedError) Error() string {
	return fmt.Sprintf("task: task %d (class %q, key %q) was never ended; its context is done, age %v", e.ID, e.Class, e.Key, e.Age)
}

func (r *Registry) carryDropped() int64 {
	r.carry.mu.Lock()
	defer r.carry.mu.Unlock()
	return r.carry.dropped
}
