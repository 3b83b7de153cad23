package penalty

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// Interference returns a task's deferring time t_d (its time waiting for
// resources), and its interference level t_f = t_d / (t_e − t_d), with t_e
// its execution time. A task deferred for all its execution has t_f = +Inf.
func Interference(s *snapshot.Snapshot, i int) (td time.Duration, tf float64) {
	for _, u := range s.UsageOf(i) {
		td += u.Wait
	}
	te := s.Tasks[i].Exec
	switch {
	case td <= 0:
		return 0, 0
	case te <= td:
		return td, math.Inf(1)
	}
	return td, float64(td) / float64(te-td)
}

// hold is a task holding a resource, and for how long it has held it.
type hold struct {
	task int
	res  int32
	hold time.Duration
}

// maxChain is how many waits noisy follows from a victim to the task at
// the root of a chain.
const maxChain = 4

// maxExamined is how many holders noisy examines for one victim, the
// longest holders first. It bounds a step's work when thousands of tasks
// hold a resource that thousands wait for: without it, every victim went
// through every holder (a second per step for 10,000 of each).
const maxExamined = 32

// walker finds, for one victim at a time, the tasks that defer it.
type walker struct {
	s       *snapshot.Snapshot
	holders map[int32][]hold // per resource
	sorted  map[int32]bool   // holders sorted, the longest hold first
	waits   map[int][]snapshot.Usage
	seen    []int
	budget  int
	out     []hold
}

// noisy returns the tasks that defer task v in its wait u: the holders of
// u's resource that held it first (have held it at least as long as v has
// waited). A holder that is itself waiting for another resource is a
// victim in a chain, not noisy: noisy follows its wait to the holders
// there instead (a request that holds a worker slot while it waits for
// the table lock defers the requests queued for slots, but the scan that
// holds the lock is the one to penalize). At most [maxExamined] holders
// are examined, the longest first. The result is valid until the next
// call.
func (w *walker) noisy(v int, u snapshot.Usage) []hold {
	w.seen = append(w.seen[:0], v)
	w.budget = maxExamined
	w.out = w.out[:0]
	w.walk(u, 0)
	return w.out
}

func (w *walker) walk(u snapshot.Usage, depth int) {
	hs := w.holders[u.Res]
	if !w.sorted[u.Res] {
		slices.SortFunc(hs, func(a, b hold) int { return cmp.Compare(b.hold, a.hold) })
		if w.sorted == nil {
			w.sorted = map[int32]bool{}
		}
		w.sorted[u.Res] = true
	}
	for _, h := range hs {
		if h.hold <= u.Wait || w.budget <= 0 {
			return // the longest first: none of the rest held it first
		}
		if slices.Contains(w.seen, h.task) {
			continue
		}
		w.budget--
		w.seen = append(w.seen, h.task)
		if w.s.Tasks[h.task].ID == 0 {
			continue
		}
		hw := w.waits[h.task]
		if len(hw) == 0 {
			w.out = append(w.out, hold{h.task, u.Res, h.hold})
			continue
		}
		if depth < maxChain {
			for _, x := range hw {
				w.walk(x, depth+1)
			}
		}
	}
}

// holdKey names a class's holds of one resource.
type holdKey struct {
	class string
	res   task.ResourceID
}

// lighter reports whether the tasks of class holder have been seen
// holding resource res for shorter than those of class waiter. A class
// never seen holding it is lighter than one that was. The comparison is
// per resource: a request's hold of a worker slot lasts as long as the
// request, waits included, and says nothing of how long it holds a lock.
func (p *Policy) lighter(holder, waiter string, res task.ResourceID) bool {
	w, ok := p.holds[holdKey{waiter, res}]
	if waiter == "" || holder == "" || !ok {
		return false
	}
	return p.holds[holdKey{holder, res}] < w
}

// holdSmoothing is the weight of the moving average of a class's holds:
// a new observation counts for 1/holdSmoothing.
const holdSmoothing = 16

// sawHold folds a hold of res by a task of the class into the class's
// average for res.
func (p *Policy) sawHold(class string, res task.ResourceID, d time.Duration) {
	if class == "" {
		return
	}
	k := holdKey{class, res}
	if h, ok := p.holds[k]; ok {
		p.holds[k] = h + (d-h)/holdSmoothing
		return
	}
	if len(p.holds) >= maxHolds {
		return // a service with unbounded classes: keep the first ones
	}
	p.holds[k] = d
}

// maxHolds bounds the (class, resource) pairs whose holds the policy
// remembers.
const maxHolds = 16384

// goalOf returns a task's isolation goal, the default if it has none.
func goalOf(t *snapshot.Task) float64 {
	if t.Goal <= 0 || math.IsNaN(t.Goal) {
		return 0.5
	}
	return t.Goal
}

// victim reports whether a waiting task is interfered with beyond its
// goal: its t_f exceeds the goal, or (the history check) its average t_f
// has come close to the goal and the current one too.
func (p *Policy) victim(t *snapshot.Task, tf float64) bool {
	goal := goalOf(t)
	if tf > goal {
		return true
	}
	r := p.tasks[t.ID]
	return r != nil && r.n > 1 && r.avgTf >= historyShare*goal && tf >= historyShare*goal
}
