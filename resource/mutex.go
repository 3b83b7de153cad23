package resource

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moirai-go/moirai/internal/clock"
	"github.com/moirai-go/moirai/internal/resrt"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/internal/waitq"
	"github.com/moirai-go/moirai/task"
)

// Mutex state: three flag bits, and while the lock is held, who holds it
// and since when, so that acquiring the lock and publishing its holder to
// the controller is one compare-and-swap.
const (
	mLocked   = 1 << 0 // held
	mWaiters  = 1 << 1 // the wait queue is not empty
	mStarving = 1 << 2 // hand the lock to the queue's head, no barging
	mFlags    = mLocked | mWaiters | mStarving

	sinceShift = 3               // ms since the clock's epoch, modulo 2³²
	tagShift   = 3 + 32          // taskx.HolderTag of the holder (0: unknown)
	identMask  = ^uint64(mFlags) // the holder's identity bits
)

// identity returns the state bits naming t as the holder since now.
func identity(t *task.Task, now int64) uint64 {
	ms := uint64(now) / uint64(time.Millisecond) & (1<<32 - 1) // now ≥ 0: unsigned is cheaper
	return ms<<sinceShift | taskx.HolderTag(t.ID())<<tagShift
}

// starvationThreshold is how long a waiter may lose to newcomers before the
// mutex switches to handing the lock over in FIFO order (as sync.Mutex does).
const starvationThreshold = time.Millisecond

// spins is how many times a contended Lock retries before it queues.
const spins = 4

// Mutex is a mutual-exclusion lock that records, per task, who holds it and
// who waits for it, and whose Lock gives up when the waiter's context is
// done. Uncontended, Lock and Unlock cost one compare-and-swap each, as
// sync.Mutex's do: the state word names the holder and the time it took
// the lock, and the finished hold is added to the holder's counters after
// the lock is released (one atomic add, none for a hold shorter than a
// tick of the coarse clock). Besides that compare-and-swap, an
// uncontended Lock makes one load of the task's state word (is a
// cancellation or a penalty pending?) and reads the time: the controller's
// mutexes read the coarse value of its clock, one atomic load, in every
// mode of the clock (a read of the monotonic clock costs more than the
// lock): the controller advances it every millisecond, and every 100 µs
// while a detector fires, when holds feed decisions. The fast paths of
// Lock and Unlock (a controller's mutex, a task with nothing pending,
// nobody waiting) are straight-line code that spills nothing to the
// stack; everything else is in lock and unlock. Under
// contention newcomers may barge in, as with sync.Mutex, until a waiter has
// waited a millisecond; then the lock is handed over in arrival order.
//
// A Mutex must be created by [NewMutex] (or the controller's Mutex method)
// and must not be copied after first use.
type Mutex struct {
	state atomic.Uint64
	// holder and since are written by the goroutine that takes the lock
	// and read by the one that releases it; the state word's
	// compare-and-swap orders the two, so they need no atomic access of
	// their own. Others learn the holder from the state word.
	holder *task.Task
	since  int64
	// claimed is the ID of the last task that claimed its accounting
	// entry for the resource while holding m (written, like holder, under
	// the lock): a task that takes m again skips the claim. IDs are never
	// reused, and a task's entries last as long as the task.
	claimed uint64
	res     *Resource
	// The time source: clk's coarse value when the controller made the
	// mutex, otherwise the function NewMutex was given.
	clk   *clock.Clock
	clock func() int64

	mu sync.Mutex // guards q
	q  waitQueue
}

// NewMutex returns an unlocked mutex accounted to r, reading time from now.
// The mutex reports its holder to r (see Resource.LiveHolds).
func NewMutex(r *Resource, now func() int64) *Mutex {
	m := &Mutex{res: r, clock: now}
	r.live.Store(&liveHolder{m: m})
	return m
}

// newCoarseMutex is NewMutex reading clk's coarse value (the controller's
// mutexes, through internal/resrt).
func newCoarseMutex(r *Resource, clk *clock.Clock) *Mutex {
	m := NewMutex(r, clk.Coarse)
	m.clk = clk
	return m
}

func init() { resrt.NewMutex = newCoarseMutex }

