package baseline

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of [NewBreakwater]. See the package documentation for their
// sources.
const (
	DefaultBreakwaterPeriod         = 10 * time.Millisecond
	DefaultBreakwaterTargetFloor    = time.Millisecond
	DefaultBreakwaterTargetMultiple = 2.0
	DefaultBreakwaterIncrease       = 0.05 // fraction of the pool added per period
	DefaultBreakwaterIncreaseMin    = 1.0  // credits added per period at least
	DefaultBreakwaterBeta           = 0.1
	DefaultBreakwaterBetaMax        = 0.5
	DefaultBreakwaterCredits        = 16
	DefaultBreakwaterMinCredits     = 1
	DefaultBreakwaterMaxCredits     = 10000
)

// serviceWeight is the weight of one control period's mean service time in
// the moving average (Breakwater's EWMA_WEIGHT).
const serviceWeight = 0.1

// breakwaterConfig is what BreakwaterOptions set.
type breakwaterConfig struct {
	period         time.Duration
	targetFloor    time.Duration
	targetMultiple float64
	increase       float64
	increaseMin    float64
	beta           float64
	betaMax        float64
	initial        int
	min, max       int
}

// A BreakwaterOption configures [NewBreakwater].
type BreakwaterOption func(*breakwaterConfig)

// WithBreakwaterPeriod sets the control period, the time between two updates
// of the credit pool (an RTT in the paper; 10 ms by default). A non-positive
// d leaves the default.
func WithBreakwaterPeriod(d time.Duration) BreakwaterOption {
	return func(c *breakwaterConfig) {
		if d > 0 {
			c.period = d
		}
	}
}

// WithBreakwaterTarget sets the target queueing delay to
// max(floor, multiple × the mean service time). The defaults are 1 ms and 2;
// a multiple of zero fixes the target at floor. A non-positive floor or a
// negative or NaN multiple leaves the respective default.
func WithBreakwaterTarget(floor time.Duration, multiple float64) BreakwaterOption {
	return func(c *breakwaterConfig) {
		if floor > 0 {
			c.targetFloor = floor
		}
		if multiple >= 0 && !math.IsInf(multiple, 1) {
			c.targetMultiple = multiple
		}
	}
}

// WithBreakwaterIncrease sets the additive increase A applied in a period
// whose delay stayed below target: max(fraction × pool, atLeast) credits.
// The defaults are 0.05 and 1. Negative or NaN values leave the defaults;
// if both end up zero the pool never grows.
func WithBreakwaterIncrease(fraction, atLeast float64) BreakwaterOption {
	return func(c *breakwaterConfig) {
		if fraction >= 0 && !math.IsInf(fraction, 1) {
			c.increase = fraction
		}
		if atLeast >= 0 && !math.IsInf(atLeast, 1) {
			c.increaseMin = atLeast
		}
	}
}

// WithBreakwaterDecrease sets β and βmax of the multiplicative decrease:
// credits *= max(1 − β·(d − t)/t, 1 − βmax). The defaults are 0.1 and 0.5.
// Values outside (0, 1] (β may exceed 1) leave the respective default.
func WithBreakwaterDecrease(beta, betaMax float64) BreakwaterOption {
	return func(c *breakwaterConfig) {
		if beta > 0 && !math.IsInf(beta, 1) {
			c.beta = beta
		}
		if betaMax > 0 && betaMax <= 1 {
			c.betaMax = betaMax
		}
	}
}

// WithBreakwaterCredits sets the initial size of the credit pool and its
// bounds (defaults 16, 1 and 10000). A minimum below 1 is raised to 1, a
// maximum below the minimum to the minimum, and the initial size is clamped
// into the bounds.
func WithBreakwaterCredits(initial, minimum, maximum int) BreakwaterOption {
	return func(c *breakwaterConfig) {
		c.initial, c.min, c.max = initial, minimum, maximum
	}
}

// Breakwater is the server side of Breakwater's credit-based admission
// control (Cho et al., OSDI 2020): a credit pool resized every control period
// by AIMD on the largest queueing delay observed against a target delay
// scaled to the service time. [Breakwater.Admit] admits while the requests
// admitted and not yet done are fewer than the credits. See the package
// documentation for the details and for what it does not do.
//
// A Breakwater is safe for concurrent use. Its zero value is not usable:
// create one with [NewBreakwater].
type Breakwater struct {
	cfg breakwaterConfig

	inflight  atomic.Int64 // admitted, not done
	limit     atomic.Int64 // ⌊pool⌋, within [min, max]
	periodEnd atomic.Int64 // time.Duration; math.MinInt64 before the first call

	// Observations of the current period.
	maxDelay atomic.Int64 // largest queueing delay; -1 if none
	svcSum   atomic.Int64 // sum of service times
	svcN     atomic.Int64 // number of service times

	mu      sync.Mutex // guards the fields below; taken once per period
	pool    float64
	mean    float64 // moving average of service times, ns
	hasMean bool
	target  atomic.Int64 // time.Duration; written under mu
}

