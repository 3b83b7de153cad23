package cancel

import (
	"math"
	"slices"
	"time"

	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
)

// usageOf returns the usage of Tasks[ti], or nil when a source gave it
// out of bounds.
func usageOf(s *snapshot.Snapshot, ti int) []snapshot.Usage {
	t := &s.Tasks[ti]
	first, n := int(t.First), int(t.N)
	if first < 0 || n < 0 || first+n > len(s.Usage) {
		return nil
	}
	return s.Usage[first : first+n]
}

// heavyOn reports whether class is known to be heavy on resource r: the
// runtime has seen its tasks end having used r for the minimum gain or
// more, typically (estimate.Uses.Typical: a light class whose tasks
// were stalled for a while is not heavy).
func (a *Atropos) heavyOn(class string, r *snapshot.Resource) bool {
	// The process-wide minimum gain, not the waiters' (gainFloors): a
	// class is heavy or not whoever waits at the moment.
	total, ok := a.uses.Typical(class, r.Name)
	return ok && total >= a.cfg.minGain.Seconds() && !a.mixed(class)
}

// lightOn reports whether class is known to be light on resource r: the
// runtime has seen its tasks end, and not heavy on r (see heavyOn). A
// class with no ended task is neither: the first report of a class
// runs with no history, and counting its units among the others' demand
// would make the next report, once the class is known heavy, look like
// an overload for as long as the moving mean remembers the first.
func (a *Atropos) lightOn(class string, r *snapshot.Resource) bool {
	total, ok := a.uses.Typical(class, r.Name)
	return ok && total < a.cfg.minGain.Seconds() && !a.mixed(class)
}

// mixed reports whether class is mixed (estimate.Uses.Mixed against the
// process-wide minimum gain): its tasks' uses differ by orders of
// magnitude, so its history says nothing of one of them. Neither heavy
// nor light, its tasks' gains come from their own holds, progress and
// age.
func (a *Atropos) mixed(class string) bool {
	_, _, _, ok := a.uses.Mixed(class, a.cfg.minGain.Seconds())
	return ok
}

// observeOthers updates, per lock and queue resource, the moving mean of
// the units held and waited for by tasks of classes known to be light on
// it (lightOn).
func (a *Atropos) observeOthers(s *snapshot.Snapshot) {
	alpha := min(float64(s.Window)/float64(time.Second), 1)
	demand := make([]float64, len(s.Resources))
	for ti := range s.Tasks {
		t := &s.Tasks[ti]
		for _, u := range usageOf(s, ti) {
			if u.Res < 0 || int(u.Res) >= len(s.Resources) {
				continue
			}
			r := &s.Resources[u.Res]
			if r.Kind != resource.KindQueue && r.Kind != resource.KindLock {
				continue
			}
			if n := u.Held + int64(max(u.Waiting, 0)); n > 0 && a.lightOn(t.Class, r) {
				demand[u.Res] += float64(n)
			}
		}
	}
	for i := range s.Resources {
		r := &s.Resources[i]
		if r.Kind != resource.KindQueue && r.Kind != resource.KindLock {
			continue
		}
		k := keyOf(r)
		m, ok := a.others[k]
		if !ok {
			m = demand[i]
		}
		a.others[k] = m + alpha*(demand[i]-m)
	}
	if len(a.others) > 2*len(s.Resources)+64 {
		for k := range a.others {
			if !slices.ContainsFunc(s.Resources, func(r snapshot.Resource) bool { return keyOf(&r) == k }) {
				delete(a.others, k)
			}
		}
	}
}

