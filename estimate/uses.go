package estimate

import (
	"math"
	"time"

	"github.com/moirai-go/moirai/snapshot"
)

// Uses learns, per task class and resource, the total use of a task of
// the class that ends: the [Spent] of each of its resources when it was
// last seen. A task seen in one snapshot and absent from the next has
// ended. The estimate of a class and resource is an exponentially
// weighted mean (weight 1/4 to the newest task), so it follows a class
// whose work changes; a class that never used a resource has no estimate
// for it.
//
// A cancelled task (shown cancelled, or named by [Uses.Skip]) did not do
// its whole work: what it used is a lower bound of its class's use, and
// teaches only that. A task that reported its progress p (Done > 0) says
// how much more it had to do: its bound is its use divided by p, the
// whole use its own report implies. Only a class none of whose tasks
// has ended on its own learns from cancelled ones: where the task used
// more than the class's estimate, or the class has none, it counts as an
// ended task of that use; where it used less, or did not use a resource,
// it teaches nothing. A class seen to end is known from its ends, so a
// light class's task cancelled by mistake while it stalled does not make
// the class look heavy. Without this, a
// class whose every task is cancelled as the culprit of an overload, as
// a recurring heavy report is, would never be known to be heavy, and each
// of its tasks would be found afresh by the measured contention, a window
// after it started.
//
// It is what gives a newcomer its future use: a task of a class whose
// tasks used 2 s of a pool will, at 0.1 s, still use about 1.9 s, whatever
// its progress says (a task that just started has used almost nothing, so
// a future use computed from its use so far is almost nothing).
//
// At most maxClasses classes and 64 resources per class are kept; tasks
// of further classes are not learned. A Uses is not safe for concurrent
// use. The zero value is not usable; call [NewUses].
type Uses struct {
	classes    map[string]*classUse
	maxClasses int
	seen       map[uint64]seenUse
	gen        uint64
	// risen holds the classes whose peak rose since [Uses.Risen] last
	// drained it.
	risen map[string]struct{}
}

type classUse struct {
	mean map[string]float64 // resource name → resource-seconds
	low  map[string]float64 // a lower envelope of the same (see Typical)
	// bound holds the resources whose estimate a cancelled task raised
	// last (see AtLeast).
	bound map[string]bool
	n     float64
	// ended is set once a task of the class has ended on its own.
	ended bool
	// peak holds, per resource, an upper envelope of the use of the
	// class's live tasks that work while they hold it (see Mixed): it
	// rises at once and falls as slowly as low rises.
	peak map[string]float64
}

type seenUse struct {
	class string
	gen   uint64
	skip  bool
	spent []resSpent
	// progress is the task's reported progress, when it reported some
	// (0 otherwise): what a cancelled task's use is scaled by.
	progress float64
}

type resSpent struct {
	res   string
	spent float64
}

const (
	usesWeight       = 0.25
	usesMaxResources = 64
)

// NewUses returns a learner that keeps at most maxClasses classes (1024 if
// maxClasses < 1).
func NewUses(maxClasses int) *Uses {
	if maxClasses < 1 {
		maxClasses = 1024
	}
	return &Uses{classes: map[string]*classUse{}, maxClasses: maxClasses, seen: map[uint64]seenUse{}}
}

// Observe learns from a snapshot: the tasks of the previous observed
// snapshot that are absent from s ended. Call it with every snapshot of a
// loop, in order.
func (u *Uses) Observe(s *snapshot.Snapshot) {
	u.gen++
	for i := range s.Tasks {
		t := &s.Tasks[i]
		st := u.seen[t.ID]
		st.class, st.gen, st.skip = t.Class, u.gen, t.Cancelled
		st.progress = 0
		if p, ok := t.Progress(); ok && p > 0 && !math.IsNaN(p) {
			st.progress = clampProgress(p)
		}
		st.spent = st.spent[:0]
		first, n := int(t.First), int(t.N)
		if first >= 0 && n >= 0 && first+n <= len(s.Usage) {
			for ui := first; ui < first+n; ui++ {
				us := &s.Usage[ui]
				if us.Res < 0 || int(us.Res) >= len(s.Resources) {
					continue
				}
				r := &s.Resources[us.Res]
				if v := Spent(&us.Usage, r.Capacity); v > 0 {
					st.spent = append(st.spent, resSpent{r.Name, v})
				}
			}
			if c := u.classes[t.Class]; c != nil && !t.Blocked && !t.Cancelled && c.observePeak(s, first, n, st.progress > 0) {
				if u.risen == nil {
					u.risen = map[string]struct{}{}
				}
				u.risen[t.Class] = struct{}{}
			}
		}
		u.seen[t.ID] = st
	}
	for id, st := range u.seen {
		if st.gen == u.gen {
			continue
		}
		delete(u.seen, id)
		if st.skip {
			u.recordAtLeast(st.class, st.spent, st.progress)
		} else {
			u.record(st.class, st.spent)
		}
	}
}

