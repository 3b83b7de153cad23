package cancel

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
)

// culpritKey names a class on a lock across snapshots.
type culpritKey struct {
	class string
	res   resKey
}

// maxCulprits bounds the classes counted as culprits (classes come from
// the application's routes and specs; the count forgets them all past
// it, and learns them again from their next cancellations).
const maxCulprits = 256

// preemptMemory is how long after the last wait on a lock a recurring
// culprit is still cancelled as it takes it: the others' waits are the
// evidence that the lock is still wanted. A lock nobody waited on for
// that long lets the class's next task run, and the class shows again
// whether it makes others wait or ends on its own.
const preemptMemory = 10 * time.Second

// countCulprit counts the cancellation of task ti of s as a culprit on
// every lock it holds: what it monopolized, whether its waiters wait on
// the lock itself or, down a chain, on a task that waits for it (see
// Preempt).
func (a *Atropos) countCulprit(s *snapshot.Snapshot, ti int) {
	if a.cfg.preemptAfter <= 0 || ti < 0 {
		return
	}
	t := &s.Tasks[ti]
	for _, u := range usageOf(s, ti) {
		i := int(u.Res)
		if i < 0 || i >= len(s.Resources) || u.Held <= 0 {
			continue
		}
		r := &s.Resources[i]
		if r.Kind != resource.KindLock {
			continue
		}
		if a.culprits == nil || len(a.culprits) >= maxCulprits {
			a.culprits = map[culpritKey]int{}
		}
		a.culprits[culpritKey{t.Class, keyOf(r)}]++
	}
}

// observeWaits records, per lock, the last snapshot in whose window a task
// waited for it.
func (a *Atropos) observeWaits(s *snapshot.Snapshot) {
	if a.cfg.preemptAfter <= 0 {
		return
	}
	if a.waitedAt == nil {
		a.waitedAt = map[resKey]time.Duration{}
	}
	for i := range s.Resources {
		r := &s.Resources[i]
		if r.Kind == resource.KindLock && (r.WindowWaits > 0 || r.Waiters > 0) {
			a.waitedAt[keyOf(r)] = s.At
		}
	}
	if len(a.waitedAt) > 2*len(s.Resources)+64 {
		for k, at := range a.waitedAt {
			if s.At-at > preemptMemory {
				delete(a.waitedAt, k)
			}
		}
	}
}

// Preempt gives the standing orders of a recurring culprit
// (policy.Preempter, with [WithPreemption]): a class of which at least
// the configured number of tasks were cancelled while they held a lock
// others waited for, and none has ever ended on its own (its use of the
// lock is known only as a lower bound: estimate.Uses.AtLeast), is
// cancelled as its next task takes that lock, while others have waited
// for the lock within the last 10 s. Its task would make others wait and
// be cancelled once they did; cancelled as it takes the lock, it has
// thrown away nothing, and nobody waits. A class one of whose tasks ends
// on its own is no longer counted; a lock nobody waits for lets the
// class's tasks run.
func (a *Atropos) Preempt(s *snapshot.Snapshot, dst []policy.Preemption) []policy.Preemption {
	if a.cfg.preemptAfter <= 0 || a.variant == CurrentUsage || len(a.culprits) == 0 {
		return dst
	}
	start := len(dst)
	for k, n := range a.culprits {
		// AtLeast holds from the end of the class's first cancelled task
		// (a step or more after its cancellation was counted) until one
		// of its tasks ends on its own, and never again after that.
		if n < a.cfg.preemptAfter || !a.uses.AtLeast(k.class, k.res.name) {
			continue
		}
		at, ok := a.waitedAt[k.res]
		if !ok || s.At-at > preemptMemory {
			continue
		}
		i := s.ResourceByName(k.res.name)
		if i < 0 || s.Resources[i].ID != k.res.id {
			continue
		}
		// The reason stays the same from step to step while the order
		// stands, so that the controller does not set it again each step.
		dst = append(dst, policy.Preemption{Resource: i, Class: k.class, Reason: fmt.Sprintf(
			"class %q is a recurring culprit on %s: %d of its tasks were cancelled holding it while others waited, none has ended on its own, and others waited for it within the last %v; cancelled as it takes it, before anyone waits",
			k.class, k.res.name, n, preemptMemory)})
	}
	slices.SortFunc(dst[start:], func(x, y policy.Preemption) int {
		return cmp.Or(cmp.Compare(x.Resource, y.Resource), cmp.Compare(x.Class, y.Class))
	})
	return dst
}

// Preempted marks the tasks the controller cancelled on the policy's
// orders since the last step (policy.Preempter): what such a task used is
// not its class's use, even when it ended before a snapshot showed it
// cancelled, so the learners take its end for a cancelled task's.
func (a *Atropos) Preempted(tasks []uint64) {
	for _, id := range tasks {
		a.uses.Skip(id)
		if a.cfg.durations != nil {
			a.cfg.durations.Skip(id)
		}
	}
}
