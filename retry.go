package moirai

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/moirai-go/moirai/internal/mwx"
	"github.com/moirai-go/moirai/internal/opt"
	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/task"
	"github.com/moirai-go/moirai/tree"
)

// RetryOption configures [Retry].
type RetryOption func(*retryConfig)

type retryConfig struct {
	quiet      time.Duration
	maxWait    time.Duration
	maxWaitSet bool // RetryMaxWait given: the explicit bound, in place of the objective
	within     time.Duration
	notify     func(waited time.Duration)
}

func retryDefaults() retryConfig {
	return retryConfig{quiet: 250 * time.Millisecond, maxWait: 30 * time.Second}
}

// RetryQuiet sets how long every resource the cancelled run used must have
// been free (no task waiting for it or holding it; for memory, no
// eviction) before the run is re-executed. Default 250 ms. Negative values
// are ignored.
func RetryQuiet(d time.Duration) RetryOption {
	return func(c *retryConfig) { opt.Set(&c.quiet, d, d >= 0) }
}

// RetryMaxWait bounds the wait for the resources to be free; a run that
// waited that long is dropped. Default 30 s. Given explicitly, it is the
// bound of a request's wait in place of its objective (see [Retry]).
// Non-positive values are ignored.
func RetryMaxWait(d time.Duration) RetryOption {
	return func(c *retryConfig) {
		if d > 0 {
			c.maxWait, c.maxWaitSet = d, true
		}
	}
}

// RetryWithin sets a request's latency objective, counted from the start of
// its first run: a re-execution that cannot be expected to finish within
// it is not started, and the request is dropped. The context's deadline,
// when earlier, counts too. Default: the request's objective
// (Spec.Objective, or the controller's, see [WithSLO]), unless
// [RetryMaxWait] is given; none for a request of [NoObjective] and for
// background tasks.
func RetryWithin(d time.Duration) RetryOption {
	return func(c *retryConfig) { opt.Set(&c.within, d, d > 0) }
}

// RetryNotify calls fn just before the re-execution starts, with the time
// since the first run began: for metrics and traces. fn must not block; a
// panic in it is recovered and reported.
func RetryNotify(fn func(since time.Duration)) RetryOption {
	return func(c *retryConfig) { c.notify = fn }
}

// RetryStats counts what [Retry] did.
type RetryStats struct {
	Cancelled   uint64 // first runs cancelled by the controller
	Reexecuted  uint64 // of which re-executed (admitted)
	Completed   uint64 // of which the re-execution returned no error
	Dropped     uint64 // of which dropped: objective out of reach, or no window in the bounded wait
	Interrupted uint64 // of which given up because the caller's context ended
	// Waiting is the re-executions waiting for a window now.
	Waiting int
	// Capped counts the first runs that waited behind their class's cap
	// while a cancelled run of the class was pending.
	Capped uint64
	// Budgeted counts the re-executions admitted on the objective's error
	// budget: their hold did not fit the load, its harm fit the budget
	// (see [WithSLOWindow]).
	Budgeted uint64
	// OverBudget counts the re-executions dropped because their hold
	// could never fit the error budget while the load lasted (among
	// Dropped).
	OverBudget uint64
}

// RetryStats returns what [Retry] did on this controller so far.
func (c *Controller) RetryStats() RetryStats {
	c.gmu.Lock()
	defer c.gmu.Unlock()
	return c.retries
}

// ErrDropped is wrapped, with [ErrCancelled], by the error of [Retry] when
// the controller cancelled a run and it was not re-executed.
var ErrDropped = errors.New("moirai: cancelled and not re-executed")

