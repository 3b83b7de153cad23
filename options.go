package moirai

import (
	"log/slog"
	"time"

	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/policy"
)

// Option configures a [Controller]. Options are applied in order by [New].
type Option func(*config)

type config struct {
	sloQuantile      float64
	sloTarget        time.Duration
	logger           *slog.Logger
	resolution       time.Duration
	coarseTick       time.Duration
	fineTick         time.Duration
	policies         []policy.Policy
	detectors        []policy.Detector
	logSize          int
	minCancelGap     time.Duration
	hookTimeout      time.Duration
	unendedGrace     time.Duration
	dryRun           bool
	onError          func(error)
	decisionObserver func(policy.Record)
	traceOnly        bool
	penalties        bool
	durations        *estimate.Durations
	regularOverload  func(bool)
	logKeys          bool
}

// defaults is the one place every default lives.
func defaults() config {
	return config{
		sloQuantile:  0.99,
		sloTarget:    100 * time.Millisecond,
		logger:       slog.New(slog.DiscardHandler),
		resolution:   time.Millisecond,
		coarseTick:   20 * time.Millisecond,
		fineTick:     5 * time.Millisecond,
		logSize:      256,
		minCancelGap: 100 * time.Millisecond,
		hookTimeout:  time.Second,
		unendedGrace: 10 * time.Second,
		penalties:    true,
	}
}

// WithSLO sets the latency objective: the q-quantile of request latency
// should stay at or below target. Detectors read it. Default: p99 ≤ 100 ms.
// Values outside 0 < q < 1 or a target ≤ 0 are ignored.
func WithSLO(q float64, target time.Duration) Option {
	return func(c *config) {
		if q > 0 && q < 1 && target > 0 {
			c.sloQuantile, c.sloTarget = q, target
		}
	}
}

// WithLogger sends the controller's decisions and warnings to l. Default:
// discarded. Task keys (a tenant, a client: user data, which a request
// chooses) are written as "hidden", as the live page hides them, unless
// [WithLoggedKeys]; what the log carries otherwise is bounded by the
// service's own names (classes, resources, policies) and numbers.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithLoggedKeys makes the log ([WithLogger]) carry task keys as they
// are. Turn it on only where the log may hold the service's user data.
// The decision observer ([WithDecisionObserver]) and [Controller.Decisions]
// always get the keys: they are the application's own code.
func WithLoggedKeys() Option { return func(c *config) { c.logKeys = true } }

// hiddenKey is what the log writes for a task's key without WithLoggedKeys.
const hiddenKey = "hidden"

// logKey is key as the log writes it.
func (c *Controller) logKey(key string) string {
	if key == "" || c.cfg.logKeys {
		return key
	}
	return hiddenKey
}

// logAttrs is r as the log writes it.
func (c *Controller) logAttrs(r policy.Record) []slog.Attr {
	r.TaskKey = c.logKey(r.TaskKey)
	return r.Attrs()
}

// WithClockResolution sets how often the coarse clock the hot path reads is
// advanced. Default 1 ms. Values below 100 µs are raised to 100 µs.
func WithClockResolution(d time.Duration) Option {
	return func(c *config) { c.resolution = max(d, 100*time.Microsecond) }
}

// WithTick sets the controller loop's period while healthy (coarse) and
// while a detector fires (fine). Defaults 20 ms and 5 ms: a culprit that
// blocks a lock is noticed within a coarse tick, and one step costs about
// 20 µs for 200 live tasks (0.1 % of a CPU at 20 ms; see BenchmarkStep);
// services with tens of thousands of live tasks may want a longer coarse
// tick. Zero leaves a value unchanged; fine is capped at coarse.
func WithTick(coarse, fine time.Duration) Option {
	return func(c *config) {
		if coarse > 0 {
			c.coarseTick = coarse
		}
		if fine > 0 {
			c.fineTick = fine
		}
		c.fineTick = min(c.fineTick, c.coarseTick)
	}
}

