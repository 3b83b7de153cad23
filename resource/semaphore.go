package resource

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moirai-go/moirai/internal/clock"
	"github.com/moirai-go/moirai/internal/resrt"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/task"
)

// The units word of a sema (cur) is the units taken (in use, or kept in
// a holder slot, see holderSlot), except while a holder is named in it, as
// a Mutex names its holder: a task that takes one unit of an empty
// semaphore of at most iUnitMask units, on the controller's clock, takes
// it and names itself in one compare-and-swap, and its hold is added to
// its counters after the release. Then the word holds the flag iFlag, the
// holder's tag, the millisecond (modulo 2²⁵, 9.3 hours) it took the unit,
// and the units taken in its low bits, its own and those others took
// meanwhile (named in holder slots, or accounted by their tasks as
// usual).
const (
	iUnitBits = 8
	iUnitMask = 1<<iUnitBits - 1 // units in use while a holder is named
	iMsShift  = iUnitBits
	iMsBits   = 25
	iMsMask   = 1<<iMsBits - 1
	iTagShift = iMsShift + iMsBits // 29 bits of taskx.HolderTag
	iFlag     = 1 << 62
)

// units returns the units in use in the units word c.
func units(c int64) int64 {
	if c&iFlag != 0 {
		return c & iUnitMask
	}
	return c
}

// inlineWord returns the units word naming t as the holder of one unit
// since now.
func inlineWord(t *task.Task, now int64) int64 {
	ms := uint64(now) / uint64(time.Millisecond) & iMsMask // now ≥ 0
	return int64(iFlag | taskx.HolderTag(t.ID())<<iTagShift | ms<<iMsShift | 1)
}

// inlineTag returns the tag of the holder named in the units word c.
func inlineTag(c int64) uint64 { return uint64(c) &^ iFlag >> iTagShift }

// inlineHeld returns how long the holder named in c has held its unit at
// clock value now.
func inlineHeld(c, now int64) time.Duration {
	nowMs := uint64(now) / uint64(time.Millisecond) & iMsMask
	d := (nowMs - uint64(c)>>iMsShift) & iMsMask
	if d >= 1<<(iMsBits-1) {
		return 0 // read with an older clock value
	}
	return time.Duration(d) * time.Millisecond
}

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

// nSlots is the number of holder slots of a sema: a task whose ID is j
// modulo nSlots may be named in slot j.
const nSlots = 4

// holderSlot names a task holding one unit of a sema whose units word
// names another holder, or none but counts other units: the task takes
// its unit in the units word as usual and names itself here, the tag and
// the millisecond in the same layout as the units word (without units),
// instead of adding the unit to its accounting; its hold is added to its
// counters after the release, as the word's holder's is. After the
// release the slot keeps the unit (slotKept, still counted in the units
// word) while nobody waits, and the slot's next holder takes it with one
// compare-and-swap on the slot alone; sema.reclaim gives kept units back
// to the word.
type holderSlot struct {
	w atomic.Int64 // 0: free; slotKept; or the holder's name
	// claimed is the ID of the last task named in w (see sema.claimed).
	claimed atomic.Uint64
	_       [cacheLine - 16]byte
}

// slotKept is the word of a holder slot that keeps a unit: taken by the
// last holder named there, counted in the units word, and free to its
// next holder while nobody waits (see holderSlot).
const slotKept = 1

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

// Permit is the right to units of a [Semaphore] or a slot of a [Queue],
// returned by Acquire and Enter. Release gives it back. A Permit is a small
// value; copying it does not copy the right, so release each permit once.
type Permit struct {
	sem *sema
	res *Resource
	t   *task.Task
	// n is the units, with pNamed or pSlot if the unit was taken by naming
	// t in the units word or a holder slot (it may have moved to t's
	// accounting since, see pool.unname). Flags in n keep a Permit four
	// words, which return in registers (a fifth field made Acquire cost
	// more than twice as much).
	n int64
}

// Flags in Permit.n: pNamed for a unit taken named in the units word,
// pSlot for one taken named in a holder slot (whose index is in the bits
// from pSlotShift).
const (
	pNamed     = 1 << 62
	pSlot      = 1 << 61
	pSlotShift = 56
	pUnits     = 1<<pSlotShift - 1
)