// Retry runs fn as a task described by spec and, when the controller
// cancels it and fn gives up (fn's context is cancelled with cause
// [ErrCancelled] and fn returns an error that wraps the cancellation:
// [ErrCancelled] or context.Canceled, as context.Cause and ctx.Err of its
// context do), re-executes it once, as Atropos does, so the work is not
// lost — but only when running it again does not re-create the overload
// and the caller can still use its result:
//
//   - The re-execution is admitted when its class's predicted demand (the
//     units the cancelled run held, for about the class's mean learned
//     duration, or twice the first run's) fits the spare capacity of every
//     resource the cancelled run used and no detector fires (see the
//     admission rules in reexec.go's documentation: a queue's moving
//     demand plus the units within its capacity; a lock free, and either
//     a hold short against the objective or the lock unused for
//     [RetryQuiet]). It then runs as a task that is not cancellable.
//   - Meanwhile the class is capped: first runs of it through Retry beyond
//     the concurrency that was running less one wait for a slot.
//   - A request's wait is bounded by its objective: a re-execution that
//     cannot be expected to end within it, counted from the first run's
//     start ([RetryWithin]; by default the spec's Objective, or the
//     controller's when 0), or within the context's deadline, is not
//     started. An explicit [RetryMaxWait] bounds the wait instead of the
//     objective. A background task (or a request of [NoObjective]) waits
//     at most RetryMaxWait, 30 s by default.
//   - When no window comes within that bound, the run is dropped: Retry
//     returns an error wrapping [ErrCancelled], [ErrDropped] and
//     [ErrNoWindow] that says why. [Controller.ExpectedWait] of the class
//     is then the truthful time to come back (httpmw's Retry-After).
//   - A run whose hold of a lock cannot fit while the load lasts is
//     admitted when the objective's error budget over its window
//     ([WithSLOWindow]) can absorb the requests it will delay, stopped at
//     the longest hold the budget absorbs, and dropped with an error that
//     says what would make it fit when it can never fit (see budget.go).
//   - A class whose hold of a lock exceeds the objective while others use
//     the lock is reported once, with the advice to split its work.
//
// A run that completed is never run again: fn returning nil, or an error
// of its own (not the cancellation's), keeps its result, whatever
// happened to its context. Calling Retry says that fn is safe to run
// twice once it gave up: a re-executed fn starts from scratch (undo what
// the cancelled run did, as a cancelled transaction rolls back); for an
// HTTP request, httpmw decides it from the method (see
// httpmw.WithReexecution). A run cancelled because its request tree was a culprit at another
// service (its cause wraps a tree.Culprit, see [Controller.CancelTree])
// first waits the wait that service expects, then for the window above.
// Retry returns fn's error; a wait ended by ctx returns the
// context's cause. Retry never re-executes runs that fail for other
// reasons, nor runs spec.Cancellable left uncancellable.
func Retry(ctx context.Context, c *Controller, spec Spec, fn func(ctx context.Context) error, opts ...RetryOption) error {
	return c.retry(ctx, nil, spec, fn, opts)
}

func init() {
	mwx.RetryOn = func(ctl any, t *task.Task, fn func(context.Context) error, opts []any) error {
		c := ctl.(*Controller)
		ro := make([]RetryOption, 0, len(opts))
		for _, o := range opts {
			ro = append(ro, o.(RetryOption))
		}
		return c.retry(taskx.Parent(t), t, t.Spec(), fn, ro)
	}
}

// retry is Retry; with outer non-nil, the first run is outer itself (the
// task an outer layer of middleware began for the request, refined to
// spec), which retry neither begins nor ends, and ctx is the context
// outer was begun from.
func (c *Controller) retry(ctx context.Context, outer *Task, spec Spec, fn func(ctx context.Context) error, opts []RetryOption) error {
	cfg := retryDefaults()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	start := time.Now()
	g, err := c.enterFirst(ctx, spec.Class, cfg.maxWait)
	if err != nil {
		return err
	}
	first, err := c.firstRun(ctx, outer, spec, fn, g)
	if first == nil {
		return err
	}
	reexecuted := false
	defer func() {
		c.gmu.Lock()
		if !reexecuted {
			c.retries.Waiting--
		}
		c.leaveLocked(spec.Class, g, true)
		c.gmu.Unlock()
	}()
	c.mu.Lock()
	expected, ok := c.durations.Mean(spec.Class)
	c.mu.Unlock()
	if !ok || expected <= 0 {
		expected = 2 * time.Since(start)
	}
	latest := c.latestStart(ctx, spec, &cfg, start, expected)
	if !latest.IsZero() && !time.Now().Before(latest) {
		return c.dropRetry(spec, "its objective can no longer be met")
	}
	promised, drop, err := c.awaitWindow(ctx, spec.Class, first, expected, &cfg, latest)
	switch {
	case err != nil:
		return err
	case drop != "":
		return c.dropRetry(spec, drop)
	}
	c.gmu.Lock()
	if promised.victims > 0 {
		c.retries.Budgeted++
	}
	c.retries.Reexecuted++
	c.retries.Waiting--
	reexecuted = true
	c.gmu.Unlock()
	c.log.LogAttrs(context.Background(), slog.LevelInfo, "moirai re-execution",
		slog.String("class", spec.Class), slog.String("key", c.logKey(spec.Key)),
		slog.Duration("after", time.Since(start)))
	if cfg.notify != nil {
		c.callUser("retry notifier", func() { cfg.notify(time.Since(start)) })
	}
	return c.reexecute(ctx, spec, fn, first, promised, start)
}

