package taskx

import (
	"sync/atomic"
	"time"
)

// slot is the live, lock-free form of a Usage. Events from several
// goroutines of one task, and reads by the controller, never need a lock,
// and the events of an uncontended acquisition cost one compare-and-swap
// each:
//
//   - hold packs the units held (low 24 bits) with the clock time, in
//     microseconds modulo 2⁴⁰ (12.7 days), at which the task went from
//     holding nothing to holding something (high 40 bits); it is 0 while
//     the task holds nothing. A single atomic load tells whether a hold is
//     in progress and since when.
//   - holdNs accumulates finished holds. A hold that starts and ends within
//     one tick of the coarse clock adds nothing, so it costs no add.
//   - wait and waitNs do the same for waits in progress and finished; waits
//     counts the waits begun (modulo 2³²).
type slot struct {
	res       atomic.Uint32
	waits     atomic.Uint32
	hold      atomic.Uint64
	holdNs    atomic.Int64
	wait      atomic.Uint64
	waitNs    atomic.Int64
	evictions atomic.Int64
}

// A claimed slot's res word holds the resource ID (low 20 bits) and a tag
// of the owning task's ID (high 12 bits). Blocks are recycled; the tag lets
// an event of an ended task that raced its End recognise that the slot is
// no longer its own, so it changes nothing there.
const (
	idBits   = 20
	idMask   = 1<<idBits - 1
	tagShift = idBits
	// MaxResources is the number of resource IDs the accounting can tell
	// apart.
	MaxResources = idMask
)

// key returns the res word of t's slot for resource id.
func (t *Task) key(id ResourceID) uint32 {
	return uint32(id)&idMask | uint32(t.id)<<tagShift
}

// tag returns the tag part of t's res words.
func (t *Task) tag() uint32 { return uint32(t.id) << tagShift }

const (
	unitBits = 24
	unitMask = 1<<unitBits - 1
	// MaxUnits is the most units of one resource a task can hold at once.
	MaxUnits = unitMask
	timeBits = 64 - unitBits
	timeMask = 1<<timeBits - 1
)

// micros converts a clock value to the packed time field.
func micros(now int64) uint64 { return uint64(now/1000) & timeMask }

// since returns the time from the packed start of word to now.
func since(word uint64, now int64) time.Duration {
	d := (micros(now) - word>>unitBits) & timeMask
	if d > timeMask/2 {
		return 0 // now is before the start: read with an older clock value
	}
	return time.Duration(d) * time.Microsecond
}

// inlineSlots is how many resources a task accounts for without allocating.
const inlineSlots = 8

// chunkSlots is the size of each further block of slots, allocated the
// first time a task touches more resources than fit inline.
const chunkSlots = 8

type slotChunk struct {
	slots [chunkSlots]slot
	next  atomic.Pointer[slotChunk]
}

// slotBlock is a task's accounting: inline slots and, past them, chunks.
// Blocks are recycled by the registry, so Begin does not allocate one in
// the steady state.
//
// A block is zeroed when its task ends, while it is still in cache, and
// not touched by Begin at all: a task that uses no resource never reads
// or writes its block.
type slotBlock struct {
	slots [inlineSlots]slot
	more  atomic.Pointer[slotChunk]
	meta  blockMeta
}

// blockMeta is the part of a task's state that most tasks never change.
// Its fields are zero until the task uses them (stateMeta marks that).
type blockMeta struct {
	// Progress as reported.
	done, total atomic.Int64

	// Activity accounting (pBox's activate/freeze): exec is the time spent
	// active in finished activities; actStart the start of the current one,
	// 0 meaning the task's Begin; extra the activities after the first.
	exec     atomic.Int64
	actStart atomic.Int64
	extra    atomic.Int64

	// doneSeen is when the controller first saw the task's context done
	// while the task had not ended (0: not seen).
	doneSeen atomic.Int64

	// Penalties (pBox): the length of the one pending, the time served,
	// the number served.
	penalty, served, penalties atomic.Int64
}

// reset zeroes what the task used of the block. A reader (the
// controller's snapshot) may still be reading the block, so every word is
// cleared with an atomic store, and only words that are not zero already:
// a lock held and released leaves little to clear. Claimed slots are found
// by their res word, not by the task's count, so a slot claimed by an event
// racing End is cleared too.
func (b *slotBlock) reset(meta bool) {
	for i := range b.slots {
		if b.slots[i].res.Load() == 0 {
			break // slots are claimed in order: the rest are free
		}
		b.slots[i].clear()
		if i == inlineSlots-1 {
			b.more.Store(nil)
		}
	}
	if meta {
		b.meta.clear()
	}
}

func (m *blockMeta) clear() {
	for _, w := range [...]*atomic.Int64{&m.done, &m.total, &m.exec, &m.actStart, &m.extra, &m.doneSeen, &m.penalty, &m.served, &m.penalties} {
		zero(w)
	}
}

