package resource

import (
	"context"
	"fmt"

	"github.com/moirai-go/moirai/internal/clock"
	"github.com/moirai-go/moirai/internal/resrt"
	"github.com/moirai-go/moirai/internal/taskx"
)

// Semaphore is a weighted FIFO semaphore that records, per task, the units
// held and the time spent waiting. Acquire and Release cost a
// compare-and-swap each when nobody waits. The controller's semaphores and
// queues keep the acquisitions of one unit from the task's counters too,
// as a [Mutex] does with its holder: the task that takes one unit of an
// empty semaphore of at most 255 units is named in the units word (its
// tag and the millisecond it took the unit, on the controller's coarse
// clock), and while the word is in use a task that takes one unit names
// itself in one of four holder slots (by its ID), each on a cache line of
// its own; either hold is added to the task's counters after the release,
// and [Resource.LiveHolds] reports it meanwhile. A slot keeps its unit
// after the release while nobody waits, and the slot's next holder takes
// it without writing the units word: tasks of different slots taking and
// releasing a unit each do not contend. Kept units are not in use: a
// request that does not fit without them, a waiter, and Resize take them
// back. While a task is named in the word, at most 255 units are in use.
// Other acquisitions (several units, a slot in use, after a wait) are
// added to the task's counters as they happen, and a named task that
// holds more units moves its named unit there. It must be created by
// [NewSemaphore] (or the controller's Semaphore method).
type Semaphore struct{ pool }

// pool is what a Semaphore and a Queue are: units of a sema accounted to
// a resource, the holders of one unit named in the sema when it is on the
// controller's clock (see Semaphore).
type pool struct {
	sem sema
	res *Resource
}

// take takes n units for the task in ctx, waiting in arrival order, or,
// when backlog > 0 and that many wait already, only if they are free at
// once (ErrRejected otherwise). It is Semaphore.Acquire and Queue.Enter.
func (p *pool) take(ctx context.Context, n, backlog int64) (Permit, error) {
	t := taskx.FromContext(ctx)
	if t == nil || taskx.Flagged(t) || p.res.preempt.Load() != nil {
		if err := p.res.arrive(ctx, t); err != nil {
			return Permit{}, err
		}
	}
	if n == 1 && t != nil && p.sem.clk != nil {
		// One unit of an empty semaphore: the task is named in the units
		// word. Else a unit kept in the task's holder slot is taken
		// without writing the units word (which, while the semaphore's
		// holders take their units from their slots, nobody writes, and
		// the load finds in every core's cache), unless others wait or
		// the semaphore was resized below the units in use.
		if c := p.sem.cur.Load(); c == 0 {
			if p.sem.nwait.Load() == 0 && p.sem.size.Load() <= iUnitMask &&
				p.sem.cur.CompareAndSwap(0, inlineWord(t, p.sem.clk.Coarse())) {
				if id := t.ID(); id != p.sem.claimed.Load() {
					taskx.Claim(t, p.res.id)
					p.sem.claimed.Store(id)
				}
				return Permit{sem: &p.sem, res: p.res, t: t, n: 1 | pNamed}, nil
			}
		} else if sl := &p.sem.slots[slotIndex(t.ID())]; sl.w.Load() == slotKept && p.sem.nwait.Load() == 0 {
			if units(c) <= p.sem.size.Load() {
				if pm, ok := p.takeSlot(t, sl, slotKept); ok {
					return pm, nil
				}
			} else {
				p.sem.reclaim()
			}
		}
	}
	var c int64
	if backlog > 0 && p.sem.nwait.Load() >= backlog {
		var ok bool
		if c, ok = p.sem.tryTakeWord(n); !ok {
			return Permit{}, fmt.Errorf("%w: %q has %d waiting", ErrRejected, p.res.name, p.sem.nwait.Load())
		}
	} else {
		var err error
		if c, err = p.sem.acquire(ctx, t, n, p.res); err != nil {
			return Permit{}, err
		}
	}
	if n == 1 && t != nil && p.sem.clk != nil && c >= 0 && (c&iFlag == 0 || inlineTag(c) != taskx.HolderTag(t.ID())) {
		if pm, ok := p.takeSlot(t, &p.sem.slots[slotIndex(t.ID())], 0); ok {
			return pm, nil
		}
	}
	p.res.acquire(t, n)
	p.unname(t, c)
	if c < 0 && p.res.armed() && p.sem.nwait.Load() > 0 {
		p.res.poke() // after a wait, with others waiting still
	}
	return Permit{sem: &p.sem, res: p.res, t: t, n: n}, nil
}