// now returns the mutex's clock value.
func (m *Mutex) now() int64 {
	if m.clk != nil {
		return m.clk.Coarse()
	}
	return m.clock()
}

// liveHolds stores in dst the tag of the task holding m and for how long
// it has held it at clock value now, read from the state word.
func (m *Mutex) liveHolds(now int64, dst *LiveHolds) {
	s := m.state.Load()
	if s&mLocked == 0 {
		return
	}
	nowMs := uint64(now/int64(time.Millisecond)) & (1<<32 - 1)
	d := (nowMs - s>>sinceShift) & (1<<32 - 1)
	if d >= 1<<31 {
		d = 0 // read with an older clock value
	}
	dst.add(s>>tagShift, time.Duration(d)*time.Millisecond)
}

// Resource returns the resource the mutex is accounted to.
func (m *Mutex) Resource() *Resource { return m.res }

// Lock locks m for the task in ctx. If the lock is held, Lock waits until
// it is free or ctx is done; in the latter case it returns context.Cause(ctx)
// and leaves m unchanged. A task already cancelled by the controller fails
// at once with its cause, so a cancellation takes effect at the task's next
// lock; a task with a penalty pending serves it first if it holds nothing.
// Lock is not reentrant. It panics on a nil ctx.
func (m *Mutex) Lock(ctx context.Context) error {
	t := taskx.FromContext(ctx)
	// The fast path: a controller's mutex, a task with nothing pending,
	// the lock free. Everything else goes through lock. It repeats lock's
	// first compare-and-swap, and hold, inline: through a shared call,
	// Lock took 1.78× sync.Mutex's time instead of 1.53× (scripts/hotpath),
	// and hold, with the claim it inlines, is over the compiler's
	// inlining budget.
	if c := m.clk; c != nil && t != nil && !taskx.Flagged(t) && m.res.preempt.Load() == nil {
		now := c.Coarse()
		if m.state.CompareAndSwap(0, identity(t, now)|mLocked) {
			m.holder, m.since = t, now
			if id := t.ID(); id != m.claimed {
				m.claim(t, id)
			}
			return nil
		}
	}
	return m.lock(ctx, t)
}

// lock is Lock past its fast path.
func (m *Mutex) lock(ctx context.Context, t *task.Task) error {
	if t == nil || taskx.Flagged(t) || m.res.preempt.Load() != nil {
		if err := m.res.arrive(ctx, t); err != nil {
			return err
		}
	}
	now := m.now()
	if m.state.CompareAndSwap(0, identity(t, now)|mLocked) {
		m.hold(t, now)
		return nil
	}
	return m.lockSlow(ctx, t)
}

// TryLock locks m for the task in ctx if it is free and reports whether it
// did.
func (m *Mutex) TryLock(ctx context.Context) bool {
	return m.tryLockFor(m.res.taskOf(ctx))
}

// acquired records t as the holder after a slow-path acquisition, which
// set only the locked bit.
func (m *Mutex) acquired(t *task.Task) {
	now := m.now()
	id := identity(t, now)
	for {
		s := m.state.Load()
		if m.state.CompareAndSwap(s, s&^identMask|id) {
			break
		}
	}
	m.hold(t, now)
}

// hold names t the holder since now and makes sure it has an accounting
// entry for the resource. Called with m held; Lock's fast path has its own
// copy (see there).
func (m *Mutex) hold(t *task.Task, now int64) {
	m.holder, m.since = t, now
	if id := t.ID(); id != m.claimed {
		m.claim(t, id)
	}
}

// claim makes sure the holder t, whose ID is id, has an accounting entry
// for the resource, to which the controller adds the hold in progress.
// Called with m held, when id is not m.claimed.
func (m *Mutex) claim(t *task.Task, id uint64) {
	taskx.Claim(t, m.res.id)
	m.claimed = id
}

// tryLockFor takes the lock for t if it is free and nobody is starving,
// naming t as the holder in the same compare-and-swap (the identity bits
// of an unlocked mutex are clear), and reports whether it did.
func (m *Mutex) tryLockFor(t *task.Task) bool {
	now := m.now()
	id := identity(t, now)
	for {
		s := m.state.Load()
		if s&(mLocked|mStarving) != 0 {
			return false
		}
		if m.state.CompareAndSwap(s, s|id|mLocked) {
			m.hold(t, now)
			return true
		}
	}
}