// gainFloors fills a.gain, per resource of s, the minimum gain in
// seconds that a task's future use of it must reach to be worth a
// cancellation: half the tightest objective among the tasks waiting for
// it whose misses count (a waiter of the default objective counting with
// the process-wide minimum gain), the process-wide minimum gain when no
// such task waits. A cancellation protects the waiters: a culprit that
// releases the resource within half their objective leaves them time to
// meet it, however tight or loose the process default is.
func (a *Atropos) gainFloors(s *snapshot.Snapshot) {
	n := len(s.Resources)
	def := a.cfg.minGain.Seconds()
	a.gain = slices.Grow(a.gain[:0], n)[:n]
	for i := range a.gain {
		a.gain[i] = -1
	}
	for ti := range s.Tasks {
		t := &s.Tasks[ti]
		if !t.HasObjective() {
			continue
		}
		g := def
		if t.Objective > 0 {
			g = t.Objective.Seconds() / 2
		}
		for _, u := range usageOf(s, ti) {
			if i := int(u.Res); u.Waiting > 0 && i >= 0 && i < n && (a.gain[i] < 0 || g < a.gain[i]) {
				a.gain[i] = g
			}
		}
	}
	for i := range a.gain {
		if a.gain[i] < 0 {
			a.gain[i] = def
		}
	}
}

// knownHeavy fills a.khCand, per resource of s, the index of a
// cancellable task of a class known to be heavy on that lock or queue
// resource (see heavyOn), or of a mixed class and heavy by its own
// progress (see heavyByProgress), holding it while others wait, when the
// known-heavy tasks' demand oversubscribes it, or -1. Contention measured
// over the window lags an overload by the window's length; known-heavy
// tasks will keep their demand for what is left of their class's use, so
// when that demand (the units they hold and wait for) leaves the others
// less than their mean demand a plus √a (square-root headroom, as for
// re-execution; a lock: any known-heavy holder), the resource counts as
// contended from the acquisition that made it so, and the choice that
// follows (least loss among the candidates that free enough) takes the
// newcomer, which has lost nearly nothing yet, rather than the older
// holder. A class's first task has no history: it is found by the
// measured contention, as before; one known-heavy task that leaves the
// others room is left alone.
func (a *Atropos) knownHeavy(s *snapshot.Snapshot) {
	a.gainFloors(s)
	n := len(s.Resources)
	a.khCand = slices.Grow(a.khCand[:0], n)[:n]
	a.khHeavy = slices.Grow(a.khHeavy[:0], n)[:n]
	any := false
	for i := range s.Resources {
		a.khCand[i], a.khHeavy[i] = -1, 0
		r := &s.Resources[i]
		if r.Waiters > 0 && (r.Kind == resource.KindLock || r.Kind == resource.KindQueue) {
			any = true
		}
	}
	if !any || a.variant == CurrentUsage {
		return
	}
	a.khHeld = slices.Grow(a.khHeld[:0], n)[:n]
	a.khNewcomer = slices.Grow(a.khNewcomer[:0], n)[:n]
	clear(a.khHeld)
	clear(a.khNewcomer)
	newcomer, heavyHeld := a.khNewcomer, a.khHeld
	for ti := range s.Tasks {
		t := &s.Tasks[ti]
		for _, u := range usageOf(s, ti) {
			i := int(u.Res)
			if i < 0 || i >= n {
				continue
			}
			r := &s.Resources[i]
			d := u.Held + int64(max(u.Waiting, 0))
			if r.Waiters <= 0 || d <= 0 || (r.Kind != resource.KindLock && r.Kind != resource.KindQueue) {
				continue
			}
			// A task heavy by its own reported progress is a candidate
			// even where a cancellation of its class is judged (see
			// judgement): reported progress is the evidence a judged
			// class still counts.
			byProgress := false
			if !a.heavyOn(t.Class, r) {
				if byProgress = a.heavyByProgress(t, &u, r, a.gain[i]); !byProgress {
					continue
				}
			}
			if !byProgress && a.judgedClass(t.Class, r) {
				continue
			}
			a.khHeavy[i] += d
			heavyHeld[i] += max(u.Held, 0)
			if u.Held <= 0 && t.Cancellable && !t.Cancelled && !t.Blocked && r.Kind == resource.KindQueue {
				newcomer[i] = true
			}
			// What is left of its class's use is worth a cancellation;
			// a class known only to use at least its estimate (its
			// tasks are cancelled before they end) may use any more.
			total, _ := a.uses.Total(t.Class, r.Name)
			if a.khCand[i] < 0 && u.Held > 0 && t.Cancellable && !t.Cancelled && !t.Blocked &&
				(byProgress || total-estimate.Spent(&u.Usage, r.Capacity) >= a.gain[i] || a.uses.AtLeast(t.Class, r.Name)) {
				a.khCand[i] = ti
			}
		}
	}
	a.leaveRoomy(s)
}