// WithPolicy adds policies. With no detector configured they run on every
// tick; otherwise only while a detector fires. Configuring any policy or
// detector replaces the default mechanisms (see [New]).
func WithPolicy(p ...policy.Policy) Option {
	return func(c *config) { c.policies = append(c.policies, p...) }
}

// WithDetector adds detectors. Configuring any policy or detector replaces
// the default mechanisms (see [New]).
func WithDetector(d ...policy.Detector) Option {
	return func(c *config) { c.detectors = append(c.detectors, d...) }
}

// WithDecisionLog sets how many recent decisions [Controller.Decisions]
// keeps. Default 256; at least 1.
func WithDecisionLog(n int) Option {
	return func(c *config) { c.logSize = max(n, 1) }
}

// WithMinCancelInterval sets the least time between two cancellations.
// Default 100 ms.
func WithMinCancelInterval(d time.Duration) Option {
	return func(c *config) { c.minCancelGap = max(d, 0) }
}

// WithHookTimeout sets how long a cancel hook may run before it is
// reported as blocked. Default 1 s.
func WithHookTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.hookTimeout = d
		}
	}
}

// WithUnendedGrace sets how long a task's context may be done without End
// before the task is reported as never ended and evicted from the
// registry (counted in Stats().Unended; a later End is accepted
// silently), so that a service that forgets End keeps a bounded registry.
// Default 10 s.
func WithUnendedGrace(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.unendedGrace = d
		}
	}
}

// WithDryRun makes the controller record and log decisions without acting
// on them.
func WithDryRun(on bool) Option {
	return func(c *config) { c.dryRun = on }
}

// WithErrorHandler receives every error the runtime recovers from (invalid
// specs, panicking hooks or policies, tasks never ended), in addition to the
// logger's warning. It must not block.
func WithErrorHandler(fn func(error)) Option {
	return func(c *config) { c.onError = fn }
}

// WithDecisionObserver is called with every decision record, after acting,
// from the controller's goroutine. It must not block.
func WithDecisionObserver(fn func(policy.Record)) Option {
	return func(c *config) { c.decisionObserver = fn }
}

// WithPenalties turns pBox's penalties (package penalty) on or off in the
// default configuration; they are on by default, beside targeted
// cancellation. They act on interference below overload: a noisy stream
// of requests (a report run again and again, a bulk client) that keeps a
// shared resource busy while others wait; see docs/PENALTIES.md for what
// they do on the evaluation cases. It has no effect when mechanisms are
// configured with [WithPolicy] or [WithDetector]: add a penalty.Policy
// there.
func WithPenalties(on bool) Option {
	return func(c *config) { c.penalties = on }
}

// WithTraceOnly makes the controller trace tasks and resources and keep
// its loop and snapshots, but run no mechanism: no default detector or
// policy is installed, and none given with [WithPolicy] or [WithDetector]
// runs. It is the "no control" configuration, to measure what tracing
// costs or to watch a service before letting moirai act.
func WithTraceOnly() Option {
	return func(c *config) { c.traceOnly = true }
}

// WithRegularOverload is called with true when the controller sees
// overload that is not resource overload (a detector fires, but no policy
// that can confirm a contended resource does), and with false when that
// ends: the signal to hand to admission control. It is called from the
// controller's goroutine, outside its locks, and must not block.
func WithRegularOverload(fn func(overloaded bool)) Option {
	return func(c *config) { c.regularOverload = fn }
}

// WithDurations makes the controller feed d, on every step, with the
// durations of the tasks that finish, per class, and estimate from it the
// expected durations [Retry] needs. Pass the same d to the policies and
// detectors that estimate progress from it (cancel.WithDurations,
// detect.WithPrediction). Default: a learner of the controller's own, which
// the default mechanisms share.
func WithDurations(d *estimate.Durations) Option {
	return func(c *config) {
		if d != nil {
			c.durations = d
		}
	}
}