func (m *Mutex) lockSlow(ctx context.Context, t *task.Task) error {
	for range spins {
		for range 16 {
			if m.state.Load()&mLocked == 0 {
				break
			}
		}
		if m.tryLockFor(t) {
			return nil
		}
	}
	done := ctx.Done()
	w := getWaiter(t)
	w.since = m.now() // before the first enqueue: unlockSlow reads it
	waiting := false
	front := false
	for {
		m.mu.Lock()
		if m.enqueueLocked(w, front) {
			m.mu.Unlock()
			if waiting {
				m.res.waitEnd(t)
			}
			m.acquired(t)
			if waiting {
				m.handedOn()
			}
			return nil
		}
		m.mu.Unlock()
		if !waiting {
			waiting = true
			m.res.waitBegin(t)
		}
		select {
		case <-w.ch:
		case <-done:
			m.mu.Lock()
			if w.Queued() {
				m.q.Remove(w)
				m.dequeuedLocked()
				m.mu.Unlock()
				m.res.waitEnd(t)
				return causeOf(ctx, t)
			}
			// A token is already in w.ch: consume it.
			m.mu.Unlock()
			<-w.ch
			if w.granted {
				// We own the lock; pass it on.
				m.res.waitEnd(t)
				m.unlockSlow()
				return causeOf(ctx, t)
			}
			// We were woken to compete and give up: pass the wake-up on,
			// or the waiters behind us sleep on a free lock.
			m.wakeIfFree()
			m.res.waitEnd(t)
			return causeOf(ctx, t)
		}
		if w.granted {
			m.res.waitEnd(t)
			m.acquired(t)
			m.handedOn()
			return nil
		}
		// Woken to compete: try, then queue again at the front.
		if m.tryLockFor(t) {
			m.res.waitEnd(t)
			m.handedOn()
			return nil
		}
		front = true
	}
}

// handedOn steps the controller's loop, when m's resource is armed, after a
// task that waited took m while others wait (see Resource.poke).
func (m *Mutex) handedOn() {
	if m.res.armed() && m.state.Load()&mWaiters != 0 {
		m.res.poke()
	}
}

// enqueueLocked either takes the lock (returning true) or queues w, with the
// waiters bit set before the final attempt so no unlock is missed. A waiter
// woken before (front) goes back to the head of the queue and, if it has
// waited too long, turns on starvation mode.
func (m *Mutex) enqueueLocked(w *waiter, front bool) bool {
	for {
		s := m.state.Load()
		if s&(mLocked|mStarving) == 0 {
			if m.state.CompareAndSwap(s, s|mLocked) {
				return true
			}
			continue
		}
		ns := s | mWaiters
		if front && time.Duration(m.now()-w.since) > starvationThreshold {
			ns |= mStarving
		}
		if m.state.CompareAndSwap(s, ns) {
			break
		}
	}
	w.granted = false
	if front {
		m.q.PushFront(w)
	} else {
		m.q.PushBack(w)
	}
	return false
}

// dequeuedLocked clears the waiters and starving bits once the queue is
// empty.
func (m *Mutex) dequeuedLocked() {
	if m.q.Front() != nil {
		return
	}
	for {
		s := m.state.Load()
		if m.state.CompareAndSwap(s, s&^(mWaiters|mStarving)) {
			return
		}
	}
}

// Unlock unlocks m, charging the hold to the task that locked it. Unlocking
// an unlocked Mutex panics, as it does for sync.Mutex; it may be unlocked
// by a goroutine other than the one that locked it.
func (m *Mutex) Unlock() {
	// The fast path: a controller's mutex, locked, nobody waiting. The
	// hold is charged after the lock is released, to keep the critical
	// section as short as sync.Mutex's; the holder is read while the lock
	// still protects it.
	s := m.state.Load()
	if c := m.clk; c != nil && s&mFlags == mLocked {
		t, since := m.holder, m.since
		m.holder = nil
		if m.state.CompareAndSwap(s, 0) {
			if d := time.Duration(c.Coarse() - since); d > 0 && t != nil {
				taskx.AddHold(t, m.res.id, d)
			}
			return
		}
		m.holder = t
	}
	m.unlock(s)
}