// resize is Resize: below 1, it returns an error saying so with format
// (which takes the size).
func (p *pool) resize(size int64, format string) error {
	if size < 1 {
		return fmt.Errorf("resource %q: "+format, p.res.name, size)
	}
	p.sem.resize(size, p.res.name)
	return nil
}

// NewSemaphore returns a semaphore of size units accounted to r.
func NewSemaphore(r *Resource, size int64) *Semaphore {
	s := &Semaphore{pool{res: r}}
	s.sem.size.Store(size)
	return s
}

// newCoarseSemaphore is NewSemaphore on the controller's clock: a task
// taking one unit is named in its units word or a holder slot (through
// internal/resrt).
func newCoarseSemaphore(r *Resource, size int64, clk *clock.Clock) *Semaphore {
	s := NewSemaphore(r, size)
	s.onClock(clk)
	return s
}

// onClock lets the pool name its holders of one unit in its units word
// and holder slots, stamped by clk's coarse value, and reports them to
// the resource.
func (p *pool) onClock(clk *clock.Clock) {
	p.sem.clk = clk
	p.res.live.Store(&liveHolder{s: &p.sem})
}

func init() {
	resrt.NewSemaphore = newCoarseSemaphore
	resrt.NewQueue = newCoarseQueue
	resrt.Arm = arm
	resrt.ArmPreempt = armPreempt
}

// Resource returns the resource the semaphore is accounted to.
func (s *Semaphore) Resource() *Resource { return s.res }

// Acquire takes n units for the task in ctx, waiting in arrival order. On
// success it returns a Permit to release; on failure (ctx done, or the
// task cancelled by the controller) it returns context.Cause(ctx) and leaves
// the semaphore unchanged. Asking for more units than the semaphore's size,
// or for n ≤ 0, is an error at once.
func (s *Semaphore) Acquire(ctx context.Context, n int64) (Permit, error) {
	if n <= 0 || n > s.sem.size.Load() {
		s.res.taskOf(ctx)
		return Permit{}, fmt.Errorf("resource %q: acquire of %d units from a semaphore of %d", s.res.name, n, s.sem.size.Load())
	}
	return s.take(ctx, n, 0)
}

// TryAcquire takes n units for the task in ctx if they are free and nobody
// waits, without waiting.
func (s *Semaphore) TryAcquire(ctx context.Context, n int64) (Permit, bool) {
	t := s.res.taskOf(ctx)
	if n <= 0 || s.sem.nwait.Load() != 0 {
		return Permit{}, false
	}
	c, ok := s.sem.tryTakeWord(n)
	if !ok {
		return Permit{}, false
	}
	s.res.acquire(t, n)
	s.unname(t, c)
	return Permit{sem: &s.sem, res: s.res, t: t, n: n}, true
}

// Resize changes the semaphore's size; waiters that now fit are admitted.
// Units held above a smaller size stay held until released. A size below
// 1 is an error.
func (s *Semaphore) Resize(size int64) error { return s.resize(size, "semaphore size %d below 1") }

// Size returns the semaphore's size.
func (s *Semaphore) Size() int64 { return s.sem.size.Load() }

// InUse returns the units held now.
func (s *Semaphore) InUse() int64 { return s.sem.inUse() }

// Waiting returns the number of acquirers waiting now.
func (s *Semaphore) Waiting() int64 { return s.sem.nwait.Load() }