// NewBreakwater returns a Breakwater with the defaults of the package
// documentation, changed by opts. Its first control period begins at the
// first call.
func NewBreakwater(opts ...BreakwaterOption) *Breakwater {
	cfg := breakwaterConfig{
		period:         DefaultBreakwaterPeriod,
		targetFloor:    DefaultBreakwaterTargetFloor,
		targetMultiple: DefaultBreakwaterTargetMultiple,
		increase:       DefaultBreakwaterIncrease,
		increaseMin:    DefaultBreakwaterIncreaseMin,
		beta:           DefaultBreakwaterBeta,
		betaMax:        DefaultBreakwaterBetaMax,
		initial:        DefaultBreakwaterCredits,
		min:            DefaultBreakwaterMinCredits,
		max:            DefaultBreakwaterMaxCredits,
	}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.min = max(cfg.min, 1)
	cfg.max = max(cfg.max, cfg.min)
	cfg.initial = min(max(cfg.initial, cfg.min), cfg.max)

	b := &Breakwater{cfg: cfg, pool: float64(cfg.initial)}
	b.limit.Store(int64(cfg.initial))
	b.periodEnd.Store(math.MinInt64)
	b.maxDelay.Store(-1)
	b.target.Store(int64(cfg.targetFloor))
	return b
}

// Name returns "breakwater".
func (b *Breakwater) Name() string { return "breakwater" }

// Admit reports whether a request arriving at now may enter: it takes one of
// the credits if the requests admitted and not yet done are fewer than the
// pool, and returns true; otherwise it returns false and changes nothing. An
// admitted request must be reported to Done when it finishes, whatever
// happened to it, or its credit is never returned.
func (b *Breakwater) Admit(now time.Duration) bool {
	b.tick(now)
	for {
		n := b.inflight.Load()
		if n >= b.limit.Load() {
			return false
		}
		if b.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Started records the queueing delay of a request that begins being served
// at now, and returns true: Breakwater never drops at dequeue time.
func (b *Breakwater) Started(now, queueDelay time.Duration) bool {
	b.tick(now)
	d := max(int64(queueDelay), 0)
	for {
		cur := b.maxDelay.Load()
		if d <= cur || b.maxDelay.CompareAndSwap(cur, d) {
			return true
		}
	}
}

// Done returns the credit of a request that finished at now after being
// served for service, and records the service time. A Done without a
// matching admitted request is ignored rather than creating a credit.
func (b *Breakwater) Done(now, service time.Duration) {
	b.tick(now)
	if service > 0 {
		b.svcSum.Add(int64(service))
		b.svcN.Add(1)
	}
	for {
		n := b.inflight.Load()
		if n <= 0 || b.inflight.CompareAndSwap(n, n-1) {
			return
		}
	}
}

// Credits returns the current size of the credit pool.
func (b *Breakwater) Credits() int { return int(b.limit.Load()) }

// InFlight returns the number of requests admitted and not yet done: the
// credits in use.
func (b *Breakwater) InFlight() int { return int(b.inflight.Load()) }

// Target returns the current target queueing delay.
func (b *Breakwater) Target() time.Duration { return time.Duration(b.target.Load()) }

// tick ends the current control period if now has reached its end.
func (b *Breakwater) tick(now time.Duration) {
	if int64(now) < b.periodEnd.Load() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	end := b.periodEnd.Load()
	if int64(now) < end {
		return // another call ended the period
	}
	if end != math.MinInt64 {
		b.updateLocked()
	}
	b.periodEnd.Store(int64(now + b.cfg.period))
}

// updateLocked applies the period's observations: the service time average,
// the target, then AIMD on the credit pool.
func (b *Breakwater) updateLocked() {
	if n := b.svcN.Swap(0); n > 0 {
		m := float64(b.svcSum.Swap(0)) / float64(n)
		if b.hasMean {
			b.mean += serviceWeight * (m - b.mean)
		} else {
			b.mean, b.hasMean = m, true
		}
	}
	target := float64(b.cfg.targetFloor)
	target = max(target, b.cfg.targetMultiple*b.mean)
	b.target.Store(int64(target))

	d := b.maxDelay.Swap(-1)
	switch {
	case d < 0:
		return // no request started: no evidence either way
	case float64(d) < target:
		b.pool += max(b.cfg.increase*b.pool, b.cfg.increaseMin)
	default:
		f := 1 - b.cfg.beta*(float64(d)-target)/target
		b.pool *= max(f, 1-b.cfg.betaMax)
	}
	b.pool = min(max(b.pool, float64(b.cfg.min)), float64(b.cfg.max))
	// The epsilon keeps a product that should be whole from truncating
	// to the credit below.
	b.limit.Store(int64(b.pool + 1e-9))
}