// leaveRoomy drops knownHeavy's candidate on each queue whose known-heavy
// demand leaves the others room, or whose known-heavy newcomer is still
// waiting for its first units while the heavy holders leave some free.
func (a *Atropos) leaveRoomy(s *snapshot.Snapshot) {
	newcomer, heavyHeld := a.khNewcomer, a.khHeld
	for i := range s.Resources {
		r := &s.Resources[i]
		if a.khCand[i] < 0 || r.Kind == resource.KindLock {
			continue
		}
		if newcomer[i] && heavyHeld[i] < r.Capacity {
			// A known-heavy newcomer waits for its first units: the
			// acquisition that oversubscribes the queue has not
			// happened yet, and the candidate that loses least is the
			// newcomer once it holds a unit (a step or two later, when
			// a light task lets one go), not an older holder cancelled
			// now. Where known-heavy holders hold every unit, the
			// newcomer gets none before they let go: they are decided
			// on now.
			a.khCand[i] = -1
			continue
		}
		o := a.others[keyOf(r)]
		if float64(a.khHeavy[i])+o+math.Sqrt(o) <= float64(r.Capacity) {
			a.khCand[i] = -1
		}
	}
}

// heavyByProgress reports whether task t, of a mixed class (whose history
// says nothing of any one of its tasks: see mixed), is heavy on resource
// r by its own reported progress: it holds r, its progress p is one the
// estimates need not clamp (at least estimate.MinProgress: a walk's first
// step, one of a bound on its length, says nothing yet), and its future
// use of r, its use so far × (1−p)/p, is worth a cancellation (floor).
// Such a task is what a known-heavy class's task is, known by itself
// rather than by its class: when others wait behind it, the resource is
// contended from then on.
func (a *Atropos) heavyByProgress(t *snapshot.Task, u *snapshot.Usage, r *snapshot.Resource, floor float64) bool {
	if u.Held <= 0 || !a.mixed(t.Class) {
		return false
	}
	p, ok := estimate.ReportedProgress(t)
	return ok && estimate.Future(estimate.Current(u, r), p) >= floor
}

// WakeOn names the lock and queue resources on which some class is known
// to be heavy or is mixed (see knownHeavy): when a task of it holds one,
// the next task to wait there makes it a culprit (a mixed class's task
// by its own progress), and the loop had better see it then than at its
// next tick, however soon after its acquisition that is (policy.Waker). A
// wait behind a light holder steps the loop too, at most once a
// millisecond, and finds nothing to do.
func (a *Atropos) WakeOn(s *snapshot.Snapshot, dst []int) []int {
	if a.variant == CurrentUsage {
		return dst
	}
	if a.heavyRes == nil {
		a.heavyRes = make(map[string]struct{})
	}
	clear(a.heavyRes)
	add := func(res string) { a.heavyRes[res] = struct{}{} }
	a.uses.EachHeavy(a.cfg.minGain.Seconds(), add)
	a.uses.EachMixed(a.cfg.minGain.Seconds(), add)
	if len(a.heavyRes) == 0 {
		return dst
	}
	for i := range s.Resources {
		r := &s.Resources[i]
		if r.Kind != resource.KindLock && r.Kind != resource.KindQueue {
			continue
		}
		if _, ok := a.heavyRes[r.Name]; ok {
			dst = append(dst, i)
		}
	}
	return dst
}

// confirms reports whether resource r at contention level counts as
// contended: at the threshold, and, for a lock or queue, waited for now.
func (a *Atropos) confirms(r *snapshot.Resource, level float64) bool {
	return level >= a.cfg.minContention && (r.Kind == resource.KindMemory || r.Waiters > 0)
}
