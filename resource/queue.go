package resource

import (
	"context"

	"github.com/moirai-go/moirai/internal/clock"
)

// Queue is a bounded set of worker slots with a waiting line in front of
// it: a worker pool, a connection pool, a database's thread concurrency
// limit. Entering measures, per task, the time spent queued (a wait on the
// resource) and the time spent in a slot (a hold). A Queue may bound its
// line: past the bound, Enter rejects at once with [ErrRejected] rather
// than queue. It must be created by [NewQueue].
type Queue struct {
	pool
	backlog int64
}

// NewQueue returns a queue of slots worker slots accounted to r. backlog
// bounds the number of requests waiting for a slot; 0 means unbounded.
func NewQueue(r *Resource, slots, backlog int64) *Queue {
	q := &Queue{pool: pool{res: r}, backlog: backlog}
	q.sem.size.Store(slots)
	return q
}

// newCoarseQueue is NewQueue on the controller's clock (see
// newCoarseSemaphore).
func newCoarseQueue(r *Resource, slots, backlog int64, clk *clock.Clock) *Queue {
	q := NewQueue(r, slots, backlog)
	q.onClock(clk)
	return q
}

// Resource returns the resource the queue is accounted to.
func (q *Queue) Resource() *Resource { return q.res }

// Enter waits for a free slot for the task in ctx and returns a Permit to
// release when the work is done. It returns [ErrRejected] at once if the
// line is full, and context.Cause(ctx) if ctx is done first; on failure the
// queue is unchanged.
func (q *Queue) Enter(ctx context.Context) (Permit, error) { return q.take(ctx, 1, q.backlog) }

// Do runs fn in a slot of the queue, in the calling goroutine, and returns
// its error, or the error of Enter if no slot was had. A panic in fn
// releases the slot and continues to unwind.
func (q *Queue) Do(ctx context.Context, fn func(context.Context) error) error {
	p, err := q.Enter(ctx)
	if err != nil {
		return err
	}
	defer p.Release()
	return fn(ctx)
}

// Resize changes the number of slots; waiters that now fit are admitted.
// Slots in use above a smaller size stay in use until released. A size
// below 1 is an error.
func (q *Queue) Resize(slots int64) error { return q.resize(slots, "queue of %d slots") }

// Slots returns the number of worker slots.
func (q *Queue) Slots() int64 { return q.sem.size.Load() }

// Running returns the slots in use now.
func (q *Queue) Running() int64 { return q.sem.inUse() }

// Waiting returns the requests waiting for a slot now.
func (q *Queue) Waiting() int64 { return q.sem.nwait.Load() }