// observePeak raises the class's peak use of each resource to what its
// live task, whose usage is s.Usage[first:first+n], used of it while it
// worked: its use less the share of its hold it spent waiting for other
// resources (a request holding a worker slot while it waits for a lock
// does not work on the slot). Only a task that holds several units of the
// resource, or reports its progress (reported says so), counts: a task
// holding one unit for long, with nothing of its own to say it works, is
// as likely a light one stretched by a host that took the CPU away (the
// other processes of a busy machine) or by the scheduler, and every light
// task then looks like that; the heavy members of a class that merges
// routes hold several units, or report their progress. It reports
// whether a peak rose.
func (c *classUse) observePeak(s *snapshot.Snapshot, first, n int, reported bool) (rose bool) {
	var waited time.Duration
	for ui := first; ui < first+n; ui++ {
		waited += max(s.Usage[ui].Wait, 0)
	}
	for ui := first; ui < first+n; ui++ {
		us := &s.Usage[ui]
		if us.Res < 0 || int(us.Res) >= len(s.Resources) || us.Hold <= 0 || (us.Held < 2 && !reported) {
			continue
		}
		r := &s.Resources[us.Res]
		v := Spent(&us.Usage, r.Capacity)
		working := us.Hold - (waited - max(us.Wait, 0))
		if working <= 0 || !(v > 0) {
			continue
		}
		v *= min(float64(working)/float64(us.Hold), 1)
		if c.peak == nil {
			c.peak = map[string]float64{}
		}
		if p, ok := c.peak[r.Name]; (ok && v > p) || (!ok && len(c.peak) < usesMaxResources) {
			c.peak[r.Name] = v
			rose = true
		}
	}
	return rose
}

// Risen calls fn with each class whose peak use of a resource (see
// [Uses.Mixed]) rose since the last call, and forgets them: the classes
// that may have become mixed.
func (u *Uses) Risen(fn func(class string)) {
	for class := range u.risen {
		fn(class)
	}
	clear(u.risen)
}

// record adds one ended task of class that used spent.
func (u *Uses) record(class string, spent []resSpent) {
	c := u.classFor(class)
	if c == nil {
		return
	}
	c.ended = true
	// A resource the task did not use counts as 0 for the class.
	for name, m := range c.mean {
		if !hasRes(spent, name) {
			c.mean[name] = m * (1 - usesWeight)
			c.low[name] *= 1 - usesWeight
		}
	}
	for name, p := range c.peak {
		// The peak falls as slowly as the lower envelope rises.
		c.peak[name] = p - usesRise*(p-spentOf(spent, name))
	}
	for _, rs := range spent {
		delete(c.bound, rs.res)
		m, ok := c.mean[rs.res]
		if !ok {
			c.firstUse(rs.res, rs.spent)
			continue
		}
		c.mean[rs.res] = m + usesWeight*(rs.spent-m)
		l := c.low[rs.res]
		w := usesWeight
		if rs.spent > l {
			w = usesRise
		}
		c.low[rs.res] = l + w*(rs.spent-l)
	}
	c.n++
}

// classFor returns the estimates of class, new ones if the class has
// none, or nil if it has none and maxClasses classes have.
func (u *Uses) classFor(class string) *classUse {
	c := u.classes[class]
	if c == nil {
		if len(u.classes) >= u.maxClasses {
			return nil
		}
		c = &classUse{mean: map[string]float64{}, low: map[string]float64{}}
		u.classes[class] = c
	}
	return c
}

