package moirai

import (
	"context"
	"log/slog"
	"time"

	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/internal/opt"
	"github.com/moirai-go/moirai/policy"
)

// Option configures a [Controller]. Options are applied in order by [New].
type Option func(*config)

type config struct {
	sloQuantile      float64
	sloTarget        time.Duration
	sloWindow        time.Duration
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
	decisionCtx      func(context.Context, policy.Record)
	traceID          func(context.Context) string
	traceOnly        bool
	penalties        bool
	earlyAction      bool
	preemptAfter     int
	durations        *estimate.Durations
	regularOverload  func(bool)
	logKeys          bool
}

// defaults is the one place every default lives.
func defaults() config {
	return config{
		sloQuantile:  0.99,
		sloTarget:    100 * time.Millisecond,
		sloWindow:    5 * time.Minute,
		logger:       slog.New(slog.DiscardHandler),
		resolution:   time.Millisecond,
		coarseTick:   20 * time.Millisecond,
		fineTick:     5 * time.Millisecond,
		logSize:      256,
		minCancelGap: 100 * time.Millisecond,
		hookTimeout:  time.Second,
		unendedGrace: 10 * time.Second,
		penalties:    true,
		earlyAction:  true,
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

// WithSLOWindow sets the window the objective of [WithSLO] holds over:
// "p99 ≤ 50 ms over 5 minutes" allows 1 % of a window's requests to miss,
// the error budget that maintenance which cannot otherwise run under the
// load is scheduled against (see [Retry]). Default 5 minutes. Values
// under a second are ignored.
func WithSLOWindow(d time.Duration) Option {
	return func(c *config) { opt.Set(&c.sloWindow, d, d >= time.Second) }
}

// WithLogger sends the controller's decisions and warnings to l. Default:
// discarded. Task keys (a tenant, a client: user data, which a request
// chooses) are written as "hidden", as the live page hides them, unless
// [WithLoggedKeys]; what the log carries otherwise is bounded by the
// service's own names (classes, resources, policies) and numbers.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { opt.Set(&c.logger, l, l != nil) }
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
		opt.Set(&c.coarseTick, coarse, coarse > 0)
		opt.Set(&c.fineTick, fine, fine > 0)
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
	return func(c *config) { opt.Set(&c.hookTimeout, d, d > 0) }
}

// WithUnendedGrace sets how long a task's context may be done without End
// before the task is reported as never ended and evicted from the
// registry (counted in Stats().Unended; a later End is accepted
// silently), so that a service that forgets End keeps a bounded registry.
// Default 10 s.
func WithUnendedGrace(d time.Duration) Option {
	return func(c *config) { opt.Set(&c.unendedGrace, d, d > 0) }
}

// WithEarlyAction turns early action (package trend) on or off in the
// default composition of [New]: on a capacity-bounded resource (a pool,
// a semaphore, a cache), a task whose share grows while the others'
// waits or misses rise is penalized or cancelled before the objective
// is missed. Default on. It has no effect when policies or detectors
// are configured ([WithPolicy], [WithDetector]) or with [WithoutMechanisms].
func WithEarlyAction(on bool) Option {
	return func(c *config) { c.earlyAction = on }
}

// WithPreemption makes the default composition of [New] cancel a
// recurring culprit's task as it takes the lock its class's tasks were
// cancelled for, before anyone waits: once after tasks of its class were
// cancelled holding the lock while others waited, none of them having
// ended on its own since, while others have waited for the lock within
// the last 10 s ([cancel.WithPreemption]). Its task would make others
// wait and be cancelled once they did; cancelled as it takes the lock, it
// has thrown nothing away and nobody waits. Default 0: off. It has no
// effect when policies or detectors are configured ([WithPolicy],
// [WithDetector]) or with [WithoutMechanisms]. Values under 0 are ignored.
func WithPreemption(after int) Option {
	return func(c *config) { opt.Set(&c.preemptAfter, after, after >= 0) }
}

// WithDryRun makes the controller run its mechanisms, record and log
// their decisions, and act on none of them (the outcome "dry-run"). To run
// no mechanism at all, see [WithoutMechanisms].
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

// WithDecisionObserverContext is [WithDecisionObserver] with the decided
// task's context: the context the task was begun from, which carries the
// request's values (its trace span, its logger's attributes), or
// context.Background() when the decision is on no live task. It is called
// with every decision record, after acting, from the controller's
// goroutine, outside its locks, and must not block. The task may have
// ended by then: code that must act while the task runs (annotate its
// span before it ends) reads [Controller.DecisionsOn] from the task's
// own goroutine instead.
func WithDecisionObserverContext(fn func(ctx context.Context, r policy.Record)) Option {
	return func(c *config) { c.decisionCtx = fn }
}

// WithTraceID sets how the controller reads the trace id of a decided
// task's request from the context the task was begun from: fn returns a
// W3C trace id, 32 lowercase hexadecimal digits not all zero (what
// go.opentelemetry.io/otel/trace's TraceID.String returns), or "" when
// the context carries none. The controller stores it in the decision's
// record (policy.Record.TraceID: the log, [Controller.Decisions], the
// live page), so that an operator goes from a decision to its trace.
// fn is called once per decision on a live task, from the controller's
// goroutine and outside its locks, just after the decision is recorded
// (the log's copy gains the id then); it must not block. A value that
// is not a W3C trace id is dropped. Default: none, records carry no trace
// id. The core imports no tracing library: package otelmoirai supplies
// fn for OpenTelemetry.
func WithTraceID(fn func(ctx context.Context) string) Option {
	return func(c *config) { c.traceID = fn }
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

// WithoutMechanisms makes the controller trace tasks and resources and
// keep its loop and snapshots, but run no mechanism: no default detector or
// policy is installed, and none given with [WithPolicy] or [WithDetector]
// runs, so there are no decisions. It is the "no control" configuration,
// to measure what tracing costs or to watch a service before letting
// moirai act. To see the decisions without their effect, use [WithDryRun].
func WithoutMechanisms() Option {
	return func(c *config) { c.traceOnly = true }
}

// WithTraceOnly is the former name of [WithoutMechanisms].
//
// Deprecated: use WithoutMechanisms; "trace only" read as a dry run.
func WithTraceOnly() Option { return WithoutMechanisms() }

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
	return func(c *config) { opt.Set(&c.durations, d, d != nil) }
}