// unlock is Unlock past its fast path; s is the state Unlock read.
func (m *Mutex) unlock(s uint64) {
	if s&mLocked == 0 {
		panic("moirai: unlock of unlocked mutex")
	}
	t, since := m.holder, m.since
	m.holder = nil
	if s&(mWaiters|mStarving) != 0 || !m.state.CompareAndSwap(s, 0) {
		m.unlockSlow()
	}
	if d := time.Duration(m.now() - since); d > 0 && t != nil {
		taskx.AddHold(t, m.res.id, d)
	}
}

func (m *Mutex) unlockSlow() {
	m.mu.Lock()
	s := m.state.Load()
	if s&mLocked == 0 {
		m.mu.Unlock()
		panic("moirai: unlock of unlocked mutex")
	}
	w := m.q.Front()
	switch {
	case w == nil:
		// Waiters left; only this goroutine changes a locked, queue-less
		// state under m.mu.
		m.state.Store(0)
	case s&mStarving != 0 || time.Duration(m.now()-w.since) > starvationThreshold:
		// The head has waited too long: hand the lock over. It stays
		// locked, now for w, so newcomers cannot barge in.
		m.q.Remove(w)
		w.granted = true
		ns := s&mFlags | mLocked // the new holder sets its identity
		if m.q.Front() == nil {
			ns = mLocked
		}
		m.state.Store(ns)
		w.ch <- struct{}{}
	default:
		// Release and wake the head to compete with newcomers.
		m.q.Remove(w)
		w.granted = false
		for {
			s := m.state.Load()
			ns := s &^ (mLocked | identMask)
			if m.q.Front() == nil {
				ns &^= mWaiters | mStarving
			}
			if m.state.CompareAndSwap(s, ns) {
				break
			}
		}
		w.ch <- struct{}{}
	}
	m.mu.Unlock()
}

// wakeIfFree wakes the head of the queue to compete for the lock if the
// lock is free, as unlockSlow would have. It takes m.mu.
func (m *Mutex) wakeIfFree() {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.q.Front()
	if w == nil || m.state.Load()&mLocked != 0 {
		// Empty queue, or the holder's unlock wakes the head.
		return
	}
	m.q.Remove(w)
	w.granted = false
	m.dequeuedLocked()
	w.ch <- struct{}{}
}

// safePoint is where a flagged task stops before it acquires: a task
// already cancelled by the controller fails at once with its cause, and a
// task with a penalty pending serves it there if it holds nothing (see
// task.Task.Pause). The primitives call it only when t.Flagged(), so an
// unflagged task pays one load of its state word, the same load that
// tells it is not cancelled.
func safePoint(ctx context.Context, t *task.Task) error {
	if t.Cancelled() {
		return causeOf(ctx, t)
	}
	return t.Pause(ctx)
}

// causeOf returns why a wait of t under ctx ended early: ctx's cause, or
// the task's own if ctx was not the task's context.
func causeOf(ctx context.Context, t *task.Task) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if t != nil {
		if err := context.Cause(t.Context()); err != nil {
			return err
		}
	}
	return task.ErrCancelled
}

// waiter is one goroutine waiting in a queue. Its channel has room for one
// token, so granting never blocks.
type waiter struct {
	ch      chan struct{}
	t       *task.Task
	n       int64 // units wanted (semaphores), or reader/writer marker
	write   bool
	err     error // set with the token when the wait is refused
	since   int64
	granted bool
	waitq.Links[waiter]
}

func (w *waiter) WaitLinks() *waitq.Links[waiter] { return &w.Links }

// waitQueue is the primitives' FIFO of waiters.
type waitQueue = waitq.Queue[waiter, *waiter]

// Waiters are not pooled: a channel made inside a testing/synctest bubble
// must not be used outside it, and a pooled waiter would carry its channel
// from one bubble (or test) to the next. Waiting is the slow path; the
// allocation is small next to parking a goroutine.
func getWaiter(t *task.Task) *waiter {
	return &waiter{ch: make(chan struct{}, 1), t: t}
}
