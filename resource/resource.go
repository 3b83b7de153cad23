package resource

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moirai-go/moirai/internal/enum"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/task"
)

// Kind is the sort of thing tasks contend on; it decides how contention on
// the resource is measured.
type Kind uint8

const (
	// KindLock is a synchronization resource: a mutex, a table lock, a log.
	KindLock Kind = iota + 1
	// KindQueue is a bounded set of slots: worker slots, a connection pool.
	KindQueue
	// KindMemory is a pool or cache whose entries tasks evict from each
	// other: a buffer pool, a query cache, the heap.
	KindMemory
	// KindCPU is processor time.
	KindCPU
	// KindIO is a device or a bandwidth.
	KindIO
)

var kindNames = [...]string{KindLock: "lock", KindQueue: "queue", KindMemory: "memory", KindCPU: "cpu", KindIO: "io"}

// String returns the kind's lower-case name.
func (k Kind) String() string { return enum.Name(k, kindNames[:], "kind") }

// ParseKind parses the names printed by [Kind.String].
func ParseKind(s string) (Kind, error) {
	for k, n := range kindNames {
		if n != "" && strings.EqualFold(n, strings.TrimSpace(s)) {
			return Kind(k), nil
		}
	}
	return 0, fmt.Errorf("resource: unknown kind %q (want lock, queue, memory, cpu or io)", s)
}

var (
	// ErrUnknown is returned when a name that was never registered is
	// resolved.
	ErrUnknown = errors.New("resource: unknown resource")
	// ErrExists is returned when a name is registered twice.
	ErrExists = errors.New("resource: resource already registered")
	// ErrRejected is returned when a bounded queue is full.
	ErrRejected = errors.New("resource: queue full, request rejected")
)

// Resource is a named thing tasks contend on, resolved once by name so that
// events carry a small integer, never a string. Its methods are the raw event
// vocabulary for resources that moirai's primitives do not cover; each
// charges the event to the task in ctx. Events from a context without a task
// are counted as untracked and otherwise ignored.
//
// A Resource is safe for concurrent use.
type Resource struct {
	id       task.ResourceID
	name     string
	kind     Kind
	capacity int64

	untracked atomic.Int64
	misuse    atomic.Int64

	// totals of the tasks that have ended, folded in at End
	endedWait   atomic.Int64
	endedHold   atomic.Int64
	endedWaits  atomic.Int64
	endedEvict  atomic.Int64
	resident    atomic.Int64 // KindMemory: units in use now
	queueLength atomic.Int64 // KindQueue: requests waiting now

	// live reports the holds in progress of a primitive that tracks its
	// holders itself (a Mutex, the controller's semaphores and queues);
	// nil for the others.
	live atomic.Pointer[liveHolder]

	// wake, when set, is called as a task begins to wait here, or takes
	// this after a wait while others wait: the controller's loop asked to
	// step at once then (see resrt.Arm).
	wake atomic.Pointer[func()]

	// preempt, when set, names the classes whose tasks the controller
	// cancels as they take this resource (see resrt.ArmPreempt): every
	// acquisition then goes through arrive.
	preempt atomic.Pointer[preemption]
}

// preemption is a policy's standing orders on a resource: a task of
// classes[i] that takes it is handed to do(t, i), which reports whether it
// cancelled it (the controller's safety checks may refuse).
type preemption struct {
	classes []string
	do      func(t *task.Task, i int) bool
}

// armPreempt sets the classes whose tasks take r only through do (none:
// disarmed).
func armPreempt(r *Resource, classes []string, do func(t *task.Task, i int) bool) {
	if len(classes) == 0 || do == nil {
		r.preempt.Store(nil)
		return
	}
	r.preempt.Store(&preemption{classes: classes, do: do})
}

// preempted hands t to the standing order of its class on r, if any, and
// returns the cause of its cancellation, or nil when it may go ahead.
func (r *Resource) preempted(ctx context.Context, t *task.Task) error {
	p := r.preempt.Load()
	if p == nil {
		return nil
	}
	if i := slices.Index(p.classes, t.Spec().Class); i >= 0 && p.do(t, i) {
		return causeOf(ctx, t)
	}
	return nil
}

