package cancel

import (
	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
)

// future adds task t's expected future use of each contended resource
// into usage (by dimension; a use below the dimension's minimum gain
// counts for nothing) and sets c's progress, its source, its demand on the
// main resource (held) and where its future use came from. It reports
// whether t would free any contended resource, and whether it uses one
// at all.
func (a *Atropos) future(s *snapshot.Snapshot, t *snapshot.Task, main int, usage []float64, c *cand) (any, holds bool) {
	floor := a.floor
	var held int64
	p, src, factor := -1.0, estimate.Source(0), 1.0
	fsrc := FutureSource(0)
	// A mixed class's history says nothing of this task: its progress
	// is its own (reported, else half done at its age) and its future
	// use its own holds', or the resource's demand.
	mixed := a.variant != CurrentUsage && a.mixed(t.Class)
	durations := a.cfg.durations
	if mixed {
		durations = nil
	}
	c.mixed = mixed
	first, n := int(t.First), int(t.N)
	for ui := first; ui < first+n; ui++ {
		u := &s.Usage[ui]
		if u.Res < 0 || int(u.Res) >= len(s.Resources) {
			continue
		}
		d := a.dimOf[u.Res]
		if d < 0 {
			continue
		}
		r := &s.Resources[u.Res]
		if int(u.Res) == main && u.Held > 0 {
			// Its demand on the main resource: what it holds and what
			// its waits in progress want (a unit each at least).
			held += u.Held + int64(max(u.Waiting, 0))
		}
		v := estimate.Current(u, r) // finite, ≥ 0
		if !(v > 0) {
			continue
		}
		holds = true
		if p < 0 {
			p, src = estimate.Progress(t, durations)
			if a.variant != CurrentUsage {
				factor = estimate.Future(1, p) // (1−p)/p, p already clamped
			}
		}
		if src != estimate.Reported && a.judgedClass(t.Class, r) {
			// A cancellation of a task of its class on r is being
			// judged, or did not relieve r: its age, holds and class
			// history are no evidence there (see judgement).
			c.unproven = true
			continue
		}
		fut, fs := v*factor, FromProgress
		if a.variant != CurrentUsage && r.Kind != resource.KindMemory {
			fut, fs = a.classFuture(s, t.Class, u, r, floor[d], src, mixed, fut, fs)
		}
		if fut >= floor[d] && fut > 0 {
			usage[d] += fut
			any = true
			if fs > fsrc {
				fsrc = fs
			}
		}
	}
	c.progress, c.source, c.held, c.future = p, src, held, fsrc
	return any, holds
}

// classFuture corrects fut, a task's future use of resource r from its
// progress (source fs), with its class's history, or, with none, with the
// resource's demand: u is the task's use of r so far, floor the minimum
// gain on r, src where its progress came from, mixed whether its class's
// history is untrusted.
func (a *Atropos) classFuture(s *snapshot.Snapshot, class string, u *snapshot.Usage, r *snapshot.Resource, floor float64, src estimate.Source, mixed bool, fut float64, fs FutureSource) (float64, FutureSource) {
	total, ok := a.uses.Total(class, r.Name)
	// A mixed class's history is not this task's, but for a
	// task holding one unit with no progress of its own: a
	// light request stalled while it holds is still not a
	// culprit (the heavy members of a merged class hold
	// several units, or report progress).
	ok = ok && (!mixed || (u.Held < 2 && src == estimate.Lindy))
	// A class known only to use at least its total (its tasks
	// were cancelled before they ended): a bound under the
	// minimum gain says nothing, one over it is a heavy class
	// with at least the minimum gain left.
	bound := ok && a.uses.AtLeast(class, r.Name)
	if ok && !(bound && total < floor) {
		// A class seen to end: what is left of its use, when it
		// promises more than the progress does. A task that has
		// outlived its class's typical use is not about to end:
		// its progress (conditioned on its age) decides then —
		// unless the progress is the half-done guess and the
		// class's tasks end having used less than the minimum
		// gain: a request of a class that holds for a
		// millisecond, stalled by the scheduler while it holds,
		// is not a culprit.
		//
		// Nor is a task of a class whose tasks typically end having
		// used less than the minimum gain (estimate.Uses.Typical, which
		// a few stretched tasks do not raise), holding one unit with no
		// progress of its own, whatever its age and whatever the
		// class's durations say: a host whose other processes take the
		// CPU stretches every hold, and the durations learned with it,
		// so a light task's age is no evidence of work. What is left of
		// its class's typical use is its future. A heavy member of a
		// light class holds several units or reports its progress (and
		// makes the class mixed: see estimate.Uses.Mixed).
		spent := estimate.Spent(&u.Usage, r.Capacity)
		left := total - spent
		typical, _ := a.uses.Typical(class, r.Name)
		switch {
		case !bound && u.Held < 2 && src != estimate.Reported && typical < floor:
			fut, fs = max(typical-spent, 0), FromClassUse
		case src == estimate.Lindy && total < floor:
			fut, fs = max(left, 0), FromClassUse
		case left > fut:
			fut, fs = left, FromClassUse
		}
		if bound && fut < floor {
			fut, fs = floor, FromClassUse
		}
	} else if oversubscribes(u, r) && fut < floor {
		// No history: the resource's current demand decides.
		fut, fs = floor, FromDemand
	}
	return fut, fs
}