func (s *slot) clear() {
	if s.waits.Load() != 0 {
		s.waits.Store(0)
	}
	if s.hold.Load() != 0 {
		s.hold.Store(0)
	}
	if s.wait.Load() != 0 {
		s.wait.Store(0)
	}
	zero(&s.holdNs)
	zero(&s.waitNs)
	zero(&s.evictions)
	s.res.Store(0) // last: a reader stops at the first unclaimed slot
}

func zero(w *atomic.Int64) {
	if w.Load() != 0 {
		w.Store(0)
	}
}

// slotFor returns the task's slot for resource id and its res word,
// claiming a free slot the first time the task touches the resource, or
// nil if the task has ended.
func (t *Task) slotFor(id ResourceID) (*slot, uint32) {
	if s, key := t.firstSlot(id); s != nil {
		return s, key
	}
	return t.slotForSlow(id)
}

// firstSlot returns the task's first slot and its res word if the task
// has not ended and the slot is the one for resource id; nil otherwise.
// Most events are on the first resource a task touched: this is slotFor's
// look there, small enough to inline into the events.
func (t *Task) firstSlot(id ResourceID) (*slot, uint32) {
	if key := t.key(id); t.state.Load()&stateEnded == 0 && t.blk.slots[0].res.Load() == key {
		return &t.blk.slots[0], key
	}
	return nil, 0
}

// slotForSlow is slotFor past the first slot.
func (t *Task) slotForSlow(id ResourceID) (*slot, uint32) {
	if t.state.Load()&stateEnded != 0 {
		t.reg.lateEvents.Add(1)
		return nil, 0
	}
	key := t.key(id)
	b := t.blk
	for i := range b.slots {
		if s := b.slots[i].match(t, key); s != nil {
			return s, key
		}
	}
	next := &b.more
	for {
		c := next.Load()
		if c == nil {
			c = new(slotChunk)
			if !next.CompareAndSwap(nil, c) {
				c = next.Load()
			}
		}
		for i := range c.slots {
			if s := c.slots[i].match(t, key); s != nil {
				return s, key
			}
		}
		next = &c.next
	}
}

// match returns s if it is t's slot for key, claiming it if it is free.
func (s *slot) match(t *Task, key uint32) *slot {
	switch s.res.Load() {
	case key:
		return s
	case 0:
		if s.res.CompareAndSwap(0, key) {
			t.state.Add(claimedOne)
			return s
		}
		if s.res.Load() == key {
			return s
		}
	}
	return nil
}

// readInto stores the slot as a Usage at time now in u.
func (s *slot) readInto(u *Usage, now int64) {
	h, w := s.hold.Load(), s.wait.Load()
	u.Resource = ResourceID(s.res.Load() & idMask)
	u.Held = int64(h & unitMask)
	u.Hold = time.Duration(s.holdNs.Load())
	u.Waiting = int32(w & unitMask)
	u.Wait = time.Duration(s.waitNs.Load())
	u.Waits = int64(s.waits.Load())
	u.Evictions = s.evictions.Load()
	if u.Held > 0 {
		u.Hold += since(h, now)
	}
	if u.Waiting > 0 {
		u.Wait += since(w, now)
	}
}

// read returns the slot as a Usage at time now.
func (s *slot) read(now int64) Usage {
	var u Usage
	s.readInto(&u, now)
	return u
}

// Outcomes of take and give.
const (
	opDone    = iota
	opRefused // overflow, or not enough units
	opStale   // the slot is no longer the caller's
)

// take adds n units to a packed word of slot s, stamping the start when it
// was 0. It changes nothing if the units would overflow (refused) or s no
// longer holds key (stale).
func (s *slot) take(word *atomic.Uint64, key uint32, n uint64, now int64) int {
	for {
		if s.res.Load() != key {
			return opStale
		}
		old := word.Load()
		nw := old + n
		if old&unitMask == 0 {
			nw = micros(now)<<unitBits | n
		} else if old&unitMask+n > unitMask {
			return opRefused
		}
		if word.CompareAndSwap(old, nw) {
			return opDone
		}
	}
}

// give removes n units from a packed word of slot s. When that empties
// it, it adds the finished period to acc. It changes nothing if fewer than
// n units are there (refused) or s no longer holds key (stale).
func (s *slot) give(word *atomic.Uint64, acc *atomic.Int64, key uint32, n uint64, now int64) int {
	for {
		if s.res.Load() != key {
			return opStale
		}
		old := word.Load()
		u := old & unitMask
		if u < n {
			return opRefused
		}
		nw := old - n
		if u == n {
			nw = 0
		}
		if word.CompareAndSwap(old, nw) {
			if nw == 0 {
				addSince(acc, old, now)
			}
			return opDone
		}
	}
}

// addSince adds to acc the time from the packed start of word to now.
func addSince(acc *atomic.Int64, word uint64, now int64) {
	if d := since(word, now); d > 0 {
		acc.Add(int64(d))
	}
}
