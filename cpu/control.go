package cpu

import (
	"math"
	"math/rand/v2"
	"time"
)

// control is the pool's control loop, apart from the pool's goroutine
// and queue: it turns each tick's sample into the active count. It is
// used by one goroutine.
//
// Each tick it measures, over the window, the CPUs the rest of the host
// wants (estimate.free) and applies [Next] to the active count. A shrink
// is applied at once, and also read from the last third of the window;
// no grow follows it before a window has measured the new count. A grow
// needs the room over the window, its last third and the last longSpan
// windows alike: a neighbour's queue that empties for a moment leaves
// room that is gone a moment later. A grow is a probe: the pool claims
// CPU that looked free, and only the next window tells whether it was
// (another pool may have claimed it in the same tick). So after a grow
// the count does not grow again before a whole window has measured it;
// and a grow followed
// within two windows by a shrink (the probe failed) doubles the time the
// pool waits before its next grow (up to maxBackoff windows), drawn at
// random between one and two times that long, so that pools that grew
// together and shrank together do not grow together again. A grow that
// holds for two windows halves the wait.
type control struct {
	cpus, host, o, grow float64
	limit, window       int
	// quantum is the step in which the CPU-time counters advance (one
	// clock tick for /proc): what a window's own CPU time may be off by.
	quantum time.Duration

	n         int // the active count
	hold      int // ticks before the next grow is allowed
	backoff   int // the wait after a failed probe, in windows
	sinceGrow int // ticks since the last grow; -1: none pending
	rng       *rand.Rand
}

// short is the span of the recent ticks the count also shrinks on: a
// third of the window, at least 2 ticks, less than the window (none for
// a window of one tick).
func (c *control) short() int { return min(max(c.window/3, 2), c.window-1) }

// maxBackoff bounds the wait after failed probes, in windows.
const maxBackoff = 32

func newControl(cpus, host, o, grow float64, limit, window int, quantum time.Duration, seed uint64) *control {
	return &control{cpus: cpus, host: host, o: o, grow: grow, limit: limit, window: max(window, 1), quantum: quantum,
		n: limit, backoff: 1, sinceGrow: -1, rng: rand.New(rand.NewPCG(seed, 0x6d6f69726169))}
}

// step pushes a sample and the work running now into the window and moves
// the active count; it returns what the window measured.
func (c *control) step(win *window, s Sample, running int) StepInfo {
	info := StepInfo{Sample: s, Others: math.NaN(), Free: math.NaN()}
	c.hold = max(c.hold-1, 0)
	if c.sinceGrow >= 0 {
		c.sinceGrow++
		if c.sinceGrow > 2*c.window {
			// The probe held.
			c.sinceGrow = -1
			c.backoff = max(c.backoff/2, 1)
		}
	}
	e, ok := win.push(s, running)
	if !ok {
		return info
	}
	info.OK, info.Share, info.Running = true, e.share, e.running
	info.Free, info.Others = e.free(c.cpus, c.host, c.quantum)
	next := c.next(win, e, true)
	// A grow claims CPU the neighbours left over the window; it must
	// have been left over the last longSpan windows too. A neighbour
	// whose own arrivals pause for a window (a pool with a queue that
	// empties now and then) leaves room that is gone a moment later, and
	// the work a probe starts into it cannot be taken back: it runs
	// beside the neighbour's, both slower, until it ends. The long look
	// leaves the hypervisor's steal out: a CPU stolen in bursts is back
	// when the window and its last third say so, and waiting four
	// windows for a burst to leave the average would keep a pool alone
	// on its host below its CPUs for no neighbour.
	if next > c.n {
		if l, ok := win.long(); ok {
			free, _ := l.withoutSteal().free(c.cpus, c.host, c.quantum)
			next = min(next, max(Next(c.n, c.o*free, c.grow, c.limit), c.n))
		}
	}
	switch {
	case next < c.n:
		if c.sinceGrow >= 0 {
			c.sinceGrow = -1
			// The probe failed, unless only the hypervisor's steal
			// undid it: no other pool claimed the CPU, so there is
			// nobody to fall out of step with.
			if c.next(win, e.withoutSteal(), false) < c.n {
				c.backoff = min(c.backoff*2, maxBackoff)
				c.hold = c.window*c.backoff + c.rng.IntN(c.window*c.backoff+1)
			}
		}
		// The window still holds the ticks before the fall: no grow
		// before it has measured the new count.
		c.hold = max(c.hold, c.window)
		c.n = next
	case next > c.n && c.hold == 0:
		c.n = next
		c.hold = c.window
		c.sinceGrow = 0
	}
	return info
}

// next is the count the window e and its last third call for ([Next]
// on the CPUs each leaves free); steal false reads the stolen time of
// both as idle.
func (c *control) next(win *window, e estimate, steal bool) int {
	free, _ := e.free(c.cpus, c.host, c.quantum)
	next := Next(c.n, c.o*free, c.grow, c.limit)
	// A neighbour that comes back shows in the last ticks long before it
	// does over the window: shrink on them too.
	if r, ok := win.recent(c.short()); ok {
		if !steal {
			r = r.withoutSteal()
		}
		free, _ := r.free(c.cpus, c.host, c.quantum)
		next = min(next, Next(c.n, c.o*free, c.grow, c.limit))
	}
	return next
}