// shares turns each candidate's future use into shares of the dimension's
// total (in place in a.vals), sets its keep value (MultiObjective), its
// score (Σ level·share), its total, its support and whether it frees
// enough of the main resource mr alone.
func (a *Atropos) shares(ev *Evaluation, mr *snapshot.Resource, totals []float64, maxLoss float64) {
	cands, vals := a.work, a.vals
	dims := len(ev.Contended)
	// Usage becomes shares in place (dominance is the same on both: each
	// dimension is scaled by a positive constant), then scores. The last
	// dimension is what a cancellation keeps: 1 − loss/maxLoss, so that
	// losing less is better, as gaining more is.
	weight := make([]float64, dims)
	inv := make([]float64, dims)
	for d, ri := range ev.Contended {
		weight[d] = ev.Levels[ri].Level
		if totals[d] > 0 {
			inv[d] = 1 / totals[d]
		}
	}
	lossDim := a.variant == MultiObjective
	var heavy int64
	for i := range cands {
		heavy += cands[i].held
	}
	for i := range cands {
		c := &cands[i]
		sh := vals[c.off : int(c.off)+dims+1]
		var total, score float64
		var support uint64
		for d, v := range sh[:dims] {
			if v == 0 {
				continue
			}
			v *= inv[d]
			sh[d] = v
			if d < 64 {
				support |= 1 << d
			}
			total += v
			score += weight[d] * v
		}
		if lossDim {
			keep := 1.0
			if maxLoss > 0 {
				keep = 1 - c.loss/maxLoss
			}
			sh[dims] = keep
			total += keep
			if keep > 0 && dims < 64 {
				support |= 1 << dims
			}
		}
		c.total, c.score, c.support = total, score, support
		c.sufficient = sufficient(mr, c.held, heavy, sh[ev.Main])
	}
}

// oversubscribes reports whether usage u holds what makes queue resource r
// full: more than one unit (a waiter's request is typically one), r full
// with it and not full without it.
func oversubscribes(u *snapshot.Usage, r *snapshot.Resource) bool {
	if r.Capacity <= 1 || u.Held < 2 {
		return false
	}
	return r.Held >= r.Capacity && r.Held-u.Held < r.Capacity
}

// sufficient reports whether cancelling a candidate holding and waiting
// for held units of the main resource r frees enough of it, heavy being
// the units all candidates hold and wait for there and share the candidate's share of the
// candidates' future use of it: for a lock or queue, the other candidates
// then leave room (the light tasks' demand needs a unit at least; a lock
// is room only when no other candidate holds it); for a resource whose
// units are not held (memory, CPU or IO without a capacity), it frees
// most of the candidates' future use.
func sufficient(r *snapshot.Resource, held, heavy int64, share float64) bool {
	switch r.Kind {
	case resource.KindLock, resource.KindQueue:
		if held <= 0 {
			return false
		}
		return heavy-held < max(r.Capacity, 1)
	}
	return share >= 0.5
}