// ErrZeroPermit is returned by Release on a Permit that no Acquire returned.
var ErrZeroPermit = errors.New("resource: release of a zero Permit")

// Release gives the permit's units back and charges the hold to the task
// that acquired them. Releasing units that are not held (a permit released
// twice) returns an error, counts the mistake on the resource, and changes
// nothing.
func (p Permit) Release() error {
	if p.sem == nil {
		return ErrZeroPermit
	}
	if p.n > pUnits {
		if p.n == 1|pNamed && p.releaseNamed() || p.n&pSlot != 0 && p.releaseSlot() {
			return nil
		}
		p.n = 1
	}
	// The task's accounting first: a permit released twice while others
	// hold units would otherwise give back their units. res.release counts
	// the misuse.
	if err := p.res.release(p.t, p.n); err != nil {
		return err
	}
	if err := p.sem.release(p.n); err != nil {
		p.res.misuse.Add(1)
		return fmt.Errorf("resource %q: %w", p.res.name, err)
	}
	return nil
}

// releaseNamed gives back the unit of a permit taken named whose task is
// still named in the units word (the task's only permit of the semaphore then:
// a task named acquiring more moves its named unit to its accounting, see
// pool.unname), and adds the hold to the task's counters after the release
// (one atomic add, none for a hold shorter than a millisecond). It returns
// false, changing nothing, if the word names no holder or another task
// (the tag, then the ID of the task last named, tell):
// the permit's unit was not taken named, or was moved to the task's
// accounting, or was released already; then it is released as any other.
func (p Permit) releaseNamed() bool {
	s := p.sem
	tag := taskx.HolderTag(p.t.ID())
	for {
		c := s.cur.Load()
		if c&iFlag == 0 || inlineTag(c) != tag || s.claimed.Load() != p.t.ID() {
			return false
		}
		if s.cur.CompareAndSwap(c, c&iUnitMask-1) {
			if s.nwait.Load() > 0 {
				s.notify()
			}
			if d := inlineHeld(c, s.clk.Coarse()); d > 0 {
				taskx.AddHold(p.t, p.res.id, d)
			}
			return true
		}
	}
}

// releaseSlot gives back the unit of a permit taken named in a holder
// slot whose task is still named there, and adds the hold to the task's
// counters. It returns false, changing nothing, if the slot names another
// task or none: the unit was moved to the task's accounting (see
// pool.unname), or released already.
func (p Permit) releaseSlot() bool {
	s := p.sem
	sl := &s.slots[p.n>>pSlotShift&(nSlots-1)]
	w := sl.w.Load()
	if w&iFlag == 0 || inlineTag(w) != taskx.HolderTag(p.t.ID()) || sl.claimed.Load() != p.t.ID() {
		return false
	}
	if s.nwait.Load() == 0 {
		// Nobody waits: the slot keeps the unit for its next holder.
		if !sl.w.CompareAndSwap(w, slotKept) {
			return false
		}
		// Read after the slot is written, as acquireSlow counts a waiter
		// before it reclaims kept units: if one came meanwhile, at least
		// one of the two sees the other, and the unit goes back.
		if s.nwait.Load() > 0 && sl.w.CompareAndSwap(slotKept, 0) {
			s.cur.Add(-1)
			s.notify()
		}
	} else {
		if !sl.w.CompareAndSwap(w, 0) {
			return false
		}
		// The unit is counted in the units word, and so is the unit of a
		// holder named there: subtracting one never reaches the tag or
		// the millisecond, nor refuses.
		s.cur.Add(-1)
		s.notify()
	}
	if d := inlineHeld(w, s.clk.Coarse()); d > 0 {
		taskx.AddHold(p.t, p.res.id, d)
	}
	return true
}

