package snapshot

import (
	"math"
	"time"

	"github.com/moirai-go/moirai/resource"
)

// A resource that a culprit ruins gradually (a buffer pool a scan floods, a
// pool of slots a parallel request fills) shows it in its trajectory before
// any request misses its objective: one task's share of the capacity grows
// while the other tasks start to miss or wait. [Trajectory] derives these
// signals from the snapshots of a loop, for any policy that wants them:
//
//   - each task's share of a capacity-bounded resource (a Memory's residency
//     charged to the task, the slots or units it holds), how fast the share
//     grows, and how fast the task evicts what others used;
//   - per resource, the waits begun per second (a Memory's misses, a pool's
//     or a semaphore's waits) and the same rate without the task holding
//     the largest share: what the others suffer.
//
// Rates are counted over a span (default 30 ms) rather than one window, so
// that a loop's fine tick, whose windows hold a handful of events, still
// gives a rate a policy can hold to a least count.

// Share is one task's part of one capacity-bounded resource.
type Share struct {
	Task  int     // index into Snapshot.Tasks
	Res   int     // index into Snapshot.Resources
	Held  int64   // units held (a Memory: resident units charged to the task)
	Share float64 // Held / Capacity
	// Growth is how fast Share grows, in capacity per second, smoothed
	// over 50 ms (a share taken in one step shows for a while); 0 for a
	// task first seen in this snapshot with nothing before.
	Growth float64
	// Evicting is how fast the task evicts units others used (a
	// Memory), in capacity per second, smoothed as Growth.
	Evicting float64
}

// growthSpan is the span growth is smoothed over.
const growthSpan = 50 * time.Millisecond

// ResourceSignals is what the trajectory shows of one resource.
type ResourceSignals struct {
	// Bounded reports whether the resource has a capacity whose shares
	// mean something: a Memory, a Queue, a CPU or an IO resource with a
	// capacity (a lock is contended by blocking, not by shares).
	Bounded bool
	// Top is the share of the task holding the most (Top.Task is −1 when
	// nobody holds anything).
	Top Share
	// WaitRate is the waits begun per second by every task over the
	// span; OthersWaitRate the same without Top's task; OthersWaits their
	// count over the span.
	WaitRate       float64
	OthersWaitRate float64
	OthersWaits    int64
	Span           time.Duration // the span the rates are counted over

	steps []waitStep // the windows of the span, oldest first
}

type waitStep struct {
	at          time.Duration // end of the window
	dt          time.Duration
	all, others int64
}

