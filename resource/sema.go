package resource

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/moirai-go/moirai/internal/clock"
	"github.com/moirai-go/moirai/task"
)

// sema is the weighted FIFO semaphore under Semaphore and Queue. When
// nobody waits, acquiring is a compare-and-swap; once anyone waits, newcomers
// queue behind them, so a large request is not starved by small ones.
//
// The units word and claimed (written when the named holder changes) have
// a cache line of their own, apart from the words the fast paths only read
// (size, nwait, clk), which stay in every core's cache while the units
// word moves between the cores that take units; each holder slot has one
// too, so that holders taking kept units from their own slots do not
// share a line.
type sema struct {
	_   [cacheLine]byte
	cur atomic.Int64
	// claimed is the ID of the last task named in cur (stored right after
	// it is named, and only when it changes). That task has claimed its
	// accounting entry for the resource (see Mutex.claimed), and the ID
	// tells two tasks with the same tag (IDs 2²⁹ apart) apart.
	claimed atomic.Uint64
	_       [cacheLine - 16]byte

	size  atomic.Int64
	nwait atomic.Int64 // waiters queued; read without mu by the fast paths
	// clk, when not nil, is the controller's clock, whose coarse value
	// stamps a holder named in cur; nil: no holder is named there.
	clk *clock.Clock
	_   [cacheLine - 24]byte

	mu sync.Mutex
	q  waitQueue
	_  [cacheLine]byte

	// slots name holders of one unit beside the one named in cur (see
	// holderSlot); each has a cache line of its own.
	slots [nSlots]holderSlot
}

// cacheLine is the size of a cache line, by which sema keeps its written
// words apart from those it only reads.
const cacheLine = 64

// tryTake takes n units if they are free. While a holder is named, at
// most iUnitMask units are in use (a semaphore resized beyond that admits
// more once the holder has released its unit).
func (s *sema) tryTake(n int64) bool {
	_, ok := s.tryTakeWord(n)
	return ok
}

// tryTakeWord is tryTake, also returning the units word it replaced: the
// caller tells from it whether its task was the holder named there.
func (s *sema) tryTakeWord(n int64) (old int64, ok bool) {
	for {
		c := s.cur.Load()
		u := units(c)
		if u+n > s.size.Load() || c&iFlag != 0 && u+n > iUnitMask {
			if s.reclaim() {
				continue // units kept in holder slots were given back
			}
			return c, false
		}
		if s.cur.CompareAndSwap(c, c+n) {
			return c, true
		}
	}
}

// acquire takes n units for t, waiting in FIFO order. On success it
// returns the units word the units were taken from, or -1 when they were
// granted by another goroutine (after a wait). On failure it returns the
// cause and leaves s unchanged.
func (s *sema) acquire(ctx context.Context, t *task.Task, n int64, r *Resource) (int64, error) {
	if s.nwait.Load() == 0 {
		if c, ok := s.tryTakeWord(n); ok {
			return c, nil
		}
	}
	return -1, s.acquireSlow(ctx, t, n, r)
}

// acquireSlow is acquire once the units were not free at once.
func (s *sema) acquireSlow(ctx context.Context, t *task.Task, n int64, r *Resource) error {
	done := ctx.Done()
	s.mu.Lock()
	s.nwait.Add(1)
	if s.q.Front() == nil && s.tryTake(n) {
		s.nwait.Add(-1)
		s.mu.Unlock()
		return nil
	}
	w := getWaiter(t)
	w.n = n
	s.q.PushBack(w)
	s.mu.Unlock()
	r.waitBegin(t)
	if r.kind == KindQueue {
		r.queueLength.Add(1)
		defer r.queueLength.Add(-1)
	}
	select {
	case <-w.ch:
		r.waitEnd(t)
		return w.err
	case <-done:
	}
	s.mu.Lock()
	if w.Queued() {
		wasHead := s.q.Front() == w
		s.q.Remove(w)
		s.nwait.Add(-1)
		if wasHead {
			s.notifyLocked()
		}
		s.mu.Unlock()
	} else {
		s.mu.Unlock()
		<-w.ch
		if w.err != nil { // refused by a resize: nothing was taken
			r.waitEnd(t)
			return w.err
		}
		s.release(n)
	}
	r.waitEnd(t)
	return causeOf(ctx, t)
}

// release gives back n units and wakes the waiters they let through. It
// refuses, returning an error, to release more units than are held (and
// the unit of a holder named in the word, which only that holder gives
// back).
func (s *sema) release(n int64) error {
	for {
		c := s.cur.Load()
		u := units(c)
		if c&iFlag != 0 {
			u-- // the named holder's unit
		}
		if u -= s.kept(); u < n {
			return overRelease(n, u)
		}
		if s.cur.CompareAndSwap(c, c-n) {
			break
		}
	}
	if s.nwait.Load() > 0 {
		s.notify()
	}
	return nil
}

// reclaim gives the units kept in holder slots back to the units word
// (see holderSlot), and reports whether there were any.
func (s *sema) reclaim() bool {
	any := false
	for i := range s.slots {
		sl := &s.slots[i]
		if sl.w.Load() == slotKept && sl.w.CompareAndSwap(slotKept, 0) {
			s.cur.Add(-1) // as in Permit.releaseSlot
			any = true
		}
	}
	return any
}

// kept returns how many holder slots keep a unit.
func (s *sema) kept() int64 {
	k := int64(0)
	for i := range s.slots {
		if s.slots[i].w.Load() == slotKept {
			k++
		}
	}
	return k
}

// inUse returns the units held: those counted in the units word but the
// ones kept in holder slots.
func (s *sema) inUse() int64 { return max(units(s.cur.Load())-s.kept(), 0) }

func overRelease(n, held int64) error {
	return fmt.Errorf("released %d units with only %d held", n, held)
}

// notify grants the waiters that now fit.
func (s *sema) notify() {
	s.mu.Lock()
	s.notifyLocked()
	s.mu.Unlock()
}

// notifyLocked grants waiters from the head of the queue while their
// requests fit.
func (s *sema) notifyLocked() {
	for w := s.q.Front(); w != nil; w = s.q.Front() {
		if !s.tryTake(w.n) {
			return
		}
		s.q.Remove(w)
		s.nwait.Add(-1)
		w.granted = true
		w.ch <- struct{}{}
	}
}

// resize changes the capacity, admitting waiters if it grew. Units held
// above a reduced capacity stay held until released. Waiters that ask for
// more than the new capacity could never be served: they are refused, so
// they do not hold up the waiters behind them.
func (s *sema) resize(size int64, name string) {
	s.mu.Lock()
	s.size.Store(size)
	if s.reclaim() && s.q.Front() == nil {
		s.mu.Unlock()
		return
	}
	for w := s.q.Front(); w != nil; {
		next := s.q.Next(w)
		if w.n > size {
			s.q.Remove(w)
			s.nwait.Add(-1)
			w.err = fmt.Errorf("resource %q: resized to %d, below the %d units asked for", name, size, w.n)
			w.ch <- struct{}{}
		}
		w = next
	}
	s.notifyLocked()
	s.mu.Unlock()
}