// firstUse starts the class's estimates of a resource its tasks were not
// seen using: at the task's use if it is the class's first, else at the
// task's use weighed against the tasks before, which used none. It reports
// false, learning nothing, if the class follows usesMaxResources
// resources already.
func (c *classUse) firstUse(res string, spent float64) bool {
	switch {
	case len(c.mean) >= usesMaxResources:
		return false
	case c.n == 0:
		c.mean[res], c.low[res] = spent, spent
	default:
		c.mean[res] = usesWeight * spent
		c.low[res] = usesWeight * spent
	}
	return true
}

// recordAtLeast adds one cancelled task of class that used spent before
// its cancellation, having reported progress (0: none): a lower bound of
// its class's use (see [Uses]). Each resource it used more of than the
// class's estimate is learned as an ended task's use; the others are left
// as they are.
func (u *Uses) recordAtLeast(class string, spent []resSpent, progress float64) {
	if progress > 0 {
		scaled := make([]resSpent, len(spent))
		for i, rs := range spent {
			scaled[i] = resSpent{rs.res, rs.spent / progress}
		}
		spent = scaled
	}
	c := u.classes[class]
	if c != nil && c.ended {
		// The class is known from its own ends: one of its tasks
		// cancelled, as a culprit or by mistake while it stalled,
		// teaches nothing (a light class's stalled victim would make it
		// look heavy, and its next tasks culprits).
		return
	}
	var above []resSpent
	for _, rs := range spent {
		if c == nil || c.n == 0 {
			above = append(above, rs)
			continue
		}
		if m, ok := c.mean[rs.res]; !ok || rs.spent > m || rs.spent > c.low[rs.res] {
			above = append(above, rs)
		}
	}
	if len(above) == 0 {
		return
	}
	if c == nil {
		if c = u.classFor(class); c == nil {
			return
		}
	}
	if c.bound == nil {
		c.bound = map[string]bool{}
	}
	for _, rs := range above {
		m, ok := c.mean[rs.res]
		if !ok {
			// For the class's first task, the bound is all that is known.
			if c.firstUse(rs.res, rs.spent) {
				c.bound[rs.res] = true
			}
			continue
		}
		if rs.spent > m {
			c.mean[rs.res] = m + usesWeight*(rs.spent-m)
			c.bound[rs.res] = true
		}
		if l := c.low[rs.res]; rs.spent > l {
			c.low[rs.res] = l + usesRise*(rs.spent-l)
		}
	}
	if c.n == 0 {
		c.n = 1
	}
}

// usesRise is the weight of a task that used more than the lower envelope:
// it takes some 700 such tasks in a row to bring the envelope halfway up.
const usesRise = usesWeight / 256

// Typical returns a lower estimate of the total use of resource res by a
// task of class (see [Uses.Total]): it follows a class whose tasks use
// less at once (weight 1/4) and one whose tasks use more only slowly
// (weight 1/1024), starting from the first task's use. A few tasks of a
// light class stalled while they held the resource (the victims of an
// overload) do not make the class look heavy; a class whose first task was
// heavy is known to be heavy from its end, or from its cancellation (its
// use then, or the use its reported progress implies: see [Uses]).
func (u *Uses) Typical(class, res string) (float64, bool) {
	c := u.classes[class]
	if c == nil || c.n == 0 {
		return 0, false
	}
	return c.low[res], true
}

// EachHeavy calls fn with every resource on which some class's typical
// use ([Uses.Typical]) is at least floor resource-seconds (a resource
// once for each such class): a task of it holding the resource is a
// culprit as soon as others wait. It takes one pass over the classes.
func (u *Uses) EachHeavy(floor float64, fn func(res string)) {
	for _, c := range u.classes {
		if c.n == 0 {
			continue
		}
		for res, low := range c.low {
			if low >= floor {
				fn(res)
			}
		}
	}
}

func spentOf(spent []resSpent, name string) float64 {
	for _, rs := range spent {
		if rs.res == name {
			return rs.spent
		}
	}
	return 0
}

