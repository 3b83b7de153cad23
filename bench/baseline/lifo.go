package baseline

import (
	"container/list"
	"context"
	"errors"
	"sync"
)

// LIFOQueue is a queue of requests for a fixed number of worker slots
// with adaptive LIFO ("Fail at Scale"): it hands a freed slot to the
// request that waited longest (FIFO) while lifo returns false, and to the
// newest one (LIFO) while it returns true, so that under overload the
// requests served are those whose clients are still waiting for them.
// Pair it with [RPCCoDel], passing [RPCCoDel.Overloaded] as lifo.
//
// A LIFOQueue is safe for concurrent use. Create one with [NewLIFOQueue].
type LIFOQueue struct {
	slots int
	lifo  func() bool

	mu      sync.Mutex
	busy    int        // slots held; guarded by mu
	waiting *list.List // of chan struct{}, oldest at the front; guarded by mu
}

// NewLIFOQueue returns a queue of slots worker slots (at least one) that
// serves its waiting requests newest first while lifo returns true; a nil
// lifo means always FIFO.
func NewLIFOQueue(slots int, lifo func() bool) *LIFOQueue {
	if lifo == nil {
		lifo = func() bool { return false }
	}
	return &LIFOQueue{slots: max(slots, 1), lifo: lifo, waiting: list.New()}
}

// errNotHeld is Release's error when no slot is held.
var errNotHeld = errors.New("baseline: LIFOQueue.Release without a slot held")

// Enter waits for a slot and takes it, or returns ctx's error if ctx ends
// first (then it holds no slot). Every successful Enter must be matched by
// one Release.
func (q *LIFOQueue) Enter(ctx context.Context) error {
	q.mu.Lock()
	if q.busy < q.slots && q.waiting.Len() == 0 {
		q.busy++
		q.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	e := q.waiting.PushBack(ch)
	q.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		q.mu.Lock()
		select {
		case <-ch:
			// The slot was handed over as ctx ended: pass it on.
			q.releaseLocked()
		default:
			q.waiting.Remove(e)
		}
		q.mu.Unlock()
		return ctx.Err()
	}
}

// Release frees a slot taken by Enter, handing it to a waiting request if
// there is one.
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
	if q.waiting.Len() == 0 {
		q.busy--
		return
	}
	e := q.waiting.Front()
	if q.lifo() {
		e = q.waiting.Back()
	}
	close(q.waiting.Remove(e).(chan struct{}))
}

// Waiting returns the number of requests waiting for a slot.
func (q *LIFOQueue) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting.Len()
}
