package moirai

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/task"
)

// actLocked carries out one decision after the safety checks: only live,
// cancellable tasks not cancelled before, and no sooner than the minimum
// interval after the previous cancellation (manual cancellations excepted).
// It records the decision in the log, and returns its record and the
// context the task was begun from (nil when the task is not live). A
// cancelled task's context's cause wraps because, when non-nil, beside
// ErrCancelled.
func (c *Controller) actLocked(d policy.Decision, manual bool, because error) (policy.Record, context.Context) {
	now := c.clock.Now()
	c.seq++
	rec := policy.Record{Seq: c.seq, Time: c.clock.Time(now), Decision: d}
	t := c.tasks.Lookup(d.Task)
	var ctx context.Context
	if t != nil {
		sp := t.Spec()
		rec.TaskKey, rec.TaskClass = sp.Key, sp.Class
		ctx = taskx.Parent(t)
	}
	var refusal string
	if d.Action == policy.Cancel {
		refusal = c.refusalLocked(t, manual, now)
	}
	switch {
	case d.Action == policy.Penalize:
		c.penalizeLocked(t, d, &rec)
	case d.Action == policy.Diagnose:
		// A finding about a class: recorded and logged, nothing done.
		rec.Outcome, rec.TaskClass = policy.Acted, d.Class
	case d.Action != policy.Cancel:
		rec.Outcome, rec.Note = policy.Skipped, "unknown action "+d.Action.String()
	case refusal != "":
		rec.Outcome, rec.Note = policy.Skipped, refusal
	case c.cfg.dryRun:
		rec.Outcome, rec.Note = policy.DryRun, "dry run: not cancelled"
	default:
		lost := c.spentLocked(t, now)
		if err := taskx.CancelBecause(t, d.Reason, because); err != nil {
			rec.Outcome, rec.Note = policy.Skipped, err.Error()
		} else {
			rec.Outcome = policy.Acted
			c.lastCancel = max(now, 1)
			rec.Lost = lost
			// Whoever decided it, a cancelled task did not run its
			// class's course: not a duration to learn, even when it ends
			// before a snapshot shows it cancelled.
			c.durations.Skip(d.Task)
		}
	}
	c.ring[(c.seq-1)%uint64(len(c.ring))] = rec
	c.ringLen = min(c.ringLen+1, len(c.ring))
	return rec, ctx
}

// refusalLocked returns why the safety rules refuse to cancel task t at
// time now ("" when they let it be cancelled): a task that is not live,
// not cancellable or cancelled already, or, unless the cancellation is
// the application's own (manual), one within the minimum interval after
// the last cancellation.
func (c *Controller) refusalLocked(t *task.Task, manual bool, now int64) string {
	switch {
	case t == nil:
		return "task is not live"
	case !t.Spec().Cancellable:
		return "task is not cancellable"
	case t.Cancelled():
		return "task was already cancelled"
	case !manual && c.lastCancel != 0 && time.Duration(now-c.lastCancel) < c.cfg.minCancelGap:
		return fmt.Sprintf("previous cancellation %v ago, minimum interval %v", time.Duration(now-c.lastCancel), c.cfg.minCancelGap)
	}
	return ""
}

// penalizeLocked carries out a Penalize decision. The precedence with
// cancellation: a cancelled task is never penalized (its pending penalty
// was dropped when it was cancelled), and a penalized task stays a
// candidate for cancellation.
func (c *Controller) penalizeLocked(t *task.Task, d policy.Decision, rec *policy.Record) {
	switch {
	case t == nil && d.Class != "" && d.Delay > 0 && !c.cfg.dryRun:
		// The task ended since the snapshot, as a short request of a
		// noisy stream often has: its class's next task serves it, as
		// it would have had the task ended with the penalty pending.
		taskx.LeavePenalty(c.tasks, d.Class, d.Delay)
		rec.TaskClass = d.Class
		rec.Outcome, rec.Note = policy.Acted, "task ended: left to the next task of its class"
		c.penalties++
	case t == nil:
		rec.Outcome, rec.Note = policy.Skipped, "task is not live"
	case t.Cancelled():
		rec.Outcome, rec.Note = policy.Skipped, "task was cancelled: its penalties are dropped"
	case d.Delay <= 0:
		rec.Outcome, rec.Note = policy.Skipped, "no delay"
	case c.cfg.dryRun:
		rec.Outcome, rec.Note = policy.DryRun, "dry run: not penalized"
	default:
		taskx.Penalize(t, d.Delay)
		rec.Outcome = policy.Acted
		if d.Delay > task.MaxPenalty {
			rec.Note = "cut to " + task.MaxPenalty.String()
		}
		c.penalties++
	}
}