// The spread that makes a class mixed (see [Uses.Mixed]).
const (
	// MixedPeak: a live task of the class used this many times the floor.
	MixedPeak = 8
	// MixedSpread: its use is this many times the class's typical use.
	MixedSpread = 100
)

// Mixed reports whether the tasks of class use some resource in amounts
// that differ by orders of magnitude, as a class that merges routes
// does (a report and a lookup behind one pattern): the class's tasks that
// ended on their own (not a cancelled task's lower bound) typically use
// less than floor resource-seconds of it ([Uses.Typical]) while one of
// its live tasks, working while it held several units of it or
// reporting its progress (its waits for other resources left out; a
// task holding one unit with no progress of its own may be a light one
// stretched by the host), has used [MixedPeak] × floor or more, and
// [MixedSpread] times the typical use or more. The class's history then
// says nothing about any one of its tasks: not that a newcomer is light,
// nor that an old holder is about to end. It returns the first such
// resource, the class's typical use of it and the peak. The peak is
// remembered, falling slowly (as [Uses.Typical] rises) with every task of
// the class that ends.
func (u *Uses) Mixed(class string, floor float64) (res string, typical, peak float64, ok bool) {
	c := u.classes[class]
	if c == nil || c.n == 0 || !c.ended || !(floor > 0) {
		return "", 0, 0, false
	}
	for name, p := range c.peak {
		if c.bound[name] {
			continue // known only from a cancelled task: a lower bound
		}
		low := c.low[name]
		if mixedUse(low, p, floor) && (res == "" || name < res) {
			res, typical, peak, ok = name, low, p, true
		}
	}
	return res, typical, peak, ok
}

// mixedUse reports whether a typical use and a peak make a class mixed
// against floor (see [Uses.Mixed]).
func mixedUse(typical, peak, floor float64) bool {
	return typical < floor && peak >= MixedPeak*floor && peak >= MixedSpread*typical
}

// EachMixed calls fn with every resource on which some class is mixed
// ([Uses.Mixed]), once for each such class: a task of it that holds the
// resource may be a culprit by its own progress as soon as others wait.
// It takes one pass over the classes.
func (u *Uses) EachMixed(floor float64, fn func(res string)) {
	if !(floor > 0) {
		return
	}
	for _, c := range u.classes {
		if c.n == 0 || !c.ended {
			continue
		}
		for name, p := range c.peak {
			if !c.bound[name] && mixedUse(c.low[name], p, floor) {
				fn(name)
			}
		}
	}
}

func hasRes(spent []resSpent, name string) bool {
	for _, rs := range spent {
		if rs.res == name {
			return true
		}
	}
	return false
}

// Total returns the learned total use of resource res by a task of class,
// in resource-seconds (see [Spent]), and false when no task of the class
// that ended used res: a class seen to end without touching a resource
// says nothing of a task of it that holds one (a session's statement seen
// for a poll as it was killed, say, is not the class's use of every
// lock).
func (u *Uses) Total(class, res string) (float64, bool) {
	c := u.classes[class]
	if c == nil || c.n == 0 {
		return 0, false
	}
	m, ok := c.mean[res]
	return m, ok
}

// AtLeast reports whether the estimate of class and res ([Uses.Total]) is
// only a lower bound: the last task of the class that taught it was
// cancelled having used more than the class's estimate, and no task of
// the class has ended on its own having used res since. A class whose
// tasks are cancelled before they end (a recurring culprit) is known to
// use at least that much; how much more, nobody has seen.
func (u *Uses) AtLeast(class, res string) bool {
	c := u.classes[class]
	return c != nil && c.bound[res]
}

// Ended returns the number of tasks of class learned.
func (u *Uses) Ended(class string) float64 {
	if c := u.classes[class]; c != nil {
		return c.n
	}
	return 0
}

// Skip marks task id as cancelled: a task chosen for cancellation did not
// do its class's whole work, whether or not a later snapshot shows it
// cancelled, and its end teaches only a lower bound (see [Uses]). A task
// not seen yet is ignored.
func (u *Uses) Skip(id uint64) {
	if st, ok := u.seen[id]; ok {
		st.skip = true
		u.seen[id] = st
	}
}
