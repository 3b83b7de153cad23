package cpu

import (
	"math"
	"time"
)

// Active returns ⌈o · share · cpus⌉, at least 1 and at most limit, where
// share is the process's share of the busy CPU time, cpus its budget and
// o the overcommit factor; a share outside [0, 1] is clamped. It is the
// friendlypool paper's one-shot sizing, which `moirai cpus` prints. The
// pool's loop does not use it: a share only grows by using more CPU, so
// ⌈⌉ must claim a worker more than the process uses to grow at all, and
// on a small host that extra worker is an overcommit that lasts; the
// loop follows the CPUs the neighbours leave free instead ([Next]).
func Active(o, share, cpus float64, limit int) int {
	share = min(max(share, 0), 1)
	if math.IsNaN(share) {
		share = 1
	}
	// A product that is an integer but for rounding error (0.1·3·10) is
	// that integer, not the next one.
	n := int(math.Ceil(o*share*cpus - 1e-9))
	return min(max(n, 1), max(limit, 1))
}

// Limit is the most workers a pool of overcommit factor o may run on a
// budget of cpus: ⌈o · cpus⌉, at least 1.
func Limit(o, cpus float64) int {
	return max(int(math.Ceil(o*cpus-1e-9)), 1)
}

// Defaults of the control loop's margins (see [Next]): the pool grows
// by a worker when its neighbours leave it at least half a CPU beyond
// its active count, and shrinks when they leave it a quarter of a CPU
// less than its active count minus one.
const (
	DefaultGrow = 0.5
	deadBand    = 0.25
)

// Next is the control loop's policy, pure: from the active count n and
// the workers the neighbours leave room for, x = O · free (free: the
// CPUs of the budget that the rest of the host left unused over the
// window), it returns the next active count, in [1, limit]. grow is the
// grow margin in [0, 1).
//
// Each count n holds over the band [n − shrink, n + grow), with shrink =
// 1 − grow + 0.25: above it the count rises to ⌊x + 1 − grow⌋, below it
// falls to ⌊x + shrink⌋, both the counts whose bands hold x. The bands
// of n and n + 1 overlap by a quarter of a worker, so an estimate that
// wanders within a quarter of a CPU around a boundary moves the count
// once, not back and forth: the count follows the estimate within the
// window and does not oscillate on its noise.
func Next(n int, x, grow float64, limit int) int {
	limit = max(limit, 1)
	if math.IsNaN(x) {
		return min(max(n, 1), limit)
	}
	shrink := 1 - grow + deadBand
	switch {
	case x >= float64(n)+grow-1e-9:
		n = int(math.Floor(x + 1 - grow + 1e-9))
	case x < float64(n)-shrink-1e-9:
		n = int(math.Floor(x + shrink + 1e-9))
	}
	return min(max(n, 1), limit)
}

// window holds the samples of the last ticks and measures over them.
// Both counters advance in clock ticks: over a single 10 ms tick the
// process's CPU time moves by 0, 1 or 2 ticks, so what one tick measures
// is mostly rounding; over a window of n ticks it is what the last n
// ticks measured, updated at every tick. It keeps longSpan windows of
// samples, for the longer look a grow takes ([window.long]).
type window struct {
	ring []point // the last longSpan·n + 1 points
	n    int     // the window, in ticks
	next int     // where the next point goes; the oldest when full
	full bool
}

// longSpan is how many windows a grow looks back over.
const longSpan = 4

// point is a sample and the running work summed over the ticks so far.
type point struct {
	s       Sample
	running float64
}

func newWindow(n int) *window {
	n = max(n, 1)
	return &window{ring: make([]point, longSpan*n+1), n: n}
}

// reset forgets the samples (after a failed read: the next difference
// would span an unknown time).
func (w *window) reset() { w.next, w.full = 0, false }

// estimate is what one window measured.
type estimate struct {
	// share is the process's share of the busy time (1 when nothing was
	// busy). self, others and busy are the fractions of the host's CPU
	// time that the process, the rest of the host and all of it kept
	// busy, NaN when the reader gives no total time. running is the work
	// the pool ran, on average over the window's ticks. steal is the
	// fraction of the host's time the hypervisor gave to other machines.
	share, self, others, busy, running, steal float64
	// total is the host's time over the window (all its CPUs).
	total time.Duration
}

func (w *window) held() int {
	if w.full {
		return len(w.ring)
	}
	return w.next
}

// at returns the point back ticks before the last one.
func (w *window) at(back int) point {
	return w.ring[((w.next-1-back)%len(w.ring)+len(w.ring))%len(w.ring)]
}

