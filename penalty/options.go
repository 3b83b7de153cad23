package penalty

import (
	"math"
	"time"

	"github.com/moirai-go/moirai/internal/opt"
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

// Option configures [New]. Options are made by the With functions; they
// set an unexported configuration, which New applies to the policy it
// returns once all of them ran.
type Option func(*config)

// config is what the options set: the policy's bounds on the penalties.
type config struct {
	min, max time.Duration
	fixed    bool    // max set by WithMaxPenalty: a cap for streams too
	slowdown float64 // the streams' slowdown budget, 0: none
}

// WithMaxPenalty sets a cap on every penalty. Without it the cap is a
// noisy stream's slowdown budget (see [WithMaxSlowdown]), or, until the
// policy has followed the stream long enough, [DefaultMaxPenalty] or the
// time its requests queue behind one another in front of the resource if
// longer (see the package documentation). At most task.MaxPenalty is
// ever served.
func WithMaxPenalty(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.max, c.fixed = d, true
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
	return func(c *config) {
		if math.IsNaN(x) || math.IsInf(x, 0) || x <= 1 {
			x = 0
		}
		c.slowdown = x
	}
}

// WithMinPenalty sets the first penalty used when p1's formula gives
// none (default [DefaultMinPenalty]).
func WithMinPenalty(d time.Duration) Option {
	return func(c *config) { opt.Set(&c.min, d, d > 0) }
}
