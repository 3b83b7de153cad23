package baseline

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moirai-go/moirai/admit"
)

// randomConfig is DAGOR's detection, as Random runs it.
type randomConfig struct {
	window      time.Duration
	windowCount int64
	threshold   time.Duration
	alpha, beta float64
}

// Random is the random-shedding baseline of DAGOR's evaluation: the same
// overload detection as [admit.DAGOR] (average queueing time per window),
// but the admitted fraction, not a priority level, shrinks by α after an
// overloaded window and grows by β after a calm one; each request is
// admitted with that probability regardless of its priority.
type Random struct {
	cfg       randomConfig
	p         atomic.Uint64 // float64 bits of the admitted fraction
	windowEnd atomic.Int64
	count     atomic.Int64
	delay     atomic.Int64
	mu        sync.Mutex
}

// NewRandom returns a Random admitter with DAGOR's detection: a window
// closes after window or after windowCount started requests, whichever
// comes first, and is overloaded when their mean queueing time exceeds
// threshold. Values that are not positive take DAGOR's defaults
// ([admit.DefaultWindow], [admit.DefaultWindowCount],
// [admit.DefaultThreshold]); α and β are DAGOR's, so that the two differ
// only in what they shed.
func NewRandom(window time.Duration, windowCount int, threshold time.Duration) *Random {
	r := &Random{cfg: randomConfig{
		window: admit.DefaultWindow, windowCount: admit.DefaultWindowCount,
		threshold: admit.DefaultThreshold, alpha: admit.DefaultAlpha, beta: admit.DefaultBeta,
	}}
	if window > 0 {
		r.cfg.window = window
	}
	if windowCount > 0 {
		r.cfg.windowCount = int64(windowCount)
	}
	if threshold > 0 {
		r.cfg.threshold = threshold
	}
	r.p.Store(math.Float64bits(1))
	r.windowEnd.Store(int64(r.cfg.window))
	return r
}

// Name returns "random".
func (r *Random) Name() string { return "random" }

// Fraction returns the fraction of requests currently admitted.
func (r *Random) Fraction() float64 { return math.Float64frombits(r.p.Load()) }

// Admit admits the request with the current probability.
func (r *Random) Admit(now time.Duration) bool {
	if int64(now) >= r.windowEnd.Load() {
		r.closeWindow(now)
	}
	p := r.Fraction()
	return p >= 1 || rand.Float64() < p
}

// Started records the queueing delay; Random never drops at dequeue.
func (r *Random) Started(now, queueDelay time.Duration) bool {
	r.delay.Add(int64(queueDelay))
	if r.count.Add(1) >= r.cfg.windowCount || int64(now) >= r.windowEnd.Load() {
		r.closeWindow(now)
	}
	return true
}

// Done does nothing.
func (r *Random) Done(now, service time.Duration) {}

func (r *Random) closeWindow(now time.Duration) {
	if !r.mu.TryLock() {
		return
	}
	defer r.mu.Unlock()
	if r.count.Load() < r.cfg.windowCount && int64(now) < r.windowEnd.Load() {
		return
	}
	n, sum := r.count.Swap(0), r.delay.Swap(0)
	r.windowEnd.Store(int64(now + r.cfg.window))
	p := r.Fraction()
	if n > 0 && time.Duration(sum/n) > r.cfg.threshold {
		p *= 1 - r.cfg.alpha
	} else {
		p *= 1 + r.cfg.beta
	}
	p = min(max(p, 0.001), 1)
	r.p.Store(math.Float64bits(p))
}
