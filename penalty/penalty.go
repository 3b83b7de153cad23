package penalty

import (
	"math"
	"time"

	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/snapshot"
)

// Policy is pBox's interference detection and adaptive penalty as a
// [policy.Policy]; see the package documentation. It keeps, between
// snapshots, the penalty length reached by each noisy task and class. Its
// methods are called from the controller's goroutine only.
type Policy struct {
	config

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
	c := config{min: DefaultMinPenalty, max: DefaultMaxPenalty, slowdown: DefaultMaxSlowdown}
	for _, o := range opts {
		o(&c)
	}
	c.min = min(c.min, c.max)
	return &Policy{
		config:  c,
		tasks:   map[uint64]*record{},
		classes: map[string]*length{},
		holds:   map[holdKey]time.Duration{},
		done:    map[holdKey]spent{},
		streams: map[holdKey]*stream{},
	}
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