// Units returns how many units the permit holds (0 for a zero Permit).
func (p Permit) Units() int64 { return p.n & pUnits }

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
	if t == nil || taskx.Flagged(t) {
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
		} else if sl := &p.sem.slots[t.ID()&(nSlots-1)]; sl.w.Load() == slotKept && p.sem.nwait.Load() == 0 {
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
		if pm, ok := p.takeSlot(t, &p.sem.slots[t.ID()&(nSlots-1)], 0); ok {
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

// takeSlot names t in its holder slot sl if that holds old: 0 when t has
// just taken one unit in the units word and is not named there, slotKept
// when t takes the unit the slot keeps. It reports false, changing
// nothing, if the slot holds something else: the unit is then accounted
// as usual (or, for a kept unit, taken as usual).
//
// A task named in a slot holds no other unit of the semaphore, as one
// named in the word: if it holds units in its accounting, the named unit
// moves there at once. The slot is written before the accounting is read,
// and pool.unname, after a task's accounting is written, reads the slot:
// of two goroutines of a task, one naming it and one accounting a unit,
// at least one sees the other's (and moveSlot lets only one of them move
// the unit).
func (p *pool) takeSlot(t *task.Task, sl *holderSlot, old int64) (Permit, bool) {
	id := t.ID()
	j := id & (nSlots - 1)
	w := slotWord(t, p.sem.clk.Coarse())
	if sl.w.Load() != old || !sl.w.CompareAndSwap(old, w) {
		return Permit{}, false
	}
	if id != sl.claimed.Load() {
		taskx.Claim(t, p.res.id)
		sl.claimed.Store(id)
	}
	if taskx.Units(t, p.res.id) > 0 {
		p.moveSlot(t, sl, w)
		return Permit{sem: &p.sem, res: p.res, t: t, n: 1}, true
	}
	return Permit{sem: &p.sem, res: p.res, t: t, n: 1 | pSlot | int64(j)<<pSlotShift}, true
}

// slotWord is the word of a holder slot naming t since now: the units
// word's layout, without units.
func slotWord(t *task.Task, now int64) int64 { return inlineWord(t, now) &^ iUnitMask }

// moveSlot moves the unit of t named in slot sl with word w to t's
// accounting, unless it was released or moved meanwhile.
func (p *pool) moveSlot(t *task.Task, sl *holderSlot, w int64) {
	if p.res.acquire(t, 1) != nil {
		return
	}
	if !sl.w.CompareAndSwap(w, 0) {
		p.res.release(t, 1) // released or moved meanwhile
		return
	}
	if d := inlineHeld(w, p.sem.clk.Coarse()); d > 0 {
		taskx.AddHold(t, p.res.id, d)
	}
}

// unname is called after t took units accounted as usual, from the units
// word c (-1: not known, the units were granted after a wait): if t is
// named in the units word or in its holder slot, its named unit moves to
// its accounting too, so that the time it holds both is counted once. The
// unit is added to t's accounting before the name is cleared: if the
// named permit is released meanwhile, the unit is taken back out.
//
// When c is known, t was named in the word after it took its units only
// if it was named before (nobody is named while other units are held):
// c tells, without another read of the word.
func (p *pool) unname(t *task.Task, c int64) {
	if t == nil || p.sem.clk == nil {
		return
	}
	tag := taskx.HolderTag(t.ID())
	sl := &p.sem.slots[t.ID()&(nSlots-1)]
	if w := sl.w.Load(); w&iFlag != 0 && inlineTag(w) == tag && sl.claimed.Load() == t.ID() {
		p.moveSlot(t, sl, w)
	}
	if c >= 0 && (c&iFlag == 0 || inlineTag(c) != tag) {
		return
	}
	c = p.sem.cur.Load()
	if c&iFlag == 0 || inlineTag(c) != tag || p.sem.claimed.Load() != t.ID() {
		return // t is not named (checking the ID, another task of its tag may be)
	}
	if p.res.acquire(t, 1) != nil {
		return
	}
	for {
		if p.sem.cur.CompareAndSwap(c, c&iUnitMask) {
			if d := inlineHeld(c, p.sem.clk.Coarse()); d > 0 {
				taskx.AddHold(t, p.res.id, d)
			}
			return
		}
		if c = p.sem.cur.Load(); c&iFlag == 0 || inlineTag(c) != tag {
			p.res.release(t, 1) // released meanwhile as a named unit
			return
		}
	}
}

// liveHolds stores in dst the tags of the tasks named in the units word
// and the holder slots and for how long each has held its unit at clock
// value now (see Resource.LiveHolds).
func (s *sema) liveHolds(now int64, dst *LiveHolds) {
	if c := s.cur.Load(); c&iFlag != 0 {
		dst.add(inlineTag(c), inlineHeld(c, now))
	}
	for i := range s.slots {
		if w := s.slots[i].w.Load(); w&iFlag != 0 {
			dst.add(inlineTag(w), inlineHeld(w, now))
		}
	}
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
