package cancel

import (
	"math"
	"slices"
	"time"

	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/internal/enum"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// Level is one resource's contention level in an [Evaluation].
type Level struct {
	Resource  string
	Kind      resource.Kind
	Level     float64 // C_r in [0, 1]
	Waiters   int
	Contended bool
	// Episode is set when a cancelled task's holds on the resource have
	// not yet been seen released: it is not decided on (not Contended).
	Episode bool
	// Unrelieved is set when a cancellation on the resource did not
	// relieve it (its waiters still wait, or soon wait again, behind
	// tasks of the class cancelled): until nobody has waited for it for
	// a second, a task of that class is a candidate on it only on its
	// reported progress.
	Unrelieved bool
	// KnownHeavy is set when tasks of classes known to be heavy on the
	// resource leave the others too little while they wait (see the
	// package documentation, "Known-heavy classes"): it counts as
	// contended whatever its level, and a decision on it is taken without
	// the confirmation time.
	KnownHeavy bool
	// MinGain is the least future use of it that makes a task a
	// candidate: half the tightest objective of the tasks waiting for it,
	// or the policy's default (see WithMinGain). Memory resources have
	// none (WithMinEvictionShare).
	MinGain time.Duration
}

// Candidate is a task the policy considered, with its gains on the
// contended resources (in the order of Evaluation.Contended).
type Candidate struct {
	Task     uint64
	Class    string
	Key      string
	Progress float64
	Source   estimate.Source
	Usage    []float64 // future (or current, for CurrentUsage) usage per contended resource
	Share    []float64 // Usage as a share of all candidates' on that resource
	Score    float64   // Σ_r C_r · Share_r
	// Dominated is set when another candidate gains at least as much on
	// every contended resource and loses no more, and is better on one
	// (MultiObjective; CurrentUsage weighs gains only).
	Dominated bool
	// Loss is the work its cancellation throws away: its use so far, in
	// seconds of the whole resource summed over its resources (see
	// estimate.Spent); Elapsed its age.
	Loss    float64
	Elapsed time.Duration
	// Sufficient is set when cancelling it alone frees enough of the
	// main resource (Evaluation.Main): the other candidates leave room.
	Sufficient bool
	// Future says where its future use came from.
	Future FutureSource
	// Background is set for a background task (task.Background): while
	// one is a candidate, only background candidates are chosen from.
	Background bool
	// Why it was not chosen ("" for the chosen).
	Why string
}

// Excluded is a task left out of the candidates, with the reason.
type Excluded struct {
	Task  uint64
	Class string
	Why   string
}

// Evaluation is everything a decision rests on: the explanation a decision
// carries, computed on its own by [Atropos.Evaluate].
type Evaluation struct {
	Levels []Level
	// Contended indexes into Levels the resources the decision weighs:
	// those at a tenth of the contention threshold or more, once one has
	// reached it (Greedy: the most contended one only).
	Contended []int
	// Main indexes into Contended the most contended resource: the one a
	// candidate must free enough of to be chosen for its small loss.
	Main int
	// Candidates, best first (by score, or by gain on the most contended
	// resource for Greedy): all of them from [Atropos.Evaluate], the first
	// few in a decision's explanation.
	Candidates []Candidate
	Total      int // candidates in all
	Skyline    int // non-dominated candidates
	// Why tasks were left out: not marked cancellable, already cancelled,
	// waiting behind another task (cancellable, but the blame for their
	// wait is the holder's), or freeing nothing contended.
	NotCancellable, AlreadyCancelled, WaitingBehind, NoGain int
	// NoGainTasks lists the first few tasks left out for no gain that hold
	// a contended resource (the tasks that only wait are counted only).
	NoGainTasks []Excluded
	// Mixed lists the first few classes of the tasks weighed whose history
	// was not trusted (see estimate.Uses.Mixed).
	Mixed  []MixedClass
	Chosen int // index into Candidates, -1 for none
	Reason string
}

// Evaluate runs the policy on s and returns its full reasoning. It does
// not modify s.
func (a *Atropos) Evaluate(s *snapshot.Snapshot) Evaluation {
	ev := Evaluation{Chosen: -1}
	a.evaluate(s, &ev, math.MaxInt)
	return ev
}

// cand is the compact working form of a candidate: the policy sorts and
// compares these, and builds [Candidate]s only for the ones it reports.
type cand struct {
	score, total float64 // Σ C_r·share_r, Σ share_r (and the keep dimension)
	task         int32   // index into the snapshot's tasks
	off          int32   // its shares: a.vals[off : off+dims], then its keep value
	progress     float64
	source       estimate.Source
	dominated    bool
	support      uint64 // bit d set when the value on dimension d is positive (dims ≤ 64)
	loss         float64
	held         int64 // units of the main resource held and waited for
	sufficient   bool
	background   bool // a Background task: chosen before any foreground one
	future       FutureSource
	mixed        bool // its class's history was not trusted
	// unproven is set when it holds a resource on which its class is
	// judged or refuted, with no evidence of its own that it is heavy
	// there (see judgement).
	unproven bool
}

// FutureSource says where a candidate's future use came from.
type FutureSource uint8

var futureSourceNames = [...]string{FromProgress: "progress", FromClassUse: "class-use", FromDemand: "demand"}

// String returns the source's name.
func (f FutureSource) String() string { return enum.NameOr(f, futureSourceNames[:], "unknown") }

// evaluate fills ev with the policy's reasoning on s: the contention
// levels, the candidates (the first limit of them, best first) and the
// choice. Each step is a method of its own, below.
func (a *Atropos) evaluate(s *snapshot.Snapshot, ev *Evaluation, limit int) {
	main := a.contended(s, ev)
	if main < 0 {
		return
	}
	a.dimensions(s, ev, main)
	dims := len(ev.Contended)
	totals := make([]float64, dims)
	maxLoss := a.candidates(s, ev, main, totals)
	if len(a.work) == 0 {
		ev.Reason = "no cancellable task would free a contended resource"
		return
	}
	a.shares(ev, &s.Resources[main], totals, maxLoss)
	order, best, leastLoss := a.choose(s, ev, limit)
	a.report(s, ev, &s.Resources[main], order, best, totals, limit)
	ev.Chosen = 0
	ev.Reason = a.reason(ev, leastLoss)
}

// contended computes each resource's contention level into ev.Levels, the
// resources the decision weighs into ev.Contended (Greedy: the most
// contended one only) and ev.Main, and returns the index in s.Resources of
// the most contended resource, or -1 (ev.Reason set) when none is
// contended outside an episode.
func (a *Atropos) contended(s *snapshot.Snapshot, ev *Evaluation) int {
	a.contention(s)
	a.knownHeavy(s)
	main := -1
	for i := range s.Resources {
		r := &s.Resources[i]
		l := Level{Resource: r.Name, Kind: r.Kind, Level: a.levels[i], Waiters: r.Waiters}
		if r.Kind != resource.KindMemory {
			l.MinGain = time.Duration(a.gain[i] * float64(time.Second))
		}
		// With no detector firing (s.Quiet), only known-heavy tasks are
		// acted on: measured contention waits for an overload detector.
		l.Contended = a.confirms(r, l.Level) && !s.Quiet
		// Known-heavy tasks that leave the others too little make the
		// resource contended whatever its level, and the decision on it
		// needs no confirmation, whether or not the measured contention
		// has also reached the threshold.
		if a.khCand[i] >= 0 {
			l.Contended, l.KnownHeavy = true, true
		}
		l.Unrelieved = a.refutedRes(r)
		if l.Contended && a.inEpisode(r) {
			l.Contended, l.Episode = false, true
		}
		ev.Levels = append(ev.Levels, l)
		if ((l.Level >= a.cfg.minContention/10 && !s.Quiet) || l.KnownHeavy) && !l.Episode {
			ev.Contended = append(ev.Contended, i)
		}
		if l.Contended && (main < 0 || l.Level > ev.Levels[main].Level ||
			(l.Level == ev.Levels[main].Level && ev.Levels[main].KnownHeavy && !l.KnownHeavy)) {
			main = i
		}
	}
	if main < 0 {
		ev.Contended = ev.Contended[:0]
		ev.Reason = "no contended resource"
		if slices.ContainsFunc(ev.Levels, func(l Level) bool { return l.Episode }) {
			ev.Reason = "no contended resource outside an episode: a cancelled task's use has not been seen to come back"
		}
		return main
	}
	if a.variant == Greedy {
		// Only the most contended resource counts.
		ev.Contended = append(ev.Contended[:0], main)
	}
	ev.Main = slices.Index(ev.Contended, main)
	return main
}

// dimensions maps each resource of s to its dimension among ev.Contended,
// or -1 (a.dimOf), and sets each dimension's minimum gain (a.floor): a
// share of the capacity for memory, the resource's minimum gain in seconds
// otherwise (gainFloors: from the objectives of the tasks waiting for it).
func (a *Atropos) dimensions(s *snapshot.Snapshot, ev *Evaluation, main int) {
	// dimOf maps a resource index to its dimension, or -1.
	a.dimOf = a.dimOf[:0]
	for range s.Resources {
		a.dimOf = append(a.dimOf, -1)
	}
	floor := a.floor[:0]
	for d, i := range ev.Contended {
		a.dimOf[i] = int32(d)
		r := &s.Resources[i]
		if r.Kind == resource.KindMemory {
			floor = append(floor, a.cfg.minEvictShare*float64(max(r.Capacity, r.InUse, 1)))
		} else {
			floor = append(floor, a.gain[i])
		}
	}
	a.floor = floor
}

// candidates computes the candidates (a.work) and their future use of each
// contended resource (a.vals, dims values then a free one for the keep
// dimension per candidate), counts in ev the tasks left out and why, adds
// each dimension's future use into totals and returns the largest loss.
// main is the most contended resource's index in s.Resources.
func (a *Atropos) candidates(s *snapshot.Snapshot, ev *Evaluation, main int, totals []float64) (maxLoss float64) {
	dims := len(ev.Contended)
	cands, vals := a.work[:0], a.vals[:0]
	for ti := range s.Tasks {
		t := &s.Tasks[ti]
		switch {
		case !t.Cancellable:
			ev.NotCancellable++
			continue
		case t.Cancelled:
			ev.AlreadyCancelled++
			continue
		case t.Blocked:
			// Waiting behind another task: the blame is that task's.
			ev.WaitingBehind++
			continue
		}
		first, n := int(t.First), int(t.N)
		if first < 0 || n < 0 || first+n > len(s.Usage) {
			ev.NoGain++
			continue
		}
		off := len(vals)
		vals = slices.Grow(vals, dims+1)[:off+dims+1]
		usage := vals[off : off+dims]
		clear(vals[off:])
		c := cand{task: int32(ti), off: int32(off), background: t.Kind == task.Background}
		any, holds := a.future(s, t, main, usage, &c)
		if c.mixed && holds {
			a.noteMixed(ev, t.Class)
		}
		if !any {
			vals = vals[:off]
			ev.NoGain++
			if holds && len(ev.NoGainTasks) < maxListed {
				why := "no gain: expected to release the contended resources within the minimum gain"
				if c.unproven {
					why = "refuted: a cancellation of a task of its class on a resource it holds is being judged or did not relieve it, and it reports no progress"
				}
				ev.NoGainTasks = append(ev.NoGainTasks, Excluded{Task: t.ID, Class: t.Class, Why: why})
			}
			continue
		}
		for d, v := range usage {
			totals[d] += v
		}
		c.loss, _ = estimate.Loss(s, ti)
		maxLoss = max(maxLoss, c.loss)
		cands = append(cands, c)
	}
	a.work, a.vals = cands, vals
	return maxLoss
}