// push adds a sample, with the work the pool runs now, and returns what
// the window measured over its last n ticks (fewer while it fills), and
// whether it holds two samples. A counter that went backwards resets the
// window.
func (w *window) push(s Sample, running int) (e estimate, ok bool) {
	var last point
	if w.held() > 0 {
		last = w.at(0)
		if s.Self < last.s.Self || s.Busy < last.s.Busy || s.Total < last.s.Total {
			w.reset()
			last = point{}
		}
	}
	w.ring[w.next] = point{s: s, running: last.running + float64(running)}
	w.next++
	if w.next == len(w.ring) {
		w.next, w.full = 0, true
	}
	return w.recent(w.n)
}

// recent returns what the last k ticks of the window measured (fewer if
// it holds fewer), and whether it holds two samples.
func (w *window) recent(k int) (estimate, bool) {
	k = min(k, w.held()-1)
	if k < 1 {
		return estimate{}, false
	}
	return measure(w.at(k), w.at(0), float64(k)), true
}

// long returns what the last longSpan windows measured (fewer ticks if it
// holds fewer).
func (w *window) long() (estimate, bool) { return w.recent(longSpan * w.n) }

// measure is what was measured between two points span ticks apart.
func measure(old, cur point, span float64) estimate {
	dSelf, dBusy, dTotal := cur.s.Self-old.s.Self, cur.s.Busy-old.s.Busy, cur.s.Total-old.s.Total
	e := estimate{share: shareOf(dSelf, dBusy), self: math.NaN(), others: math.NaN(), busy: math.NaN(),
		running: (cur.running - old.running) / span, total: dTotal}
	if dTotal > 0 {
		e.self = min(max(float64(dSelf)/float64(dTotal), 0), 1)
		e.busy = min(max(float64(dBusy)/float64(dTotal), 0), 1)
		e.others = max(e.busy-e.self, 0)
		e.steal = min(max(float64(cur.s.Steal-old.s.Steal)/float64(dTotal), 0), 1)
	}
	return e
}

// saturated is the busy fraction of the host above which its CPUs are
// taken to be shared out among more runnable threads than CPUs.
const saturated = 0.9

// free returns the CPUs of a budget of cpus that the rest of a host of
// host CPUs leaves the process, from a window's estimate, and the CPUs
// the rest of the host wants (its demand), NaN if the estimate has no
// total time. quantum is the step in which the CPU-time counters advance.
//
// Where the host has idle CPU, nobody waits for one, and the rest of the
// host wants what it uses. Where it is saturated, the scheduler shares
// the CPUs out among the runnable threads, and what the neighbours use
// understates what they want by as much as the process's own use
// understates its running work: with n workers running beside m runnable
// threads on C < n + m CPUs, the process uses n·C/(n+m) and the rest
// m·C/(n+m), whose ratio is n/m. Their demand is then their use times
// running / self use. Without that correction a pool that runs one
// worker too many on a full host sees its neighbours squeezed, and so
// room for itself, and keeps it: two pools on two CPUs would settle at
// two workers and one.
//
// The correction multiplies the neighbours' use, so it multiplies the
// error of its two inputs too: the process's CPU time advances in whole
// clock ticks (over a third of a window, one tick is a sixth of two
// workers' time), and the running work is sampled once a tick. A host
// exactly full (as many threads as CPUs, nobody waiting) then looked
// oversubscribed whenever the counter rounded down, and with four hogs
// beside it a pool of two workers saw them want 4.8 CPUs and dropped to
// one. So the self use the correction divides by is taken one quantum
// high, the most it can be: only a shortfall the counter's rounding
// cannot explain is read as contention.
//
// Time the hypervisor stole is a CPU the host did not have: the stolen
// CPUs count with the neighbours (steal is part of the total time and
// not of the busy time, so read as idle it would be room to grow into),
// and the host is saturated when its busy time fills what was left.
func (e estimate) free(cpus, host float64, quantum time.Duration) (free, others float64) {
	if math.IsNaN(e.others) {
		return math.NaN(), math.NaN()
	}
	self, others := e.self*host, e.others*host
	if e.busy >= saturated*(1-e.steal) && self > 0 {
		if e.total > 0 {
			self += host * float64(quantum) / float64(e.total)
		}
		if e.running > self {
			others *= e.running / self
		}
	}
	others += e.steal * host
	return min(cpus, max(host-others, 0)), others
}

// shareOf is dSelf / dBusy, clamped to [0, 1]; 1 when nothing was busy.
// The two counters are read from different files at slightly different
// moments and rounded separately, so the process's time can exceed the
// host's by a tick.
func shareOf(dSelf, dBusy time.Duration) float64 {
	if dBusy <= 0 {
		return 1
	}
	return min(float64(dSelf)/float64(dBusy), 1)
}

// withoutSteal is e with the stolen time read as idle.
func (e estimate) withoutSteal() estimate { e.steal = 0; return e }
