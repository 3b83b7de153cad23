package task

import (
	"errors"
	"sync/atomic"
	"time"
)

// ResourceID identifies a resource in a task's accounting. IDs are handed
// out by package resource when a name is resolved; 0 is never a valid ID.
type ResourceID uint32

// ErrOverRelease is returned when a task releases more units of a resource
// than it holds. The release is ignored: the accounting is left as it was.
var ErrOverRelease = errors.New("task: release of more units than held")

// Usage is what one task did with one resource: the accounting the event
// vocabulary (WaitBegin, WaitEnd, Acquire, Release, Evicted) feeds.
// Durations include a wait or a hold still in progress when the Usage was
// read.
type Usage struct {
	Resource  ResourceID
	Waiting   int32         // waits in progress
	Held      int64         // units held now
	Hold      time.Duration // time holding at least one unit
	Wait      time.Duration // time waiting for the resource
	Waits     int64         // waits begun
	Evictions int64         // units of others evicted by this task
}

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
}

// reset zeroes what the task used of the block. A reader (the
// controller's snapshot) may still be reading the block, so every word is
// cleared with an atomic store, and only words that are not zero already:
// a lock held and released leaves little to clear.
func (b *slotBlock) reset(claimed int, meta bool) {
	for i := range min(claimed, inlineSlots) {
		b.slots[i].clear()
	}
	if claimed > inlineSlots {
		b.more.Store(nil)
	}
	if meta {
		m := &b.meta
		for _, w := range [...]*atomic.Int64{&m.done, &m.total, &m.exec, &m.actStart, &m.extra, &m.doneSeen} {
			zero(w)
		}
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

// slotFor returns the task's slot for resource id, claiming a free one the
// first time the task touches the resource, or nil if the task has ended.
func (t *Task) slotFor(id ResourceID) *slot {
	if t.state.Load()&stateEnded != 0 {
		t.reg.lateEvents.Add(1)
		return nil
	}
	b := t.blk
	for i := range b.slots {
		s := &b.slots[i]
		switch ResourceID(s.res.Load()) {
		case id:
			return s
		case 0:
			if s.res.CompareAndSwap(0, uint32(id)) {
				t.state.Add(claimedOne)
				return s
			}
			if ResourceID(s.res.Load()) == id {
				return s
			}
		}
	}
	return b.slotForSlow(t, id)
}

func (b *slotBlock) slotForSlow(t *Task, id ResourceID) *slot {
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
			s := &c.slots[i]
			switch ResourceID(s.res.Load()) {
			case id:
				return s
			case 0:
				if s.res.CompareAndSwap(0, uint32(id)) {
					t.state.Add(claimedOne)
					return s
				}
				if ResourceID(s.res.Load()) == id {
					return s
				}
			}
		}
		next = &c.next
	}
}

// read returns the slot as a Usage at time now.
func (s *slot) read(now int64) Usage {
	h, w := s.hold.Load(), s.wait.Load()
	u := Usage{
		Resource:  ResourceID(s.res.Load()),
		Held:      int64(h & unitMask),
		Hold:      time.Duration(s.holdNs.Load()),
		Waiting:   int32(w & unitMask),
		Wait:      time.Duration(s.waitNs.Load()),
		Waits:     int64(s.waits.Load()),
		Evictions: s.evictions.Load(),
	}
	if u.Held > 0 {
		u.Hold += since(h, now)
	}
	if u.Waiting > 0 {
		u.Wait += since(w, now)
	}
	return u
}

// take adds n units to a packed word, stamping the start when it was 0.
// It returns false, changing nothing, if the units would overflow.
func take(word *atomic.Uint64, n uint64, now int64) bool {
	for {
		old := word.Load()
		nw := old + n
		if old&unitMask == 0 {
			nw = micros(now)<<unitBits | n
		} else if old&unitMask+n > unitMask {
			return false
		}
		if word.CompareAndSwap(old, nw) {
			return true
		}
	}
}

// give removes n units from a packed word. When that empties it, it adds
// the finished period to acc. It returns false, changing nothing, if fewer
// than n units are there.
func give(word *atomic.Uint64, acc *atomic.Int64, n uint64, now int64) bool {
	for {
		old := word.Load()
		u := old & unitMask
		if u < n {
			return false
		}
		nw := old - n
		if u == n {
			nw = 0
		}
		if word.CompareAndSwap(old, nw) {
			if nw == 0 {
				if d := since(old, now); d > 0 {
					acc.Add(int64(d))
				}
			}
			return true
		}
	}
}

