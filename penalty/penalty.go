package penalty

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// Defaults of the policy's parameters.
const (
	// DefaultMaxPenalty bounds every penalty the policy asks for.
	DefaultMaxPenalty = 100 * time.Millisecond
	// DefaultMinPenalty is the first penalty when p1's formula gives none
	// (the noisy task ran longer than the victim was deferred).
	DefaultMinPenalty = time.Millisecond
	// Alpha is the score-based policy's damping: p' = p · (1 + score/α).
	Alpha = 5
	// Delta is the gap-based policy's divisor, and the ratio of deferring
	// time to penalty past which the deferring time "dwarfs" the penalty
	// and the gap-based policy is chosen: p' = p · gap/δ.
	Delta = 10
	// historyShare is how close to its goal a task's average t_f must be
	// for its waits to count as interference below the goal (the history
	// check).
	historyShare = 0.9
	// minDeferral is the shortest wait on a resource that counts as
	// deferral by its holder: shorter ones are at the clock's resolution.
	minDeferral = 2 * time.Millisecond
	// converged is the relative change below which a penalty length
	// counts as fixed.
	converged = 0.05
)

// Option configures a [Policy].
type Option func(*Policy)

// WithMaxPenalty sets the cap of every penalty (default
// [DefaultMaxPenalty]; at most task.MaxPenalty is ever served).
func WithMaxPenalty(d time.Duration) Option {
	return func(p *Policy) {
		if d > 0 {
			p.max = d
		}
	}
}

// WithMinPenalty sets the first penalty used when p1's formula gives
// none (default [DefaultMinPenalty]).
func WithMinPenalty(d time.Duration) Option {
	return func(p *Policy) {
		if d > 0 {
			p.min = d
		}
	}
}

// Policy is pBox's interference detection and adaptive penalty as a
// [policy.Policy]; see the package documentation. It keeps, between
// snapshots, the penalty length reached by each noisy task and class. Its
// methods are called from the controller's goroutine only.
type Policy struct {
	min, max time.Duration

	tasks   map[uint64]*record // per live task
	classes map[string]*length // the length reached by each class
	// holds is, per class and resource, a moving average of how long its
	// tasks had held the resource when a snapshot saw them hold it.
	holds map[holdKey]time.Duration
	seen  uint64 // generation of the current Decide
	watch bool

	stats Stats
}

// record is what the policy remembers of a task.
type record struct {
	seen   uint64
	avgTf  float64 // running average of t_f over the snapshots seen
	n      int
	length length // as a noisy task
}

// length is an adaptive penalty length and how it got there.
type length struct {
	p      time.Duration
	steps  int // adaptations that changed p by more than 5 %
	fixed  int // adaptations since the last such change
	policy string
}

// Stats counts what the policy decided.
type Stats struct {
	Penalties  int            // penalties decided
	ScoreBased int            // adaptations by the score-based policy
	GapBased   int            // adaptations by the gap-based policy
	Capped     int            // penalties cut to the cap
	Steps      map[string]int // per noisy class: adaptations before the length became fixed
	Length     map[string]time.Duration
}

// New returns the penalty policy.
func New(opts ...Option) *Policy {
	p := &Policy{
		min: DefaultMinPenalty, max: DefaultMaxPenalty,
		tasks: map[uint64]*record{}, classes: map[string]*length{}, holds: map[holdKey]time.Duration{},
	}
	for _, o := range opts {
		o(p)
	}
	p.min = min(p.min, p.max)
	return p
}

// Name returns "pbox".
func (p *Policy) Name() string { return "pbox" }

// Watching reports whether the last snapshot showed a task waiting beyond
// its goal or a penalty pending: the controller then ticks fast.
func (p *Policy) Watching() bool { return p.watch }

// Stats returns what the policy decided so far.
func (p *Policy) Stats() Stats {
	s := p.stats
	s.Steps, s.Length = map[string]int{}, map[string]time.Duration{}
	for c, l := range p.classes {
		s.Steps[c] = l.steps
		s.Length[c] = l.p
	}
	return s
}

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