// cancelledRun is what a first run the controller cancelled leaves to its
// re-execution: its task, the resources it used (with the units it held
// when cancelled) and, when its tree was cancelled as a culprit elsewhere,
// that hop's answer.
type cancelledRun struct {
	t       *Task
	used    []usedRes
	culprit *tree.Culprit
}

// firstRun runs fn once as the task of spec (or as outer's, which it does
// not end) in the class's group g. It returns nil and fn's error when the
// run was not cancelled by the controller, and otherwise what the
// re-execution needs, having capped the class at the concurrency that
// overloaded, less one, until its re-executions are over.
func (c *Controller) firstRun(ctx context.Context, outer *Task, spec Spec, fn func(ctx context.Context) error, g *classGate) (*cancelledRun, error) {
	var tctx context.Context
	var t *Task
	if outer != nil {
		tctx, t = outer.Context(), outer
	} else {
		tctx, t = c.Begin(ctx, spec)
	}
	err := c.runUser(tctx, fn)
	cancelled := gaveUp(err) && t.Cancelled() && errors.Is(context.Cause(tctx), ErrCancelled)
	var run *cancelledRun
	if cancelled {
		// A tree cancelled as a culprit elsewhere waits first for the
		// wait the deciding hop expects: its own resources may be free
		// already.
		culprit, _ := tree.Of(context.Cause(tctx))
		run = &cancelledRun{t: t, culprit: culprit}
		// What it held when cancelled (it has released it by now), and
		// every resource it used.
		c.mu.Lock()
		run.used = c.heldAtCancelLocked(t.ID())
		c.mu.Unlock()
		taskx.EachUsage(t, c.clock.Now(), func(u task.Usage) {
			if !slices.ContainsFunc(run.used, func(x usedRes) bool { return x.id == u.Resource }) {
				run.used = append(run.used, usedRes{u.Resource, 0})
			}
		})
	}
	if outer == nil {
		t.End(err)
	}
	c.gmu.Lock()
	if cancelled {
		limit := max(g.running-1, 1)
		if g.limit <= 0 || limit < g.limit {
			g.limit = limit
		}
		g.pending++
		g.running++ // the pending re-execution holds its place
		c.retries.Cancelled++
		c.retries.Waiting++
	}
	c.leaveLocked(spec.Class, g, false)
	c.gmu.Unlock()
	return run, err
}

// latestStart is the latest start of a re-execution of a request that can
// still meet its objective (zero for none): the objective (cfg.within, by
// default the spec's, else the controller's, unless an explicit maximum
// wait bounds it instead) from the first run's start, or the context's
// deadline, less the expected run.
func (c *Controller) latestStart(ctx context.Context, spec Spec, cfg *retryConfig, start time.Time, expected time.Duration) time.Time {
	var latest time.Time
	if spec.Kind != task.Request {
		return latest
	}
	if cfg.within <= 0 && !cfg.maxWaitSet {
		switch {
		case spec.Objective > 0:
			cfg.within = spec.Objective
		case spec.Objective == 0:
			cfg.within = c.cfg.sloTarget
		}
	}
	if cfg.within > 0 {
		latest = start.Add(cfg.within - expected)
	}
	if dl, has := ctx.Deadline(); has && (latest.IsZero() || dl.Add(-expected).Before(latest)) {
		latest = dl.Add(-expected)
	}
	return latest
}

// awaitWindow waits for the window in which the cancelled run may run
// again: after the hold-off a culprit answer asks for, when its class's
// expected hold fits what its resources have spare, or the error budget
// absorbs it. It returns the harm promised to the budget; why no window
// comes, when none does; or the context's error when the caller gave up.
func (c *Controller) awaitWindow(ctx context.Context, class string, run *cancelledRun, expected time.Duration, cfg *retryConfig, latest time.Time) (promised harm, drop string, err error) {
	if cu := run.culprit; cu != nil && cu.Wait > 0 {
		if why, werr := c.holdOff(ctx, cu, *cfg, latest); werr != nil || why != "" {
			if werr != nil {
				c.gmu.Lock()
				c.retries.Interrupted++
				c.gmu.Unlock()
				return harm{}, "", werr
			}
			return harm{}, why, nil
		}
		cfg.maxWait = max(cfg.maxWait-cu.Wait, time.Millisecond)
	}
	c.mu.Lock()
	expected = c.holdOfLocked(class, expected)
	c.mu.Unlock()
	reason, promised, over, werr := c.waitWindow(ctx, class, run.used, expected, *cfg, latest)
	switch {
	case werr != nil:
		c.gmu.Lock()
		c.retries.Interrupted++
		c.gmu.Unlock()
		return harm{}, "", werr
	case reason != "":
		if over {
			c.gmu.Lock()
			c.retries.OverBudget++
			c.gmu.Unlock()
		}
		return harm{}, reason, nil
	}
	return promised, "", nil
}