// WaitBegin records that the task starts waiting for resource id. Every
// WaitBegin must be followed by one [Task.WaitEnd]. It is safe for concurrent
// use; on a nil or ended task it does nothing.
//
// Most code never calls it: the instrumented primitives of package resource
// emit the events themselves.
func (t *Task) WaitBegin(id ResourceID) {
	if t == nil {
		return
	}
	s := t.slotFor(id)
	if s == nil {
		return
	}
	if take(&s.wait, 1, t.reg.clock.Now()) {
		s.waits.Add(1)
	} else {
		t.reg.badEvents.Add(1)
	}
}

// WaitEnd records that a wait begun by [Task.WaitBegin] is over, whether the
// resource was obtained or not. A WaitEnd without a WaitBegin is counted
// and otherwise ignored.
func (t *Task) WaitEnd(id ResourceID) {
	if t == nil {
		return
	}
	s := t.slotFor(id)
	if s == nil {
		return
	}
	if !give(&s.wait, &s.waitNs, 1, t.reg.clock.Now()) {
		t.reg.badEvents.Add(1)
	}
}

// ErrTooManyUnits is returned when a task would hold more than [MaxUnits]
// units of one resource.
var ErrTooManyUnits = errors.New("task: too many units held of one resource")

// Acquire records that the task now holds n more units of resource id.
// Values of n ≤ 0 are ignored. A task holds at most [MaxUnits] units of one
// resource at a time (count pages or KiB, not bytes, for large pools); past
// that Acquire returns [ErrTooManyUnits] and changes nothing.
func (t *Task) Acquire(id ResourceID, n int64) error {
	if n <= 0 || t == nil {
		return nil
	}
	s := t.slotFor(id)
	if s == nil {
		return nil
	}
	if n > MaxUnits || !take(&s.hold, uint64(n), t.reg.clock.Now()) {
		t.reg.badEvents.Add(1)
		return ErrTooManyUnits
	}
	return nil
}

// Release records that the task gave back n units of resource id. Releasing
// more than the task holds returns [ErrOverRelease] and changes nothing.
func (t *Task) Release(id ResourceID, n int64) error {
	if n <= 0 || t == nil {
		return nil
	}
	s := t.slotFor(id)
	if s == nil {
		return nil
	}
	if n > MaxUnits || !give(&s.hold, &s.holdNs, uint64(n), t.reg.clock.Now()) {
		t.reg.badEvents.Add(1)
		return ErrOverRelease
	}
	return nil
}

// Evicted records that the task's work evicted n units of resource id that
// others were using (a buffer-pool page, a cache entry).
func (t *Task) Evicted(id ResourceID, n int64) {
	if n <= 0 || t == nil {
		return
	}
	if s := t.slotFor(id); s != nil {
		s.evictions.Add(n)
	}
}

// Usage returns the task's accounting for resource id at the current clock
// time, and false if the task never touched it.
func (t *Task) Usage(id ResourceID) (u Usage, found bool) {
	if t == nil {
		return Usage{}, false
	}
	now := t.reg.clock.Now()
	t.EachUsage(now, func(x Usage) {
		if x.Resource == id {
			u, found = x, true
		}
	})
	return u, found
}

// AppendUsage appends the task's accounting for every resource it touched,
// read at time now (a value of the controller's clock), and returns the
// extended slice.
func (t *Task) AppendUsage(dst []Usage, now int64) []Usage {
	t.EachUsage(now, func(u Usage) { dst = append(dst, u) })
	return dst
}

// EachUsage calls fn with the task's accounting for every resource it
// touched, read at time now, in the order the resources were first touched.
func (t *Task) EachUsage(now int64, fn func(Usage)) {
	if t == nil {
		return
	}
	if t.state.Load()&stateEnded != 0 {
		return
	}
	t.blk.each(t.claimed(), now, fn)
}

// each calls fn with the first claimed slots of b.
func (b *slotBlock) each(claimed int, now int64, fn func(Usage)) {
	if claimed == 0 {
		return
	}
	for i := range b.slots {
		s := &b.slots[i]
		if s.res.Load() == 0 {
			return
		}
		fn(s.read(now))
	}
	for c := b.more.Load(); c != nil; c = c.next.Load() {
		for i := range c.slots {
			s := &c.slots[i]
			if s.res.Load() == 0 {
				return
			}
			fn(s.read(now))
		}
	}
}

// Claimed returns how many resources the task has touched: the number of
// entries EachUsage reports (0 once the task has ended).
func (t *Task) Claimed() int {
	if t == nil || t.Ended() {
		return 0
	}
	return t.claimed()
}