// Decide finds the noisy tasks of the snapshot and returns a penalty for
// each that has none pending.
func (p *Policy) Decide(s *snapshot.Snapshot) []policy.Decision {
	p.seen++
	p.watch = false
	n := len(s.Tasks)
	tds := make([]time.Duration, n)
	tfs := make([]float64, n)
	for i := range s.Tasks {
		t := &s.Tasks[i]
		if t.ID == 0 {
			continue
		}
		tds[i], tfs[i] = Interference(s, i)
		r := p.tasks[t.ID]
		if r == nil {
			r = &record{}
			p.tasks[t.ID] = r
		}
		r.seen = p.seen
		if !math.IsInf(tfs[i], 0) {
			r.n++
			r.avgTf += (tfs[i] - r.avgTf) / float64(r.n)
		}
		if t.Penalty > 0 {
			p.watch = true
		}
	}
	for id, r := range p.tasks {
		if r.seen != p.seen {
			delete(p.tasks, id)
		}
	}

	// Who waits for whom: per resource, its holders; per task, what it
	// waits for.
	holders := make(map[int32][]hold)
	waits := make(map[int][]snapshot.Usage)
	for _, u := range s.Usage {
		if u.Held > 0 {
			holders[u.Res] = append(holders[u.Res], hold{int(u.Task), u.Res, u.Hold})
			p.sawHold(s.Tasks[u.Task].Class, s.Resources[u.Res].ID, u.Hold)
		}
		if u.Waiting > 0 {
			waits[int(u.Task)] = append(waits[int(u.Task)], u)
		}
	}
	var out []policy.Decision
	decided := map[int]bool{}
	for _, u := range s.Usage {
		if u.Waiting <= 0 || u.Wait < minDeferral {
			continue
		}
		v := int(u.Task)
		vt := &s.Tasks[v]
		if vt.ID == 0 || !p.victim(vt, tfs[v]) {
			continue
		}
		p.watch = true
		for _, n := range noisy(s, holders, waits, v, u, map[int]bool{v: true}, 0) {
			nt := &s.Tasks[n.task]
			// A task is not deferred by its own kind: requests of one
			// class queued for a resource are a queue of equals.
			if decided[n.task] || nt.Cancelled || nt.Penalty > 0 || (nt.Class != "" && nt.Class == vt.Class) {
				continue
			}
			// Nor is a heavy task, waiting, the victim of a light one:
			// when the waiter's class holds resources longer than the
			// holder's, the holder is a victim that happens to hold the
			// resource, and a penalty would hit the requests it was meant
			// to protect.
			if p.lighter(nt.Class, vt.Class, s.Resources[n.res].ID) {
				continue
			}
			decided[n.task] = true
			d := p.next(nt, vt, tds[v], tfs[v])
			out = append(out, policy.Decision{
				Action: policy.Penalize,
				Task:   nt.ID,
				Class:  nt.Class,
				Delay:  d,
				Reason: fmt.Sprintf("defers task %d on %s: t_f %.2f > goal %.2f", vt.ID, s.Resources[n.res].Name, tfs[v], vt.Goal),
				Details: []slog.Attr{
					slog.Uint64("victim", vt.ID),
					slog.Duration("victim_deferred", tds[v]),
					slog.Duration("victim_exec", vt.Exec),
					slog.Duration("noisy_exec", nt.Exec),
					slog.Duration("noisy_hold", n.hold),
				},
			})
		}
	}
	return out
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

// noisy returns the tasks that defer task w in its wait u: the holders of
// u's resource that held it first (have held it at least as long as w has
// waited). A holder that is itself waiting for another resource is a
// victim in a chain, not noisy: noisy follows its wait to the holders
// there instead (a request that holds a worker slot while it waits for
// the table lock defers the requests queued for slots, but the scan that
// holds the lock is the one to penalize).
func noisy(s *snapshot.Snapshot, holders map[int32][]hold, waits map[int][]snapshot.Usage, w int, u snapshot.Usage, seen map[int]bool, depth int) []hold {
	var out []hold
	for _, h := range holders[u.Res] {
		if seen[h.task] || s.Tasks[h.task].ID == 0 || h.hold <= u.Wait {
			continue
		}
		seen[h.task] = true
		hw := waits[h.task]
		if len(hw) == 0 {
			out = append(out, hold{h.task, u.Res, h.hold})
			continue
		}
		if depth < maxChain {
			for _, x := range hw {
				out = append(out, noisy(s, holders, waits, h.task, x, seen, depth+1)...)
			}
		}
	}
	return out
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

// next returns the noisy task's next penalty length, adapting the length
// it (or, for a new task, its class) reached before.
func (p *Policy) next(nt, vt *snapshot.Task, td time.Duration, tf float64) time.Duration {
	r := p.tasks[nt.ID]
	l := &r.length
	if l.p == 0 {
		if c := p.classes[nt.Class]; c != nil && nt.Class != "" {
			*l = *c
		}
	}
	old := l.p
	if l.p == 0 {
		// p1 = sqrt(t_d(victim) · t_e(noisy)) − t_e(noisy)
		te := float64(nt.Exec)
		d := time.Duration(math.Sqrt(float64(td)*te) - te)
		l.p, l.policy = max(d, p.min), "first"
	} else {
		goal := goalOf(vt)
		// The deferring time beyond what the goal allows.
		excess := td - time.Duration(goal*float64(vt.Exec-td))
		if excess > Delta*l.p {
			gap := float64(excess) / float64(l.p)
			l.p = time.Duration(float64(l.p) * gap / Delta)
			l.policy = "gap"
			p.stats.GapBased++
		} else {
			score := min(max(tf/goal-1, 0), Alpha)
			l.p = time.Duration(float64(l.p) * (1 + score/Alpha))
			l.policy = "score"
			p.stats.ScoreBased++
		}
	}
	if l.p > p.max {
		l.p = p.max
		p.stats.Capped++
	}
	if old == 0 || math.Abs(float64(l.p-old)) > converged*float64(old) {
		l.steps += 1 + l.fixed
		l.fixed = 0
	} else {
		l.fixed++
	}
	if nt.Class != "" {
		c := *l
		p.classes[nt.Class] = &c
	}
	p.stats.Penalties++
	return l.p
}
