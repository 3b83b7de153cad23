package resource

import (
	"sync/atomic"
	"time"

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

// nSlots is the number of holder slots of a sema: a task may be named in
// slot slotIndex(its ID).
const (
	nSlotBits = 2
	nSlots    = 1 << nSlotBits
)

// slotIndex is the holder slot a task whose ID is id may be named in. The
// registry hands IDs out in runs per P, so the tasks two cores run at once
// have IDs a run apart, alike in their low bits: taken modulo nSlots they
// named the same slot and took turns at it (BenchmarkSemaphoreParallel,
// 12 → 94 ns). A multiplicative hash spreads IDs a run apart as it does
// consecutive ones.
func slotIndex(id uint64) uint64 { return id * 0x9E3779B97F4A7C15 >> (64 - nSlotBits) }

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
	j := slotIndex(id)
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
	sl := &p.sem.slots[slotIndex(t.ID())]
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
