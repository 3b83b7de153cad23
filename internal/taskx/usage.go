package taskx

import (
	"errors"
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

// waitBegin records that the task starts waiting for resource id. Every
// WaitBegin must be followed by one Task.waitEnd. It is safe for concurrent
// use; on a nil or ended task it does nothing.
//
// Most code never calls it: the instrumented primitives of package resource
// emit the events themselves.
func (t *Task) waitBegin(id ResourceID) {
	if t == nil {
		return
	}
	if s, key := t.slotFor(id); s != nil {
		if op := s.take(&s.wait, key, 1, t.reg.clock.Now()); op == opDone {
			s.waits.Add(1)
		} else {
			t.reg.counted(op)
		}
	}
}

// waitEnd records that a wait begun by Task.waitBegin is over, whether the
// resource was obtained or not. A WaitEnd without a WaitBegin is counted
// and otherwise ignored.
func (t *Task) waitEnd(id ResourceID) {
	if t == nil {
		return
	}
	if s, key := t.slotFor(id); s != nil {
		t.reg.counted(s.give(&s.wait, &s.waitNs, key, 1, t.reg.clock.Now()))
	}
}

// ErrTooManyUnits is returned when a task would hold more than [MaxUnits]
// units of one resource.
var ErrTooManyUnits = errors.New("task: too many units held of one resource")

// acquire records that the task now holds n more units of resource id.
// Values of n ≤ 0 are ignored. A task holds at most [MaxUnits] units of one
// resource at a time (count pages or KiB, not bytes, for large pools); past
// that Acquire returns [ErrTooManyUnits] and changes nothing.
func (t *Task) acquire(id ResourceID, n int64) error { return t.holdEvent(id, n, true) }

// release records that the task gave back n units of resource id. Releasing
// more than the task holds returns [ErrOverRelease] and changes nothing.
func (t *Task) release(id ResourceID, n int64) error { return t.holdEvent(id, n, false) }

// holdEvent is acquire (take) and release (!take): it adds n units to the
// task's hold of resource id or takes them out, or, when it cannot,
// counts the bad event and returns ErrTooManyUnits or ErrOverRelease. It
// looks the slot up itself, not through slotFor, so that firstSlot is
// inlined on the events' path.
func (t *Task) holdEvent(id ResourceID, n int64, take bool) error {
	if n <= 0 || t == nil {
		return nil
	}
	s, key := t.firstSlot(id)
	if s == nil {
		if s, key = t.slotForSlow(id); s == nil {
			return nil
		}
	}
	refused := ErrOverRelease
	if take {
		refused = ErrTooManyUnits
	}
	if n > MaxUnits {
		t.reg.badEvents.Add(1)
		return refused
	}
	var r int
	if take {
		r = s.take(&s.hold, key, uint64(n), t.reg.clock.Now())
	} else {
		r = s.give(&s.hold, &s.holdNs, key, uint64(n), t.reg.clock.Now())
	}
	if t.reg.counted(r) {
		return refused
	}
	return nil
}

// counted counts an event of a slot operation's result op: a bad event
// when the slot refused it (the application's misuse), a late one when
// the slot had moved on to another resource or task. It reports whether
// the event was refused.
func (r *Registry) counted(op int) (refused bool) {
	switch op {
	case opRefused:
		r.badEvents.Add(1)
		return true
	case opStale:
		r.lateEvents.Add(1)
	}
	return false
}

// claim makes sure the task has an accounting entry for resource id, for a
// primitive that tracks its holds in progress itself (see
// Options.LiveHold) and adds them with AddHold when they end. Only the
// first call for a resource costs an atomic operation.
func (t *Task) claim(id ResourceID) {
	if t != nil {
		t.slotFor(id)
	}
}

// units returns the units of resource id in the task's accounting (not
// those of the holds in progress that primitives track themselves).
func (t *Task) units(id ResourceID) int64 {
	if t == nil || t.state.Load()&stateEnded != 0 {
		return 0
	}
	s, key := t.firstSlot(id)
	if s == nil {
		if s, key = t.slotForSlow(id); s == nil {
			return 0
		}
	}
	if s.res.Load() != key {
		return 0
	}
	return int64(s.hold.Load() & unitMask)
}

// addHold adds a finished hold of d to the task's accounting for resource
// id. It costs one atomic add, none when d ≤ 0.
func (t *Task) addHold(id ResourceID, d time.Duration) {
	if t == nil || d <= 0 {
		return
	}
	if s, key := t.slotFor(id); s != nil && s.res.Load() == key {
		s.holdNs.Add(int64(d))
	}
}

// evicted records that the task's work evicted n units of resource id that
// others were using (a buffer-pool page, a cache entry).
func (t *Task) evicted(id ResourceID, n int64) {
	if n <= 0 || t == nil {
		return
	}
	if s, key := t.slotFor(id); s != nil && s.res.Load() == key {
		s.evictions.Add(n)
	}
}

// usage returns the task's accounting for resource id at the current clock
// time, and false if the task never touched it.
func (t *Task) usage(id ResourceID) (u Usage, found bool) {
	if t == nil {
		return Usage{}, false
	}
	now := t.reg.clock.Now()
	t.eachUsage(now, func(x Usage) {
		if x.Resource == id {
			u, found = x, true
		}
	})
	return u, found
}

// appendUsage appends the task's accounting for every resource it touched,
// read at time now (a value of the controller's clock), and returns the
// extended slice.
func (t *Task) appendUsage(dst []Usage, now int64) []Usage {
	t.eachUsage(now, func(u Usage) { dst = append(dst, u) })
	return dst
}

// eachUsage calls fn with the task's accounting for every resource it
// touched, read at time now, in the order the resources were first touched,
// including holds in progress that primitives track themselves (see
// Options.LiveHold).
func (t *Task) eachUsage(now int64, fn func(Usage)) {
	if t == nil {
		return
	}
	live := t.reg.liveHold
	if live == nil {
		t.eachSlot(now, fn)
		return
	}
	tag := HolderTag(t.id)
	t.eachSlot(now, func(u Usage) {
		if held, ok := live(u.Resource, tag, now); ok {
			u.Held++
			u.Hold += held
		}
		fn(u)
	})
}

// readSlots stores in dst, up to its length, what EachSlot would report,
// and returns how many entries it stored. It calls no function per entry
// (one per chunk of slots), which makes it the fastest way to read a
// task's accounting.
func (t *Task) readSlots(dst []Usage, now int64) int {
	if t == nil || t.state.Load()&stateEnded != 0 || t.claimed() == 0 {
		return 0
	}
	tag := t.tag()
	n, more := readRun(t.blk.slots[:], tag, dst, 0, now)
	for c := t.blk.more.Load(); more && c != nil; c = c.next.Load() {
		n, more = readRun(c.slots[:], tag, dst, n, now)
	}
	return n
}

// readRun stores in dst, from index n on, the slots of run claimed with
// tag. It returns the index after the last one stored, and whether the
// slots after run may be claimed and dst has room for them.
func readRun(run []slot, tag uint32, dst []Usage, n int, now int64) (int, bool) {
	for i := range run {
		s := &run[i]
		r := s.res.Load()
		if r == 0 || n == len(dst) {
			return n, false
		}
		if r&^idMask == tag {
			s.readInto(&dst[n], now)
			n++
		}
	}
	return n, true
}

// eachSlot is EachUsage without the holds in progress that primitives
// track themselves: the controller's snapshot adds those from one reading
// of each primitive instead of one per task.
func (t *Task) eachSlot(now int64, fn func(Usage)) {
	if t == nil {
		return
	}
	if t.state.Load()&stateEnded != 0 {
		return
	}
	if t.claimed() > 0 {
		t.blk.each(t.tag(), now, fn)
	}
}

// each calls fn with the claimed slots of b whose tag is tag, in order.
func (b *slotBlock) each(tag uint32, now int64, fn func(Usage)) {
	for i := range b.slots {
		if !b.slots[i].visit(tag, now, fn) {
			return
		}
	}
	for c := b.more.Load(); c != nil; c = c.next.Load() {
		for i := range c.slots {
			if !c.slots[i].visit(tag, now, fn) {
				return
			}
		}
	}
}

// visit calls fn with s if it is claimed with tag, and reports whether
// slots after s may be claimed.
func (s *slot) visit(tag uint32, now int64, fn func(Usage)) bool {
	r := s.res.Load()
	if r == 0 {
		return false
	}
	if r&^idMask == tag {
		fn(s.read(now))
	}
	return true
}

// claims returns how many resources the task has touched: the number of
// entries EachUsage reports (0 once the task has ended).
func (t *Task) claims() int {
	if t == nil || t.ended() {
		return 0
	}
	return t.claimed()
}
