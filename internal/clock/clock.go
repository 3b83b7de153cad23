// Package clock is the time source of moirai's hot path.
//
// Reading the system clock costs tens of nanoseconds, more than an
// uncontended lock. Events therefore read a coarse value that the controller
// advances on a ticker (Atropos §3.2): one atomic load. While a detector has
// fired, the controller switches the clock to precise mode and every read
// asks the monotonic clock instead, so the measurements that feed a decision
// are exact.
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
	coarse     atomic.Int64
	precise    atomic.Bool
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
	if c.precise.Load() {
		return c.Precise()
	}
	return c.coarse.Load()
}

// Coarse returns the coarse value, whatever the mode: one atomic load. The
// primitives read it for the holds they track themselves, where a read of
// the monotonic clock would cost more than the lock; the controller
// advances it ten times as often while the clock is precise (see
// TestCoarseHoldsSameDecisions in package moirai). Everything else reads
// [Clock.Now].
func (c *Clock) Coarse() int64 { return c.coarse.Load() }

// Precise reads the monotonic clock and returns the time since the epoch in
// nanoseconds, whatever the mode. It also advances the coarse value when
// that lags by a sixteenth of the resolution or more: in precise mode
// every event reads the clock, and a compare-and-swap of the shared word
// on each read made the readers queue for its cache line.
func (c *Clock) Precise() int64 {
	n := int64(time.Since(c.epoch))
	if n-c.coarse.Load() >= c.resolution.Load()>>4 {
		c.store(n)
	}
	return n
}

// Advance stores the monotonic time as the coarse value. The controller calls
// it on every tick of the clock's resolution, and ten times as often while
// the clock is precise.
func (c *Clock) Advance() int64 {
	n := int64(time.Since(c.epoch))
	c.store(n)
	return n
}

// store raises the coarse value to n, never lowering it, so readers of the
// coarse value never see time go backwards when two advances race.
func (c *Clock) store(n int64) {
	for {
		old := c.coarse.Load()
		if n <= old || c.coarse.CompareAndSwap(old, n) {
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
	c.precise.Store(on)
	if !on {
		c.Advance()
	}
}

// IsPrecise reports whether the clock is in precise mode.
func (c *Clock) IsPrecise() bool { return c.precise.Load() }

// Epoch returns the wall time of the clock's epoch, for converting clock
// values to wall times in logs.
func (c *Clock) Epoch() time.Time { return c.epoch }

// Time converts a clock value to a wall time.
func (c *Clock) Time(n int64) time.Time { return c.epoch.Add(time.Duration(n)) }
