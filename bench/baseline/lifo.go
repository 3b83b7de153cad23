package baseline

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"
)

// LIFOQueue is a queue of requests for a fixed number of worker slots
// with adaptive LIFO ("Fail at Scale"): it hands a freed slot to the
// request that waited longest (FIFO) while lifo returns false, and to the
// newest one (LIFO) while it returns true, so that under overload the
// requests served are those whose clients are still waiting for them.
// Pair it with [RPCCoDel], passing [RPCCoDel.Overloaded] as lifo and
// [RPCCoDel.Started] to [WithDequeueCheck].
//
// A LIFOQueue is safe for concurrent use. Create one with [NewLIFOQueue].
type LIFOQueue struct {
	slots int
	lifo  func() bool
	clock func() time.Duration
	check func(now, queued time.Duration) bool

	mu      sync.Mutex
	busy    int        // slots held; guarded by mu
	waiting *list.List // of *waiter, oldest at the front; guarded by mu
}

// A waiter is a request in the queue. ok is written under the queue's
// lock before ch is closed and read after.
type waiter struct {
	ch  chan struct{}
	enq time.Duration // clock at Enter
	ok  bool          // handed a slot (false: rejected at dequeue)
}

// A LIFOOption configures [NewLIFOQueue].
type LIFOOption func(*LIFOQueue)

// WithDequeueCheck makes the queue ask check, as it dequeues a request
// (hands it a free slot), whether to serve it: now is clock's reading at
// the dequeue and queued how long the request waited until then. A
// request check refuses is rejected ([Enter] returns [ErrRejected]) and
// the slot goes to the next one at once, as a worker thread taking tasks
// off its queue drops the expired ones and runs the first that is not
// (folly's CoDel in Facebook's RPC servers). The time the rejected
// request's goroutine then takes to be scheduled is not counted as
// queueing, nor does it hold the slot. check is also told of every
// request that leaves the queue otherwise (served at once with no wait,
// or giving up as its context ends), its answer then ignored, so that
// [RPCCoDel.Started] can keep its backlog. A nil clock or check leaves
// the queue without a check.
func WithDequeueCheck(clock func() time.Duration, check func(now, queued time.Duration) bool) LIFOOption {
	return func(q *LIFOQueue) {
		if clock != nil && check != nil {
			q.clock, q.check = clock, check
		}
	}
}

// NewLIFOQueue returns a queue of slots worker slots (at least one) that
// serves its waiting requests newest first while lifo returns true; a nil
// lifo means always FIFO.
func NewLIFOQueue(slots int, lifo func() bool, opts ...LIFOOption) *LIFOQueue {
	if lifo == nil {
		lifo = func() bool { return false }
	}
	q := &LIFOQueue{slots: max(slots, 1), lifo: lifo, waiting: list.New()}
	for _, o := range opts {
		o(q)
	}
	return q
}

// errNotHeld is Release's error when no slot is held.
var errNotHeld = errors.New("baseline: LIFOQueue.Release without a slot held")

// ErrRejected is Enter's error for a request the queue's dequeue check
// refused.
var ErrRejected = errors.New("baseline: request rejected at dequeue")

// Enter waits for a slot and takes it, or returns ctx's error if ctx ends
// first, or [ErrRejected] if the dequeue check refuses it (then it holds
// no slot). Every successful Enter must be matched by one Release.
func (q *LIFOQueue) Enter(ctx context.Context) error {
	q.mu.Lock()
	if q.busy < q.slots && q.waiting.Len() == 0 {
		if q.check != nil && !q.check(q.clock(), 0) {
			q.mu.Unlock()
			return ErrRejected
		}
		q.busy++
		q.mu.Unlock()
		return nil
	}
	w := &waiter{ch: make(chan struct{})}
	if q.clock != nil {
		w.enq = q.clock()
	}
	e := q.waiting.PushBack(w)
	q.mu.Unlock()
	select {
	case <-w.ch:
		if !w.ok {
			return ErrRejected
		}
		return nil
	case <-ctx.Done():
		q.mu.Lock()
		select {
		case <-w.ch:
			if w.ok {
				// The slot was handed over as ctx ended: pass it on.
				q.releaseLocked()
			}
		default:
			q.waiting.Remove(e)
			if q.check != nil {
				now := q.clock()
				q.check(now, now-w.enq)
			}
		}
		q.mu.Unlock()
		return ctx.Err()
	}
}

// Release frees a slot taken by Enter, handing it to a waiting request if
// there is one (the first the dequeue check lets through, if the queue
// has one).
func (q *LIFOQueue) Release() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.busy == 0 {
		return errNotHeld
	}
	q.releaseLocked()
	return nil
}

func (q *LIFOQueue) releaseLocked() {
	for q.waiting.Len() > 0 {
		e := q.waiting.Front()
		if q.lifo() {
			e = q.waiting.Back()
		}
		w := q.waiting.Remove(e).(*waiter)
		w.ok = true
		if q.check != nil {
			now := q.clock()
			w.ok = q.check(now, now-w.enq)
		}
		close(w.ch)
		if w.ok {
			return
		}
	}
	q.busy--
}

// Waiting returns the number of requests waiting for a slot.
func (q *LIFOQueue) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting.Len()
}
