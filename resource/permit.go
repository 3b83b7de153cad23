package resource

import (
	"errors"
	"fmt"

	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/task"
)

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
