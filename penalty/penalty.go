package penalty

import (
	"cmp"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// Defaults of the policy's parameters.
const (
	// DefaultMaxPenalty bounds the penalties the policy asks for, but
	// those of a stream that queues behind itself for longer or has a
	// slowdown budget, unless WithMaxPenalty sets a cap.
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
	// DefaultMaxSlowdown is how much slower than it would run uncontrolled
	// the policy lets a noisy stream become: its penalties' cap is set so
	// that its requests take at most this many times their uncontrolled
	// latency (see WithMaxSlowdown).
	DefaultMaxSlowdown = 1.3
)

// Option configures a [Policy].
type Option func(*Policy)

// WithMaxPenalty sets a cap on every penalty. Without it the cap is a
// noisy stream's slowdown budget (see [WithMaxSlowdown]), or, until the
// policy has followed the stream long enough, [DefaultMaxPenalty] or the
// time its requests queue behind one another in front of the resource if
// longer (see the package documentation). At most task.MaxPenalty is
// ever served.
func WithMaxPenalty(d time.Duration) Option {
	return func(p *Policy) {
		if d > 0 {
			p.max, p.fixed = d, true
		}
	}
}

// WithMaxSlowdown sets how many times its uncontrolled latency a noisy
// stream's requests may take under penalties (default
// [DefaultMaxSlowdown]); the cap of its penalties on a lock or a queue
// follows from it (see the package documentation). A factor of 1 or less,
// NaN or ±Inf turns the budget off: the cap is then [DefaultMaxPenalty],
// or the stream's own queue when longer. WithMaxPenalty overrides both.
func WithMaxSlowdown(x float64) Option {
	return func(p *Policy) {
		if math.IsNaN(x) || math.IsInf(x, 0) || x <= 1 {
			x = 0
		}
		p.slowdown = x
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
	fixed    bool    // max set by WithMaxPenalty: a cap for streams too
	slowdown float64 // the streams' slowdown budget, 0: none

	tasks   map[uint64]*record // per live task
	classes map[string]*length // the length reached by each class
	// holds is, per class and resource, a moving average of how long its
	// tasks had held the resource when a snapshot saw them hold it.
	holds map[holdKey]time.Duration
	// done is, per class and resource, moving averages of how long its
	// tasks held the resource and waited for it in all, and of the
	// penalties they served, as last seen before they ended.
	done map[holdKey]spent
	// streams are the classes penalized for deferring others on a
	// resource, followed from their first penalty on to set their cap.
	streams map[holdKey]*stream
	window  time.Duration // the last snapshot's
	seen    uint64        // generation of the current Decide
	watch   bool

	stats Stats
}

// record is what the policy remembers of a task.
type record struct {
	seen   uint64
	class  string
	avgTf  float64 // running average of t_f over the snapshots seen
	n      int
	length length // as a noisy task
	served time.Duration
	used   []used // per resource it held or waited for: its time so far
}

// used is how long a task has held a resource and waited for it in all,
// and whether it held it or waited for it when last seen.
type used struct {
	res              task.ResourceID
	hold, wait       time.Duration
	holding, waiting bool
}

// spent is what the tasks of a class that ended spent on a resource, on
// a moving average: holding it, waiting for it, serving penalties; and
// the share of them that served a penalty.
type spent struct {
	hold, wait, served time.Duration
	penalized          float64
}

// length is an adaptive penalty length and how it got there.
type length struct {
	p      time.Duration
	steps  int // adaptations that changed p by more than 5 %
	fixed  int // adaptations since the last such change
	policy string
}

// MaxClasses bounds the classes whose penalty lengths the policy
// remembers (classes come from requests): a new class past it starts
// from the first length, as an unseen class does, and is counted in
// Stats.ClassesDropped.
const MaxClasses = 1024

// Stats counts what the policy decided.
type Stats struct {
	Penalties  int // penalties decided
	ScoreBased int // adaptations by the score-based policy
	GapBased   int // adaptations by the gap-based policy
	Capped     int // penalties cut to the cap
	// ClassesDropped counts lengths not remembered for their class
	// because MaxClasses classes were remembered already.
	ClassesDropped int
	Steps          map[string]int // per noisy class: adaptations before the length became fixed
	Length         map[string]time.Duration
}

// New returns the penalty policy.
func New(opts ...Option) *Policy {
	p := &Policy{
		min: DefaultMinPenalty, max: DefaultMaxPenalty,
		tasks: map[uint64]*record{}, classes: map[string]*length{},
		holds: map[holdKey]time.Duration{}, done: map[holdKey]spent{},
		streams: map[holdKey]*stream{}, slowdown: DefaultMaxSlowdown,
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
	p.window = s.Window
	tds, tfs, live := p.observe(s)
	w := p.waitGraph(s, live)
	return p.penalize(w, tds, tfs)
}

// observe is Decide's pass over the tasks: each one's interference (its
// time deferred and its t_f, by index in s.Tasks), the records of the
// tasks seen and of those that ended, and, when streams are followed, the
// number of live tasks of each followed class.
func (p *Policy) observe(s *snapshot.Snapshot) (tds []time.Duration, tfs []float64, live map[string]int) {
	n := len(s.Tasks)
	tds = make([]time.Duration, n)
	tfs = make([]float64, n)
	if len(p.streams) > 0 {
		live = map[string]int{}
		for k := range p.streams {
			live[k.class] = 0
		}
	}
	for i := range s.Tasks {
		t := &s.Tasks[i]
		if t.ID == 0 {
			continue
		}
		if c, ok := live[t.Class]; ok {
			live[t.Class] = c + 1
		}
		tds[i], tfs[i] = Interference(s, i)
		r := p.tasks[t.ID]
		if r == nil {
			r = &record{class: t.Class}
			p.tasks[t.ID] = r
		}
		r.seen = p.seen
		if t.Class != "" { // what a class's tasks spend sets its cap
			r.served = t.PenaltyServed
			for _, u := range s.UsageOf(i) {
				if u.Hold > 0 || u.Wait > 0 {
					r.sawUsed(u)
				}
			}
		}
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
			p.ended(r)
			delete(p.tasks, id)
		}
	}
	return tds, tfs, live
}

// waitGraph is Decide's pass over the usage: who waits for whom (per
// resource, its holders; per task, what it waits for), the holds each
// class is seen to make, and the followed streams' holds now.
func (p *Policy) waitGraph(s *snapshot.Snapshot, live map[string]int) *walker {
	holders := make(map[int32][]hold)
	waits := make(map[int][]snapshot.Usage)
	var held map[holdKey]tally // per followed stream, its holds now
	if live != nil {
		held = map[holdKey]tally{}
	}
	for _, u := range s.Usage {
		if u.Held > 0 {
			holders[u.Res] = append(holders[u.Res], hold{int(u.Task), u.Res, u.Hold})
			k := holdKey{s.Tasks[u.Task].Class, s.Resources[u.Res].ID}
			p.sawHold(k.class, k.res, u.Hold)
			if _, ok := p.streams[k]; ok && held != nil {
				h := held[k]
				h.units += u.Held
				h.holders++
				held[k] = h
			}
		}
		if u.Waiting > 0 {
			waits[int(u.Task)] = append(waits[int(u.Task)], u)
		}
	}
	if live != nil {
		p.follow(s, live, held)
	}
	return &walker{s: s, holders: holders, waits: waits}
}

// penalize is Decide's last pass: for each waiter that is a victim (its
// t_f above its goal, deferred at least minDeferral), a penalty for each
// noisy task that defers it, at most one per task.
func (p *Policy) penalize(w *walker, tds []time.Duration, tfs []float64) []policy.Decision {
	s := w.s
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
		for _, n := range w.noisy(v, u) {
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
			out = append(out, p.penalty(s, nt, vt, n, tds[v], tfs[v]))
		}
	}
	return out
}

// penalty is the decision to penalize the noisy task nt, whose hold n
// defers the victim vt by td (its t_f is tf).
func (p *Policy) penalty(s *snapshot.Snapshot, nt, vt *snapshot.Task, n hold, td time.Duration, tf float64) policy.Decision {
	limit := p.capFor(s, nt.Class, n.res)
	return policy.Decision{
		Action:   policy.Penalize,
		Task:     nt.ID,
		Class:    nt.Class,
		Delay:    p.next(nt, vt, td, tf, limit),
		Resource: s.Resources[n.res].Name,
		Reason:   fmt.Sprintf("defers task %d on %s: %s", vt.ID, s.Resources[n.res].Name, deferral(vt.ID, tf, vt.Goal)),
		Details: []slog.Attr{
			slog.Uint64("victim", vt.ID),
			slog.Duration("victim_deferred", td),
			slog.Duration("victim_exec", vt.Exec),
			slog.Duration("noisy_exec", nt.Exec),
			slog.Duration("noisy_hold", n.hold),
			slog.Duration("cap", limit),
		},
	}
}

// deferral says in words how far beyond its tolerance the victim is
// deferred: tf is the time it was deferred per second it ran (+Inf when it
// has not run between its waits), limit the most it tolerates
// (Spec.MaxDeferral).
func deferral(victim uint64, tf, limit float64) string {
	if math.IsInf(tf, 1) {
		return fmt.Sprintf("task %d has only waited so far, where it tolerates %.2f s deferred per second it runs", victim, limit)
	}
	return fmt.Sprintf("task %d was deferred %.2f s per second it ran, more than the %.2f s it tolerates", victim, tf, limit)
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

// sawUsed records what the task has done with a resource so far: held
// it and waited for it, in all, and whether it holds it or waits for it
// now.
func (r *record) sawUsed(u snapshot.Usage) {
	v := used{u.Resource, u.Hold, u.Wait, u.Held > 0, u.Waiting > 0}
	for i := range r.used {
		if r.used[i].res == u.Resource {
			r.used[i] = v
			return
		}
	}
	if len(r.used) < maxUsed {
		r.used = append(r.used, v)
	}
}

// maxUsed bounds the resources whose use the policy follows per task.
const maxUsed = 8

// ended folds what a task that has left the snapshots spent into its
// class's averages.
func (p *Policy) ended(r *record) {
	if r.class == "" {
		return
	}
	pen := 0.0
	if r.served > 0 {
		pen = 1
	}
	for _, u := range r.used {
		// The task went on holding or waiting after the last snapshot
		// saw it, for half a window on average.
		if u.holding {
			u.hold += p.window / 2
		}
		if u.waiting {
			u.wait += p.window / 2
		}
		k := holdKey{r.class, u.res}
		d, ok := p.done[k]
		switch {
		case ok:
			d.hold += (u.hold - d.hold) / doneSmoothing
			d.wait += (u.wait - d.wait) / doneSmoothing
			d.served += (r.served - d.served) / doneSmoothing
			d.penalized += (pen - d.penalized) / doneSmoothing
		case len(p.done) < maxHolds:
			d = spent{u.hold, u.wait, r.served, pen}
		default:
			continue
		}
		p.done[k] = d
	}
}

// doneSmoothing is the weight of the moving averages of what the tasks
// of a class spent: a task that ended counts for 1/doneSmoothing.
const doneSmoothing = 8

// capFor returns the cap of a penalty of a task of the class for deferring
// others on resource ri. WithMaxPenalty's cap, if set, is the cap. On a
// lock or a queue, once the class has been followed for [minSamples]
// snapshots, it is the class's slowdown budget (see budget). Otherwise it
// is the stream rule: [DefaultMaxPenalty], or, if longer, how long the
// class's tasks are held back in front of the resource beyond waiting for
// the hold in progress. That is, over the class's tasks that ended, the
// penalties they served plus their waits for the resource, less half of
// one hold (for a queue of capacity c, 1/2c of one): a penalty that long
// moves a stream's queueing behind itself from the resource's queue,
// where the victims wait behind it, into the penalty, where they do not.
// Never above task.MaxPenalty.
func (p *Policy) capFor(s *snapshot.Snapshot, class string, ri int32) time.Duration {
	if p.fixed || class == "" || ri < 0 || int(ri) >= len(s.Resources) {
		return p.max
	}
	r := &s.Resources[ri]
	k := holdKey{class, r.ID}
	// Only a stream that can have a budget is followed.
	var st *stream
	if p.slowdown > 1 && (r.Kind == resource.KindLock || r.Kind == resource.KindQueue) {
		st = p.streams[k]
		if st == nil && len(p.streams) < maxStreams {
			st = &stream{}
			p.streams[k] = st
		}
	}
	d, ok := p.done[k]
	if !ok {
		return p.max
	}
	c := capacityOf(r)
	held := d.served + d.wait - d.hold/time.Duration(2*c)
	queue := max(p.max, min(held, task.MaxPenalty))
	if st == nil || st.samples < minSamples {
		return queue
	}
	b := p.budget(st, d, c)
	if st.shared {
		// Tasks of the class hold the resource together (readers of a
		// shared lock): the queue model behind the budget does not
		// hold, so the budget only cuts the stream rule's cap.
		b = min(b, queue)
	}
	if st.cap == 0 || math.Abs(float64(b-st.cap)) > deadband*float64(st.cap) {
		st.cap = b
	}
	return st.cap
}

// capacityOf returns how many tasks can hold the resource at once, as the
// policy's queue model counts them: a queue's capacity, 1 for the rest.
func capacityOf(r *snapshot.Resource) int64 {
	if r.Kind == resource.KindQueue && r.Capacity > 1 {
		return r.Capacity
	}
	return 1
}

// budget returns the cap that keeps a stream's requests within the
// policy's slowdown factor β of their uncontrolled latency L0. Each
// request holds the resource for h and waits for it for w (moving
// averages over the class's tasks that ended, as they are under the
// penalties now), and a share f of them serves a penalty, so a cap of
// (β·L0 − h − w)/f keeps a request at β·L0 on average. L0 is estimated
// from what penalties do not change: n requests of the class live at once
// (a client's connections sending back to back keep n fixed), each
// holding for h, on c slots, of which the other classes hold a share ρ,
// queue for n·h/(c·(1−ρ)); a stream that does not queue behind itself
// takes h+w. f is taken as at least ½, so that the cap at most doubles
// what the average penalty may be. The result is between the policy's
// minimum penalty and task.MaxPenalty.
func (p *Policy) budget(st *stream, d spent, c int64) time.Duration {
	h, w := float64(d.hold), float64(d.wait)
	free := max(1-st.rho, minFree)
	l0 := max(h+w, st.n*h/(float64(c)*free))
	b := (p.slowdown*l0 - h - w) / max(d.penalized, 0.5)
	if math.IsNaN(b) {
		return p.max
	}
	return time.Duration(min(max(b, float64(p.min)), float64(task.MaxPenalty)))
}

// stream is what the policy follows of a class penalized for deferring
// others on one resource, to set its budget: moving averages, over the
// snapshots where the class has live tasks, of how many it has and of the
// share of the resource the other classes hold.
type stream struct {
	n, rho  float64
	samples int
	idle    int           // snapshots in a row without a live task
	shared  bool          // two tasks of the class seen holding it at once
	cap     time.Duration // the last cap given, 0: none yet
}

// tally is a followed class's holds of its resource in one snapshot.
type tally struct {
	units   int64
	holders int
}

const (
	// minSamples is how many snapshots a stream is followed for before
	// its budget sets its cap.
	minSamples = 8
	// forgetAfter is how many snapshots in a row without a live task of
	// its class a stream is forgotten after.
	forgetAfter = 256
	// maxStreams bounds the streams followed.
	maxStreams = 1024
	// streamSmoothing is the weight of a stream's moving averages: a
	// snapshot counts for 1/streamSmoothing.
	streamSmoothing = 32
	// deadband is the relative change of a stream's budget below which
	// its cap stays as it was, so that the penalties' noise does not
	// move the cap that sets them.
	deadband = 0.2
	// minFree bounds from below the share of a resource left to a stream
	// in its uncontrolled-latency estimate.
	minFree = 0.1
)

// follow folds one snapshot into the followed streams: the live tasks of
// each class and what the class holds of its resource. Streams without a
// live task for forgetAfter snapshots are forgotten.
func (p *Policy) follow(s *snapshot.Snapshot, live map[string]int, held map[holdKey]tally) {
	var index map[task.ResourceID]int
	for k, st := range p.streams {
		n := live[k.class]
		if n == 0 {
			if st.idle++; st.idle >= forgetAfter {
				delete(p.streams, k)
			}
			continue
		}
		st.idle = 0
		if index == nil {
			index = make(map[task.ResourceID]int, len(s.Resources))
			for i := range s.Resources {
				index[s.Resources[i].ID] = i
			}
		}
		ri, ok := index[k.res]
		if !ok {
			continue
		}
		r := &s.Resources[ri]
		h := held[k]
		if h.holders > 1 && r.Kind == resource.KindLock {
			st.shared = true
		}
		rho := float64(r.Held-h.units) / float64(capacityOf(r))
		rho = min(max(rho, 0), 1)
		if st.samples == 0 {
			st.n, st.rho = float64(n), rho
		} else {
			st.n += (float64(n) - st.n) / streamSmoothing
			st.rho += (rho - st.rho) / streamSmoothing
		}
		st.samples++
	}
}

// next returns the noisy task's next penalty length, adapting the length
// it (or, for a new task, its class) reached before, and capped at limit.
func (p *Policy) next(nt, vt *snapshot.Task, td time.Duration, tf float64, limit time.Duration) time.Duration {
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
	if l.p > limit {
		l.p = limit
		p.stats.Capped++
	}
	if old == 0 || math.Abs(float64(l.p-old)) > converged*float64(old) {
		l.steps += 1 + l.fixed
		l.fixed = 0
	} else {
		l.fixed++
	}
	if nt.Class != "" {
		if _, ok := p.classes[nt.Class]; ok || len(p.classes) < MaxClasses {
			c := *l
			p.classes[nt.Class] = &c
		} else {
			p.stats.ClassesDropped++
		}
	}
	p.stats.Penalties++
	return l.p
}