// Trajectory follows the snapshots of one loop. Observe every snapshot in
// order; the signals describe the last one observed. A Trajectory is not
// safe for concurrent use; its memory is bounded by the live tasks'
// entries of the last snapshot.
type Trajectory struct {
	span   time.Duration
	at     time.Duration
	seen   bool
	prev   map[entryKey]entryPrev
	next   map[entryKey]entryPrev
	res    []ResourceSignals
	shares []Share
	own    []int64
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

type entryKey struct {
	task uint64
	res  int32
}

type entryPrev struct {
	held, waits, evictions int64
	growth, evicting       float64
}

// NewTrajectory returns a trajectory whose rates are smoothed over span
// and whose wait rates are counted over it (at least 1 ms; 0 means
// 30 ms).
func NewTrajectory(span time.Duration) *Trajectory {
	if span <= 0 {
		span = 30 * time.Millisecond
	}
	return &Trajectory{span: max(span, time.Millisecond),
		prev: make(map[entryKey]entryPrev), next: make(map[entryKey]entryPrev)}
}

// Bounded reports whether r has shares worth watching (see
// ResourceSignals.Bounded).
func Bounded(r *Resource) bool {
	return r.Capacity > 0 && r.Kind != resource.KindLock
}

// Observe derives the signals of s from it and the snapshots before.
func (tr *Trajectory) Observe(s *Snapshot) {
	dt := s.At - tr.at
	if !tr.seen || dt <= 0 || s.Window <= 0 {
		dt = 0
	}
	tr.reset(s)
	tr.observeShares(s, dt)
	for i := range tr.res {
		tr.res[i].observeWaits(s, i, dt, tr.own[i], tr.span)
	}
	tr.at, tr.seen = s.At, true
}

// reset sizes the per-resource signals to the resources of s and clears
// what a snapshot's pass fills: the shares, each resource's Top and its
// waits, the entries for the next snapshot.
func (tr *Trajectory) reset(s *Snapshot) {
	n := len(s.Resources)
	for len(tr.res) < n {
		tr.res = append(tr.res, ResourceSignals{})
	}
	tr.res = tr.res[:n]
	for i := range tr.res {
		tr.res[i].Bounded = Bounded(&s.Resources[i])
		tr.res[i].Top = Share{Task: -1, Res: i}
	}
	tr.shares = tr.shares[:0]
	tr.own = grow(tr.own, n) // Top's waits in the window, per resource
	clear(tr.own)
	clear(tr.next)
}

// observeShares records the share of every holder of a bounded resource
// in s, and each resource's Top with Top's waits in the window; dt is the
// window since the snapshot before (0: none to derive rates from).
func (tr *Trajectory) observeShares(s *Snapshot, dt time.Duration) {
	// Weight of this window in the smoothed rates.
	galpha := 1.0
	if dt > 0 {
		galpha = 1 - math.Exp(-float64(dt)/float64(growthSpan))
	}
	n := len(s.Resources)
	for ti := range s.Tasks {
		t := &s.Tasks[ti]
		first, cnt := int(t.First), int(t.N)
		if first < 0 || cnt <= 0 || first+cnt > len(s.Usage) {
			continue
		}
		for _, u := range s.Usage[first : first+cnt] {
			ri := int(u.Res)
			if ri < 0 || ri >= n {
				continue
			}
			r := &tr.res[ri]
			if !r.Bounded || u.Held <= 0 {
				continue
			}
			sh, e, w := tr.share(s, ti, u, dt, galpha)
			tr.shares = append(tr.shares, sh)
			if sh.Held > r.Top.Held || (sh.Held == r.Top.Held && sh.Growth > r.Top.Growth) {
				r.Top = sh
				tr.own[ri] = w
			}
			tr.next[entryKey{t.ID, u.Res}] = e // only holders have a growth, or can be Top
		}
	}
	tr.prev, tr.next = tr.next, tr.prev
}

// share returns task ti's share of the resource it holds in u, smoothing
// its growth and eviction rates with weight galpha over the window dt, the
// entry to remember for the next snapshot, and the task's waits for the
// resource in the window.
func (tr *Trajectory) share(s *Snapshot, ti int, u Usage, dt time.Duration, galpha float64) (Share, entryPrev, int64) {
	ri := int(u.Res)
	p, had := tr.prev[entryKey{s.Tasks[ti].ID, u.Res}]
	e := entryPrev{held: u.Held, waits: u.Waits, evictions: u.Evictions}
	w := u.Waits - p.waits
	if !had && dt == 0 {
		w = 0 // first snapshot: cumulative, in no window
	}
	w = max(w, 0)
	c := float64(s.Resources[ri].Capacity)
	sh := Share{Task: ti, Res: ri, Held: u.Held, Share: float64(u.Held) / c}
	if dt > 0 {
		inst := float64(u.Held-p.held) / c / dt.Seconds()
		e.growth = p.growth + galpha*(inst-p.growth)
		ev := 0.0
		if had {
			ev = float64(max(u.Evictions-p.evictions, 0)) / c / dt.Seconds()
		}
		e.evicting = p.evicting + galpha*(ev-p.evicting)
	}
	sh.Growth, sh.Evicting = e.growth, e.evicting
	return sh, e, w
}

// observeWaits adds the waits on Resources[i] in the window dt ending at
// s.At (own of them by Top's task) to the resource's rates, counted over
// the windows that cover span; dt 0 clears them.
func (r *ResourceSignals) observeWaits(s *Snapshot, i int, dt time.Duration, own int64, span time.Duration) {
	if dt == 0 {
		r.steps = r.steps[:0]
		r.WaitRate, r.OthersWaitRate, r.OthersWaits, r.Span = 0, 0, 0, 0
		return
	}
	all := s.Resources[i].WindowWaits
	r.steps = append(r.steps, waitStep{at: s.At, dt: dt, all: all, others: max(all-own, 0)})
	// Keep the windows that end within the span, and the one before
	// when they do not cover it yet.
	for len(r.steps) > 1 && s.At-r.steps[1].at+r.steps[1].dt >= span {
		r.steps = r.steps[1:]
	}
	if cap(r.steps) > 4*len(r.steps)+64 {
		r.steps = append([]waitStep(nil), r.steps...)
	}
	var covered time.Duration
	var a, o int64
	for _, st := range r.steps {
		covered += st.dt
		a += st.all
		o += st.others
	}
	r.WaitRate = float64(a) / covered.Seconds()
	r.OthersWaitRate = float64(o) / covered.Seconds()
	r.OthersWaits = o
	r.Span = covered
}

// Resource returns the signals of Resources[i] of the last snapshot
// observed, or nil if it had no such resource.
func (tr *Trajectory) Resource(i int) *ResourceSignals {
	if i < 0 || i >= len(tr.res) {
		return nil
	}
	return &tr.res[i]
}

// Shares returns every task's share of every bounded resource it holds in
// the last snapshot observed. The slice is reused by the next Observe.
func (tr *Trajectory) Shares() []Share { return tr.shares }
