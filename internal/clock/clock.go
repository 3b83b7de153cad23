// Package clock is the time source of moirai's hot path.
//
// Reading the system clock costs tens of nanoseconds, more than an
// uncontended lock. Events therefore read a coarse value that the controller
// advances on a ticker (Atropos §3.2): one atomic load. While a detector has
// fired, the controller switches the clock to precise mode and every read
// asks the monotonic clock instead, so the measurements that feed a decision
// are exact. The mode and the coarse value share one word, so that a read
// in coarse mode stays one load.
//
// Times are nanoseconds since the clock's epoch (the moment [New] was
// called), taken from Go's monotonic clock: stepping the wall clock
// backwards or forwards changes nothing.
package clock

import (
	"sync/atomic"
	"time"
)

// Clock is a monotonic nanosecond clock with a cheap coarse mode. It is safe
// for concurrent use. The zero value is not usable; call [New].
type Clock struct {
	epoch      time.Time
	resolution atomic.Int64
	// word is the coarse value (≥ 1), negated in precise mode: Now reads
	// the mode and the coarse value in one load.
	word atomic.Int64
}

// New returns a clock in coarse mode whose epoch is (a microsecond before)
// now. Every value it returns is at least 1.
func New() *Clock {
	// The epoch lies a microsecond back so that every reading is ≥ 1:
	// task accounting relies on clock values being positive.
	c := &Clock{epoch: time.Now().Add(-time.Microsecond)}
	c.resolution.Store(int64(time.Millisecond))
	c.Advance()
	return c
}

// Now returns the time since the epoch in nanoseconds: the last value stored
// by [Clock.Advance] in coarse mode, the monotonic clock in precise mode.
// Now never goes backwards.
func (c *Clock) Now() int64 {
	if w := c.word.Load(); w > 0 {
		return w
	}
	return c.precise()
}

// Coarse returns the coarse value, whatever the mode: one atomic load. The
// primitives read it for the holds they track themselves, where a read of
// the monotonic clock would cost more than the lock; the controller
// advances it ten times as often while the clock is precise (see
// TestCoarseHoldsSameDecisions in package moirai). Everything else reads
// [Clock.Now].
func (c *Clock) Coarse() int64 {
	w := c.word.Load()
	return max(w, -w)
}

// Precise reads the monotonic clock and returns the time since the epoch in
// nanoseconds, whatever the mode. It also advances the coarse value, when
// that lags by a sixteenth of the resolution or more.
func (c *Clock) Precise() int64 { return c.precise() }

// precise is Precise, out of line so that Now inlines. It raises the
// coarse value only when it lags by a sixteenth of the resolution or more:
// in precise mode every event reads the clock, and a compare-and-swap of
// the shared word on each read made the readers queue for its cache line.
//
//go:noinline
func (c *Clock) precise() int64 {
	n := int64(time.Since(c.epoch))
	if w := c.word.Load(); n-max(w, -w) >= c.resolution.Load()>>4 {
		c.store(n)
	}
	return n
}

// Advance stores the monotonic time as the coarse value. The controller calls
// it on every tick of the clock's resolution.
func (c *Clock) Advance() int64 {
	n := int64(time.Since(c.epoch))
	c.store(n)
	return n
}

// store raises the coarse value to n, never lowering it, so readers of the
// coarse value never see time go backwards when two advances race.
func (c *Clock) store(n int64) {
	for {
		old := c.word.Load()
		w := n
		if old < 0 {
			w = -n
		}
		if n <= max(old, -old) || c.word.CompareAndSwap(old, w) {
			return
		}
	}
}

// Resolution returns the period at which the coarse value is advanced, as
// set by SetResolution (default 1 ms), in nanoseconds.
func (c *Clock) Resolution() int64 { return c.resolution.Load() }

// SetResolution records the period at which the owner advances the coarse
// value. It does not start anything: the owner calls Advance.
func (c *Clock) SetResolution(d time.Duration) { c.resolution.Store(int64(max(d, time.Microsecond))) }

// SetPrecise switches precise mode on or off.
func (c *Clock) SetPrecise(on bool) {
	for {
		old := c.word.Load()
		w := max(old, -old)
		if on {
			w = -w
		}
		if c.word.CompareAndSwap(old, w) {
			break
		}
	}
	if !on {
		c.Advance()
	}
}

// IsPrecise reports whether the clock is in precise mode.
func (c *Clock) IsPrecise() bool { return c.word.Load() < 0 }

// Epoch returns the wall time of the clock's epoch, for converting clock
// values to wall times in logs.
func (c *Clock) Epoch() time.Time { return c.epoch }

// Time converts a clock value to a wall time.
func (c *Clock) Time(n int64) time.Time { return c.epoch.Add(time.Duration(n)) }