// publish logs records and hands them to the observers, outside c.mu;
// ctxs[i] is the context record i's task was begun from, or nil. The log
// record carries that context, so a handler that correlates logs with
// traces (an OpenTelemetry slog bridge) finds the request's span there.
func (c *Controller) publish(recs []policy.Record, ctxs []context.Context) {
	if c.cfg.traceID != nil {
		c.traceIDs(recs, ctxs)
	}
	for i := range recs {
		r := &recs[i]
		ctx := ctxs[i]
		if ctx == nil {
			ctx = context.Background()
		}
		c.log.LogAttrs(ctx, slog.LevelInfo, "moirai decision", c.logAttrs(*r)...)
		c.observe(ctx, r)
	}
}

// observe hands a record to the decision observers, recovering a panic.
func (c *Controller) observe(ctx context.Context, r *policy.Record) {
	if c.cfg.decisionObserver != nil {
		c.callUser("decision observer", func() { c.cfg.decisionObserver(*r) })
	}
	if c.cfg.decisionCtx != nil {
		c.callUser("decision observer", func() { c.cfg.decisionCtx(ctx, *r) })
	}
}

// traceIDs reads the trace id of each record's task from its context
// (WithTraceID), outside c.mu, and stores it in the record and in the
// decision log's copy, if the log still holds it.
func (c *Controller) traceIDs(recs []policy.Record, ctxs []context.Context) {
	found := false
	for i := range recs {
		if ctxs[i] == nil {
			continue
		}
		var id string
		c.callUser("trace-id function", func() { id = c.cfg.traceID(ctxs[i]) })
		if validTraceID(id) {
			recs[i].TraceID = id
			found = true
		}
	}
	if !found {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range recs {
		r := &recs[i]
		if e := &c.ring[(r.Seq-1)%uint64(len(c.ring))]; r.TraceID != "" && e.Seq == r.Seq {
			e.TraceID = r.TraceID
		}
	}
}

// validTraceID reports whether s is a W3C trace id: 32 lowercase
// hexadecimal digits, not all zero.
func validTraceID(s string) bool {
	if len(s) != 32 {
		return false
	}
	zero := true
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '0':
		case '1' <= ch && ch <= '9', 'a' <= ch && ch <= 'f':
			zero = false
		default:
			return false
		}
	}
	return !zero
}

// Cancel cancels the live task with the given ID on an operator's or the
// application's behalf, through the same safety checks and decision log as
// the policies' cancellations (but not the minimum interval). It returns an
// error if the task was not cancelled.
func (c *Controller) Cancel(id uint64, reason string) error {
	c.mu.Lock()
	rec, ctx := c.actLocked(policy.Decision{Policy: "manual", Action: policy.Cancel, Task: id, Reason: reason}, true, nil)
	c.mu.Unlock()
	c.publish([]policy.Record{rec}, []context.Context{ctx})
	if rec.Outcome != policy.Acted {
		return fmt.Errorf("moirai: task %d not cancelled: %s", id, rec.Note)
	}
	return nil
}

// Decisions returns the recent decisions, oldest first, as many as the
// decision log keeps (see [WithDecisionLog]).
func (c *Controller) Decisions() []policy.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]policy.Record, 0, c.ringLen)
	for i := c.seq - uint64(c.ringLen); i < c.seq; i++ {
		out = append(out, c.ring[i%uint64(len(c.ring))])
	}
	return out
}

// DecisionsOn returns the decisions the decision log still holds on the
// task with the given ID, oldest first, or nil. A task's own goroutine
// that sees it was cancelled or penalized finds the decision here at
// once: the controller records a decision before its effect can be
// seen. Middleware calls it to annotate the request before the task ends
// (package otelmoirai); it scans the log (see [WithDecisionLog]) under
// the controller's lock, so call it when a decision is known to be
// there, not on every request.
func (c *Controller) DecisionsOn(id uint64) []policy.Record {
	if id == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []policy.Record
	for i := c.seq - uint64(c.ringLen); i < c.seq; i++ {
		if r := &c.ring[i%uint64(len(c.ring))]; r.Task == id {
			out = append(out, *r)
		}
	}
	return out
}