// liveHolder is the primitive whose holds in progress a resource reports:
// one of the two is set.
type liveHolder struct {
	m *Mutex
	s *sema
}

// MaxLiveHolds is the most holds in progress a primitive tracks itself:
// a semaphore's holder named in its units word and one in each of its
// holder slots.
const MaxLiveHolds = 1 + nSlots

// LiveHolds are the holds in progress of a resource whose primitive tracks
// its holders itself: the first N entries of Tag and Held.
type LiveHolds struct {
	N    int
	Tag  [MaxLiveHolds]uint64        // the holder's tag: the low 29 bits of its task's ID
	Held [MaxLiveHolds]time.Duration // how long it has held its unit
}

// add appends a hold to h.
func (h *LiveHolds) add(tag uint64, held time.Duration) {
	h.Tag[h.N], h.Held[h.N] = tag, held
	h.N++
}

// Of returns the hold of the task with tag in h; ok is false if h has
// none. A task has at most one hold of a resource that its primitive
// tracks itself.
func (h *LiveHolds) Of(tag uint64) (held time.Duration, ok bool) {
	for i := range h.N {
		if h.Tag[i] == tag {
			return h.Held[i], true
		}
	}
	return 0, false
}

// LiveHolds stores in dst, for a resource whose primitive tracks its
// holders itself (a Mutex, the controller's semaphores and queues), the
// tags of the tasks holding it that way and for how long each has held it
// at clock value now; dst.N is 0 when nobody does or the primitive does
// not track holds this way. Such holds are not in the holders' task
// accounting until they end: the controller adds them from here, and a
// task's own readings through task.Options.LiveHold.
func (r *Resource) LiveHolds(now int64, dst *LiveHolds) {
	dst.N = 0
	if l := r.live.Load(); l != nil {
		if l.m != nil {
			l.m.liveHolds(now, dst)
		} else {
			l.s.liveHolds(now, dst)
		}
	}
}

// LiveHold returns how long the task with tag (the low 29 bits of its ID)
// has held the resource at clock value now in a hold its primitive tracks
// itself (see LiveHolds); ok is false if it holds none.
func (r *Resource) LiveHold(tag uint64, now int64) (held time.Duration, ok bool) {
	var h LiveHolds
	r.LiveHolds(now, &h)
	return h.Of(tag)
}

// ID returns the resource's identifier in task accounting.
func (r *Resource) ID() task.ResourceID { return r.id }

// Name returns the name the resource was registered with.
func (r *Resource) Name() string { return r.name }

// Kind returns the resource's kind.
func (r *Resource) Kind() Kind { return r.kind }

// Capacity returns the resource's capacity in units (slots, bytes, pages),
// 0 when it has none (a lock).
func (r *Resource) Capacity() int64 { return r.capacity }

// WaitBegin records that the task in ctx starts waiting for r.
func (r *Resource) WaitBegin(ctx context.Context) { r.waitBegin(r.taskOf(ctx)) }

// WaitEnd records that the wait begun by WaitBegin is over.
func (r *Resource) WaitEnd(ctx context.Context) { r.waitEnd(r.taskOf(ctx)) }

// Acquire records that the task in ctx now holds n more units of r.
// More than task.MaxUnits held at once is refused with an error.
func (r *Resource) Acquire(ctx context.Context, n int64) error { return r.acquire(r.taskOf(ctx), n) }

// Release records that the task in ctx gave back n units of r. Releasing
// more than the task holds returns an error wrapping [task.ErrOverRelease]
// and changes nothing.
func (r *Resource) Release(ctx context.Context, n int64) error {
	return r.release(r.taskOf(ctx), n)
}

// Evicted records that the task in ctx evicted n units of r that others used.
func (r *Resource) Evicted(ctx context.Context, n int64) { r.evicted(r.taskOf(ctx), n) }

// taskOf returns the task in ctx, counting a context without one. It
// panics on a nil ctx (task.FromContext does).
func (r *Resource) taskOf(ctx context.Context) *task.Task {
	t := taskx.FromContext(ctx)
	if t == nil {
		r.untracked.Add(1)
	}
	return t
}

