package moirai

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/moirai-go/moirai/task"
)

// RetryOption configures [Retry].
type RetryOption func(*retryConfig)

type retryConfig struct {
	quiet   time.Duration
	maxWait time.Duration
	within  time.Duration
	notify  func(waited time.Duration)
}

func retryDefaults() retryConfig {
	return retryConfig{quiet: 250 * time.Millisecond, maxWait: 30 * time.Second}
}

// RetryQuiet sets how long every resource the cancelled run used must have
// been free (no task waiting for it or holding it; for memory, no
// eviction) before the run is re-executed. Default 250 ms. Negative values
// are ignored.
func RetryQuiet(d time.Duration) RetryOption {
	return func(c *retryConfig) {
		if d >= 0 {
			c.quiet = d
		}
	}
}

// RetryMaxWait bounds the wait for the resources to be free. A request
// (Spec.Kind Request) that waited that long is dropped; a background task
// is re-executed anyway. Default 30 s. Non-positive values are ignored.
func RetryMaxWait(d time.Duration) RetryOption {
	return func(c *retryConfig) {
		if d > 0 {
			c.maxWait = d
		}
	}
}

// RetryWithin sets a request's latency objective, counted from the start of
// its first run: a re-execution that cannot be expected to finish within
// it is not started, and the request is dropped. The context's deadline,
// when earlier, counts too. Default: none but the context's deadline.
func RetryWithin(d time.Duration) RetryOption {
	return func(c *retryConfig) {
		if d > 0 {
			c.within = d
		}
	}
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
	Reexecuted  uint64 // of which re-executed
	Completed   uint64 // of which the re-execution returned no error
	Dropped     uint64 // of which dropped: objective out of reach or wait too long
	Interrupted uint64 // of which given up because the caller's context ended
}

// RetryStats returns what [Retry] did on this controller so far.
func (c *Controller) RetryStats() RetryStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.retries
}

// ErrDropped is wrapped, with [ErrCancelled], by the error of [Retry] when
// the controller cancelled a run and it was not re-executed.
var ErrDropped = errors.New("moirai: cancelled and not re-executed")

// Retry runs fn as a task described by spec and, when the controller
// cancels it (fn's context is cancelled with cause [ErrCancelled] and fn
// returns an error), re-executes it once, as Atropos does, so the work is
// not lost:
//
//   - It waits until every resource the cancelled run used has been free
//     for a while (see [RetryQuiet]) and no detector fires, then runs fn
//     again as a task that is not cancellable.
//   - A request (Spec.Kind Request) is dropped instead when it cannot be
//     expected to finish within its objective (the context's deadline and
//     [RetryWithin]) or waited [RetryMaxWait]; the expected duration is its
//     class's mean learned duration, or else twice the first run's. A
//     background task is re-executed after RetryMaxWait even if the
//     resources are still busy.
//
// fn must be safe to run twice: a re-executed handler starts from scratch
// (undo what the cancelled run did, as a cancelled transaction rolls
// back). Retry returns fn's error; a dropped run's error wraps
// [ErrCancelled] and [ErrDropped]; a wait ended by ctx returns the
// context's cause. Retry never re-executes runs that fail for other
// reasons, nor runs spec.Cancellable left uncancellable.
func Retry(ctx context.Context, c *Controller, spec Spec, fn func(ctx context.Context) error, opts ...RetryOption) error {
	cfg := retryDefaults()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	start := time.Now()
	tctx, t := c.Begin(ctx, spec)
	err := c.runUser(tctx, fn)
	cancelled := err != nil && t.Cancelled() && errors.Is(context.Cause(tctx), ErrCancelled)
	var used []task.ResourceID
	if cancelled {
		t.EachUsage(c.clock.Now(), func(u task.Usage) { used = append(used, u.Resource) })
	}
	t.End(err)
	if !cancelled {
		return err
	}
	first := time.Since(start)
	c.mu.Lock()
	c.retries.Cancelled++
	expected, ok := c.durations.Mean(spec.Class)
	c.mu.Unlock()
	if !ok || expected <= 0 {
		expected = 2 * first
	}

	// The latest start that can still meet the objective, for requests.
	var latest time.Time
	if spec.Kind == task.Request {
		if cfg.within > 0 {
			latest = start.Add(cfg.within - expected)
		}
		if dl, has := ctx.Deadline(); has && (latest.IsZero() || dl.Add(-expected).Before(latest)) {
			latest = dl.Add(-expected)
		}
		if !latest.IsZero() && !time.Now().Before(latest) {
			return c.dropRetry(spec, "its objective can no longer be met")
		}
	}
	reason, werr := c.waitFree(ctx, used, cfg, latest)
	switch {
	case werr != nil:
		c.mu.Lock()
		c.retries.Interrupted++
		c.mu.Unlock()
		return werr
	case reason != "" && spec.Kind == task.Request:
		return c.dropRetry(spec, reason)
	}
	c.mu.Lock()
	c.retries.Reexecuted++
	c.mu.Unlock()
	c.log.LogAttrs(context.Background(), slog.LevelInfo, "moirai re-execution",
		slog.String("class", spec.Class), slog.String("key", spec.Key),
		slog.Duration("after", time.Since(start)), slog.String("note", reason))
	if cfg.notify != nil {
		c.callUser("retry notifier", func() { cfg.notify(time.Since(start)) })
	}
	spec.Cancellable = false
	tctx, t = c.Begin(ctx, spec)
	err = c.runUser(tctx, fn)
	t.End(err)
	if err == nil {
		c.mu.Lock()
		c.retries.Completed++
		c.mu.Unlock()
	}
	return err
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
	c.mu.Lock()
	c.retries.Dropped++
	c.mu.Unlock()
	c.log.LogAttrs(context.Background(), slog.LevelInfo, "moirai drop",
		slog.String("class", spec.Class), slog.String("key", spec.Key), slog.String("reason", why))
	return fmt.Errorf("%w: %w: %s", ErrCancelled, ErrDropped, why)
}

// waitFree waits until the resources used have been free for cfg.quiet and
// no detector fires. It returns "" when they are, a reason when the wait
// timed out (cfg.maxWait, or latest for a request), or ctx's cause.
func (c *Controller) waitFree(ctx context.Context, used []task.ResourceID, cfg retryConfig, latest time.Time) (string, error) {
	deadline := time.Now().Add(cfg.maxWait)
	why := fmt.Sprintf("resources still busy after %v", cfg.maxWait)
	if !latest.IsZero() && latest.Before(deadline) {
		deadline, why = latest, "its objective can no longer be met"
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		c.mu.Lock()
		free := c.freeLocked(used, cfg.quiet)
		stepped := c.stepped
		c.mu.Unlock()
		if free {
			return "", nil
		}
		select {
		case <-stepped:
		case <-timer.C:
			return why, nil
		case <-ctx.Done():
			return "", context.Cause(ctx)
		case <-c.done:
			// The loop stopped: nothing will observe the resources again.
			return "controller closed", nil
		}
	}
}

// freeLocked reports whether no detector fires and each resource in ids
// has been free for quiet, as of the last step.
func (c *Controller) freeLocked(ids []task.ResourceID, quiet time.Duration) bool {
	if c.firing || c.steps == 0 {
		return false
	}
	now := int64(c.snap.At)
	for _, id := range ids {
		i := int(id) - 1
		if i < 0 || i >= len(c.busyAt) {
			continue
		}
		if time.Duration(now-c.busyAt[i]) < quiet {
			return false
		}
	}
	return true
}
