package cpu

import (
	"math"
	"time"
)

// Active returns the number of workers a process should run: ⌈o · share
// · cpus⌉, at least 1 and at most limit, where share is the process's
// share of the busy CPU time, cpus its budget and o the overcommit
// factor. A share outside [0, 1] is clamped. It is the pure policy the
// pool's loop applies at each tick.
func Active(o, share, cpus float64, limit int) int {
	return activeTol(o, share, cpus, 0, limit)
}

// activeTol is ⌈o · share · cpus − tol⌉, at least 1 and at most limit:
// Active with a tolerance (see WithTolerance).
func activeTol(o, share, cpus, tol float64, limit int) int {
	share = min(max(share, 0), 1)
	if math.IsNaN(share) {
		share = 1
	}
	x := o*share*cpus - tol
	// A product that is an integer but for rounding error (0.1·3·10) is
	// that integer, not the next one.
	n := int(math.Ceil(x - 1e-9))
	return min(max(n, 1), max(limit, 1))
}

// Limit is the most workers a pool of overcommit factor o may run on a
// budget of cpus: ⌈o · cpus⌉, at least 1.
func Limit(o, cpus float64) int {
	return max(int(math.Ceil(o*cpus-1e-9)), 1)
}

// window holds the samples of the last ticks and measures the share over
// them. Both counters advance in clock ticks: over a single 10 ms tick
// the process's CPU time moves by 0, 1 or 2 ticks, so the share of one
// tick is mostly rounding; over a window of n ticks it is the share of
// the last n ticks' time, updated at every tick.
type window struct {
	ring []Sample // the last n samples
	next int      // where the next sample goes; the oldest when full
	full bool
}

func newWindow(n int) *window { return &window{ring: make([]Sample, max(n, 1))} }

// reset forgets the samples (after a failed read: the next difference
// would span an unknown time).
func (w *window) reset() { w.next, w.full = 0, false }

// push adds a sample and returns the share of the busy time that was the
// process's since the oldest sample held, and whether there is one. When
// no CPU was busy at all (an idle host), the share is 1: nobody else
// wants the CPUs. A counter that went backwards resets the window.
func (w *window) push(s Sample) (share float64, ok bool) {
	var oldest Sample
	switch {
	case w.full:
		oldest, ok = w.ring[w.next], true
	case w.next > 0:
		oldest, ok = w.ring[0], true
	}
	if ok && (s.Self < oldest.Self || s.Busy < oldest.Busy) {
		w.reset()
		ok = false
	}
	w.ring[w.next] = s
	w.next++
	if w.next == len(w.ring) {
		w.next, w.full = 0, true
	}
	if !ok {
		return 0, false
	}
	return shareOf(s.Self-oldest.Self, s.Busy-oldest.Busy), true
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