// reexecute runs fn again as a task of spec that is not cancellable, from a
// context naming the run it replaces. A run admitted on the error budget
// (promised.victims > 0) is stopped at the longest hold the budget
// absorbs: its class's hold was a guess; stopped so, it is dropped with the
// advice of what would make it fit.
func (c *Controller) reexecute(ctx context.Context, spec Spec, fn func(ctx context.Context) error, first *cancelledRun, promised harm, start time.Time) error {
	runCtx := ctx
	var overBudget error
	if promised.victims > 0 {
		var stop context.CancelCauseFunc
		runCtx, stop = context.WithCancelCause(ctx)
		overBudget = fmt.Errorf("%w: held %s past the %v the error budget absorbs", ErrCancelled, promised.res, promised.limit.Round(time.Millisecond))
		timer := time.AfterFunc(promised.limit, func() { stop(overBudget) })
		defer func() {
			timer.Stop()
			stop(nil)
			c.mu.Lock()
			c.releaseLocked(promised.victims)
			c.mu.Unlock()
		}()
	}
	spec.Cancellable = false
	rctx := context.WithValue(runCtx, reexecKey{}, &Reexecution{Replaces: first.t.ID(), Began: taskx.Parent(first.t), FirstRun: start})
	tctx, t := c.Begin(rctx, spec)
	err := c.runUser(tctx, fn)
	t.End(err)
	c.mu.Lock()
	c.reserveLocked(first.used, -1)
	stopped := err != nil && overBudget != nil && context.Cause(runCtx) == overBudget
	var diag *policy.Record
	var why string
	if stopped {
		c.noteHoldAtLeastLocked(spec.Class, promised.limit)
		// Its harm at the limit, as the budget saw it when it admitted it.
		h := promised
		h.victims = promised.left
		why = c.budgetAdviceLocked(spec.Class, h, fmt.Sprintf("more than %v (it was stopped there, not done)", promised.limit.Round(time.Millisecond)), promised.allowed, promised.left)
		diag = c.overBudgetLocked(spec.Class, why)
	}
	c.mu.Unlock()
	if stopped {
		c.publishDiagnosis(diag)
		c.gmu.Lock()
		c.retries.OverBudget++
		c.gmu.Unlock()
		return c.dropRetry(spec, "its run on the error budget was stopped: "+why)
	}
	if err == nil {
		c.gmu.Lock()
		c.retries.Completed++
		c.gmu.Unlock()
	}
	return err
}

// gaveUp reports whether a run that returned err gave up because of its
// cancellation, rather than completing (nil) or failing on its own.
func gaveUp(err error) bool {
	return err != nil && (errors.Is(err, ErrCancelled) || errors.Is(err, context.Canceled))
}

// holdOff waits the wait a culprit answer named, the re-execution's first
// gate: it returns why not when the wait goes past cfg.maxWait or latest,
// or ctx's cause.
func (c *Controller) holdOff(ctx context.Context, cu *tree.Culprit, cfg retryConfig, latest time.Time) (string, error) {
	until := time.Now().Add(cu.Wait)
	switch {
	case cu.Wait > cfg.maxWait:
		return fmt.Sprintf("%s expects a wait of %v, past the bounded wait %v", cu.Hop, cu.Wait, cfg.maxWait), nil
	case !latest.IsZero() && until.After(latest):
		return fmt.Sprintf("%s expects a wait of %v, past its objective", cu.Hop, cu.Wait), nil
	}
	timer := time.NewTimer(cu.Wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return "", nil
	case <-ctx.Done():
		return "", context.Cause(ctx)
	case <-c.done:
		return "controller closed", nil
	}
}

// runUser runs fn, turning a panic into an error: the task is ended either
// way, so a panicking handler does not leak it.
func (c *Controller) runUser(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("moirai: retried function panicked: %v", v)
			c.report(err)
		}
	}()
	return fn(ctx)
}

func (c *Controller) dropRetry(spec Spec, why string) error {
	c.gmu.Lock()
	c.retries.Dropped++
	c.gmu.Unlock()
	c.log.LogAttrs(context.Background(), slog.LevelInfo, "moirai drop",
		slog.String("class", spec.Class), slog.String("key", c.logKey(spec.Key)), slog.String("reason", why))
	return fmt.Errorf("%w: %w: %w: %s", ErrCancelled, ErrDropped, ErrNoWindow, why)
}