// Where a primitive's acquisition begins, it reads the task in ctx and
// makes one test, inline:
//
//	t := taskx.FromContext(ctx)
//	if t == nil || taskx.Flagged(t) || r.preempt.Load() != nil {
//		err := r.arrive(ctx, t) // untracked, cancelled, penalized or preempted
//	}
//
// so that a tracked task with nothing pending costs one load of its state
// word and one of the resource's standing orders.

// enter returns the task in ctx, once arrive let it go ahead when it is
// none or flagged. The Semaphore's take repeats it inline: through enter,
// Semaphore took 1.23x x/sync/semaphore's time instead of 1.11x.
func (r *Resource) enter(ctx context.Context) (*task.Task, error) {
	t := taskx.FromContext(ctx)
	if t == nil || taskx.Flagged(t) || r.preempt.Load() != nil {
		if err := r.arrive(ctx, t); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// arrive counts an untracked acquisition, or stops a flagged task at its
// safe point, its class learnt first when it was begun before it was
// known (taskx.BeginWith), or hands a task of a class the controller
// preempts on r to its order: it returns an error if the acquisition
// must not go ahead because the task was cancelled by the controller
// (its cause), or a penalty it served was cut short by ctx.
//
//go:noinline
func (r *Resource) arrive(ctx context.Context, t *task.Task) error {
	if t == nil {
		r.untracked.Add(1)
		return nil
	}
	t = taskx.Settled(t)
	if err := r.preempted(ctx, t); err != nil {
		return err
	}
	return safePoint(ctx, t)
}

func (r *Resource) waitBegin(t *task.Task) {
	if t != nil {
		taskx.WaitBegin(t, r.id)
	}
	r.poke()
}

// armed reports whether the controller's loop asked to step when a task
// begins to wait on r (see arm).
func (r *Resource) armed() bool { return r.wake.Load() != nil }

// poke steps the controller's loop now when r is armed. A task poking as
// it begins to wait (waitBegin) makes a known-heavy holder a culprit;
// the primitives poke too after a task that waited took r while others
// still wait: their waits began before it held r, so the steps they asked
// for saw another holder, and the loop would see the new one only at its
// next tick.
func (r *Resource) poke() {
	if f := r.wake.Load(); f != nil {
		(*f)()
	}
}

// arm sets the function called as a task begins to wait on r (nil: none).
func arm(r *Resource, f *func()) { r.wake.Store(f) }

func (r *Resource) waitEnd(t *task.Task) {
	if t != nil {
		taskx.WaitEnd(t, r.id)
	}
}

func (r *Resource) acquire(t *task.Task, n int64) error {
	if t == nil {
		return nil
	}
	return r.refused(t, "acquired", n, taskx.Acquire(t, r.id, n))
}

func (r *Resource) release(t *task.Task, n int64) error {
	if t == nil {
		return nil
	}
	return r.refused(t, "released", n, taskx.Release(t, r.id, n))
}

// refused is nil when the task's accounting took an event (err nil), and
// otherwise counts the refused event and describes it.
func (r *Resource) refused(t *task.Task, what string, n int64, err error) error {
	if err == nil {
		return nil
	}
	return r.misused(t, what, n, err)
}

// misused counts a refused event and describes it.
func (r *Resource) misused(t *task.Task, what string, n int64, err error) error {
	r.misuse.Add(1)
	return fmt.Errorf("resource %q: task %d %s %d: %w", r.name, t.ID(), what, n, err)
}

func (r *Resource) evicted(t *task.Task, n int64) {
	if t != nil {
		taskx.Evicted(t, r.id, n)
	}
}

// Untracked returns how many events came from contexts without a task.
func (r *Resource) Untracked() int64 { return r.untracked.Load() }

// Misuse returns how many releases without acquires (and similar mistakes)
// were refused.
func (r *Resource) Misuse() int64 { return r.misuse.Load() }

// Resident returns, for a KindMemory resource, the units tasks use now.
func (r *Resource) Resident() int64 { return r.resident.Load() }

// QueueLength returns, for a KindQueue resource, the requests waiting now.
func (r *Resource) QueueLength() int64 { return r.queueLength.Load() }

// Totals are the cumulative accounting of the tasks that have ended.
type Totals struct {
	Wait, Hold time.Duration
	Waits      int64
	Evictions  int64
}

// EndedTotals returns the accounting folded in from tasks that have ended.
func (r *Resource) EndedTotals() Totals {
	return Totals{
		Wait:      time.Duration(r.endedWait.Load()),
		Hold:      time.Duration(r.endedHold.Load()),
		Waits:     r.endedWaits.Load(),
		Evictions: r.endedEvict.Load(),
	}
}

// fold adds a finished task's usage of r to r's totals.
func (r *Resource) fold(u task.Usage) {
	if r.kind == KindMemory && u.Held > 0 {
		r.resident.Add(-u.Held)
	}
	if u.Wait > 0 {
		r.endedWait.Add(int64(u.Wait))
	}
	if u.Hold > 0 {
		r.endedHold.Add(int64(u.Hold))
	}
	if u.Waits > 0 {
		r.endedWaits.Add(u.Waits)
	}
	if u.Evictions > 0 {
		r.endedEvict.Add(u.Evictions)
	}
}

// Registry resolves resource names to resources. Registration takes a lock;
// resolution by ID is one atomic load. It is safe for concurrent use.
type Registry struct {
	mu     sync.Mutex
	byName map[string]*Resource
	byID   atomic.Pointer[[]*Resource] // index = ID; copied on registration
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	r := &Registry{byName: make(map[string]*Resource)}
	empty := []*Resource{nil}
	r.byID.Store(&empty)
	return r
}

// Register creates a resource. Names are unique: registering a name twice
// returns [ErrExists]. A capacity below zero, an unknown kind or an empty
// name is an error.
func (g *Registry) Register(name string, kind Kind, capacity int64) (*Resource, error) {
	if name == "" {
		return nil, errors.New("resource: empty name")
	}
	if kind < KindLock || kind > KindIO {
		return nil, fmt.Errorf("resource %q: invalid kind %d", name, kind)
	}
	if capacity < 0 {
		return nil, fmt.Errorf("resource %q: negative capacity %d", name, capacity)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if old, ok := g.byName[name]; ok {
		return nil, fmt.Errorf("%w: %q (a %v)", ErrExists, name, old.kind)
	}
	old := *g.byID.Load()
	if len(old) > task.MaxResources {
		return nil, fmt.Errorf("resource %q: too many resources (at most %d)", name, task.MaxResources)
	}
	r := &Resource{id: task.ResourceID(len(old)), name: name, kind: kind, capacity: capacity}
	ids := make([]*Resource, len(old)+1)
	copy(ids, old)
	ids[r.id] = r
	g.byName[name] = r
	g.byID.Store(&ids)
	return r, nil
}

// Lookup returns the resource registered under name, or an error wrapping
// [ErrUnknown] that lists the names known.
func (g *Registry) Lookup(name string) (*Resource, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r, ok := g.byName[name]; ok {
		return r, nil
	}
	known := make([]string, 0, len(g.byName))
	for n := range g.byName {
		known = append(known, n)
	}
	slices.Sort(known)
	return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknown, name, strings.Join(known, ", "))
}

// LiveHold is Resource.LiveHold by ID, for task.Options.LiveHold.
func (g *Registry) LiveHold(id task.ResourceID, tag uint64, now int64) (held time.Duration, ok bool) {
	if r := g.ByID(id); r != nil {
		return r.LiveHold(tag, now)
	}
	return 0, false
}

// ByID returns the resource with the given ID, or nil.
func (g *Registry) ByID(id task.ResourceID) *Resource {
	ids := *g.byID.Load()
	if int(id) < len(ids) {
		return ids[id]
	}
	return nil
}

// All returns every registered resource in ID order.
func (g *Registry) All() []*Resource {
	ids := *g.byID.Load()
	out := make([]*Resource, 0, len(ids)-1)
	return append(out, ids[1:]...)
}

// Len returns the number of registered resources.
func (g *Registry) Len() int { return len(*g.byID.Load()) - 1 }

// Fold adds an ended task's final accounting to the totals of the
// resources it touched. The controller calls it from the task registry's
// OnEnd.
func (g *Registry) Fold(_ *task.Task, _ int64, usage []task.Usage) {
	ids := *g.byID.Load()
	for _, u := range usage {
		if int(u.Resource) < len(ids) {
			ids[u.Resource].fold(u)
		}
	}
}
