package resource

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moirai-go/moirai/task"
)

// Mutex state bits.
const (
	mLocked   = 1 << 0 // held
	mWaiters  = 1 << 1 // the wait queue is not empty
	mStarving = 1 << 2 // hand the lock to the queue's head, no barging
)

// starvationThreshold is how long a waiter may lose to newcomers before the
// mutex switches to handing the lock over in FIFO order (as sync.Mutex does).
const starvationThreshold = time.Millisecond

// spins is how many times a contended Lock retries before it queues.
const spins = 4

// Mutex is a mutual-exclusion lock that records, per task, who holds it and
// who waits for it, and whose Lock gives up when the waiter's context is
// done. Uncontended, it costs one compare-and-swap and a few atomic adds on
// the holder's own counters. Under contention newcomers may barge in, as
// with sync.Mutex, until a waiter has waited a millisecond; then the lock is
// handed over in arrival order.
//
// A Mutex must be created by [NewMutex] (or the controller's Mutex method)
// and must not be copied after first use.
type Mutex struct {
	state atomic.Int32
	// holder is written by the goroutine that takes the lock and read by
	// the one that releases it; the state word's compare-and-swap orders
	// the two, so it needs no atomic access of its own.
	holder *task.Task
	res    *Resource
	clock  func() int64

	mu sync.Mutex // guards q
	q  waitQueue
}

// NewMutex returns an unlocked mutex accounted to r, reading time from now.
func NewMutex(r *Resource, now func() int64) *Mutex {
	return &Mutex{res: r, clock: now}
}

// Resource returns the resource the mutex is accounted to.
func (m *Mutex) Resource() *Resource { return m.res }

// Lock locks m for the task in ctx. If the lock is held, Lock waits until
// it is free or ctx is done; in the latter case it returns context.Cause(ctx)
// and leaves m unchanged. A task already cancelled by the controller fails
// at once with its cause, so a cancellation takes effect at the task's next
// lock. Lock is not reentrant. It panics on a nil ctx.
func (m *Mutex) Lock(ctx context.Context) error {
	t := m.res.taskOf(ctx)
	if t.Cancelled() {
		return causeOf(ctx, t)
	}
	if m.state.CompareAndSwap(0, mLocked) {
		m.acquired(t)
		return nil
	}
	return m.lockSlow(ctx, t)
}

// TryLock locks m for the task in ctx if it is free and reports whether it
// did.
func (m *Mutex) TryLock(ctx context.Context) bool {
	t := m.res.taskOf(ctx)
	if !m.tryLock() {
		return false
	}
	m.acquired(t)
	return true
}

func (m *Mutex) acquired(t *task.Task) {
	m.holder = t
	m.res.acquire(t, 1)
}

// tryLock takes the lock if it is free and nobody is starving.
func (m *Mutex) tryLock() bool {
	for {
		s := m.state.Load()
		if s&(mLocked|mStarving) != 0 {
			return false
		}
		if m.state.CompareAndSwap(s, s|mLocked) {
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
		if m.tryLock() {
			m.acquired(t)
			return nil
		}
	}
	done := ctx.Done()
	w := getWaiter(t)
	w.since = m.clock() // before the first enqueue: unlockSlow reads it
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
			if w.queued {
				m.q.remove(w)
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
			return nil
		}
		// Woken to compete: try, then queue again at the front.
		if m.tryLock() {
			m.res.waitEnd(t)
			m.acquired(t)
			return nil
		}
		front = true
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
		if front && time.Duration(m.clock()-w.since) > starvationThreshold {
			ns |= mStarving
		}
		if m.state.CompareAndSwap(s, ns) {
			break
		}
	}
	w.granted = false
	if front {
		m.q.pushFront(w)
	} else {
		m.q.pushBack(w)
	}
	return false
}

// dequeuedLocked clears the waiters and starving bits once the queue is
// empty.
func (m *Mutex) dequeuedLocked() {
	if m.q.head != nil {
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
	if m.state.Load()&mLocked == 0 {
		panic("moirai: unlock of unlocked mutex")
	}
	if t := m.holder; t != nil {
		m.holder = nil
		_ = m.res.release(t, 1)
	}
	if m.state.CompareAndSwap(mLocked, 0) {
		return
	}
	m.unlockSlow()
}

func (m *Mutex) unlockSlow() {
	m.mu.Lock()
	s := m.state.Load()
	if s&mLocked == 0 {
		m.mu.Unlock()
		panic("moirai: unlock of unlocked mutex")
	}
	w := m.q.head
	switch {
	case w == nil:
		// Waiters left; only this goroutine changes a locked, queue-less
		// state under m.mu.
		m.state.Store(0)
	case s&mStarving != 0 || time.Duration(m.clock()-w.since) > starvationThreshold:
		// The head has waited too long: hand the lock over. It stays
		// locked, now for w, so newcomers cannot barge in.
		m.q.remove(w)
		w.granted = true
		if m.q.head == nil {
			m.state.Store(mLocked)
		}
		w.ch <- struct{}{}
	default:
		// Release and wake the head to compete with newcomers.
		m.q.remove(w)
		w.granted = false
		for {
			s := m.state.Load()
			ns := s &^ mLocked
			if m.q.head == nil {
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
	w := m.q.head
	if w == nil || m.state.Load()&mLocked != 0 {
		// Empty queue, or the holder's unlock wakes the head.
		return
	}
	m.q.remove(w)
	w.granted = false
	m.dequeuedLocked()
	w.ch <- struct{}{}
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
	ch         chan struct{}
	t          *task.Task
	n          int64 // units wanted (semaphores), or reader/writer marker
	write      bool
	err        error // set with the token when the wait is refused
	since      int64
	queued     bool
	granted    bool
	prev, next *waiter
}

// Waiters are not pooled: a channel made inside a testing/synctest bubble
// must not be used outside it, and a pooled waiter would carry its channel
// from one bubble (or test) to the next. Waiting is the slow path; the
// allocation is small next to parking a goroutine.
func getWaiter(t *task.Task) *waiter {
	return &waiter{ch: make(chan struct{}, 1), t: t}
}

// waitQueue is an intrusive doubly-linked FIFO of waiters.
type waitQueue struct {
	head, tail *waiter
	n          int
}

func (q *waitQueue) pushBack(w *waiter) {
	w.prev, w.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = w
	} else {
		q.head = w
	}
	q.tail = w
	w.queued = true
	q.n++
}

func (q *waitQueue) pushFront(w *waiter) {
	w.prev, w.next = nil, q.head
	if q.head != nil {
		q.head.prev = w
	} else {
		q.tail = w
	}
	q.head = w
	w.queued = true
	q.n++
}

func (q *waitQueue) remove(w *waiter) {
	if !w.queued {
		return
	}
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
	q.n--
}
