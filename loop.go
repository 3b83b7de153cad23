package moirai

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// baseline is the cumulative state at the previous loop snapshot, from
// which window deltas are computed.
type baseline struct {
	res    []resCum
	totals task.Totals
	at     int64
	valid  bool
}

type resCum struct {
	wait, hold       time.Duration
	waits, evictions int64
}

// run is the controller's goroutine: it advances the coarse clock at its
// resolution (a tenth of it while the clock is precise) and steps the
// control loop on the coarse or the fine tick.
func (c *Controller) run() {
	defer close(c.loopDone)
	clk := time.NewTicker(c.cfg.resolution)
	defer clk.Stop()
	tick := time.NewTimer(c.cfg.coarseTick)
	defer tick.Stop()
	fast := false
	var last, due time.Time // the last step's start, the next tick's time
	for {
		select {
		case <-c.done:
			for _, r := range c.armed {
				armResource(r, nil)
			}
			return
		case <-clk.C:
			c.clock.Advance()
			continue
		case <-c.poke:
			// A task began to wait on an armed resource: step now, or,
			// if a step ran within pokeGap, pokeGap after it (the tick
			// may be a whole period away).
			if since := time.Since(last); since < pokeGap {
				if at := last.Add(pokeGap); at.Before(due) {
					tick.Reset(pokeGap - since)
					due = at
				}
				continue
			}
		case <-tick.C:
		}
		last = time.Now()
		d := c.step()
		tick.Reset(d)
		due = time.Now().Add(d)
		if p := c.clock.IsPrecise(); p != fast {
			fast = p
			clk.Reset(c.advancePeriod(p))
		}
	}
}

// pokeGap is the least time between a step and one a poke runs: a
// resource stays armed while some class is known to be heavy on it, and
// each task that begins to wait there pokes, as does one that takes it
// after a wait while others still wait.
const pokeGap = time.Millisecond

// armLocked arms, for the next waits, the resources the policies named
// at this step (policy.Waker), and disarms the others armed before.
func (c *Controller) armLocked() {
	c.wakeOn = c.wakeOn[:0]
	for _, p := range c.cfg.policies {
		if w, ok := p.(policy.Waker); ok {
			dst := c.wakeOn
			c.wakeOn = catch(c, userCode{"policy", p.Name(), "WakeOn"}, dst, func() []int { return w.WakeOn(&c.snap, dst) })
		}
	}
	for _, r := range c.armed {
		armResource(r, nil)
	}
	c.armed = c.armed[:0]
	for _, i := range c.wakeOn {
		if i < 0 || i >= len(c.snap.Resources) {
			continue
		}
		if r := c.res.ByID(c.snap.Resources[i].ID); r != nil {
			armResource(r, &c.wake)
			c.armed = append(c.armed, r)
		}
	}
}

// advancePeriod is how often the loop advances the coarse clock: at its
// resolution, and ten times as often while the clock is precise (a
// detector fires). The mutexes and the semaphores' named holders read the
// coarse value in every mode, one load, where a read of the monotonic
// clock costs more than the lock; while decisions are being made their
// holds are then known to a tenth of the resolution, close enough that
// the decisions are those of the precise clock
// (TestCoarseHoldsSameDecisions; a whole tick was not: docs/RUNTIME.md).
func (c *Controller) advancePeriod(precise bool) time.Duration {
	if precise {
		return max(c.cfg.resolution/10, 10*time.Microsecond)
	}
	return c.cfg.resolution
}

// step runs one iteration of the loop: snapshot → detect → decide → act →
// record. It returns the time to the next step.
func (c *Controller) step() time.Duration {
	c.clock.Advance()
	c.mu.Lock()
	c.steps++
	c.buildLocked(&c.snap, &c.live, true)
	c.trackBusyLocked()
	c.observeLoadLocked()
	c.observeBudgetLocked()
	c.durations.Observe(&c.snap)
	c.observeLocked()
	firing := c.detectLocked()
	c.snap.Quiet = !firing && len(c.cfg.detectors) > 0
	if firing != c.firing {
		c.firing = firing
		c.clock.SetPrecise(firing)
	}
	var recs []policy.Record
	var ctxs []context.Context
	cancels, watching := 0, false
	for _, p := range c.cfg.policies {
		// Continuous policies (penalties) decide on every step; the others
		// only while a detector fires, or always when there is none.
		cont, isCont := p.(policy.Continuous)
		if !firing && len(c.cfg.detectors) > 0 && !isCont {
			continue
		}
		for _, d := range c.decide(p) {
			rec, ctx := c.actLocked(d, false, nil)
			if rec.Action == policy.Cancel {
				cancels++
				if rec.Outcome == policy.Acted {
					// The policies after this one see the task as
					// cancelled, as the next snapshot will show it: a
					// penalty decided on it now would only be skipped.
					if i := c.snap.TaskByID(rec.Task); i >= 0 {
						c.snap.Tasks[i].Cancelled = true
					}
				}
			}
			recs = append(recs, rec)
			ctxs = append(ctxs, ctx)
		}
		if isCont && catch(c, userCode{"policy", p.Name(), "Watching"}, false, cont.Watching) {
			watching = true
		}
	}
	c.armLocked()
	regular := firing && cancels == 0 && !c.confirmedLocked()
	changed := regular != c.regular
	c.regular = regular
	close(c.stepped)
	c.stepped = make(chan struct{})
	c.mu.Unlock()
	c.publish(recs, ctxs)
	if changed && c.cfg.regularOverload != nil {
		c.callUser("regular-overload handler", func() { c.cfg.regularOverload(regular) })
	}
	if firing || watching {
		return c.cfg.fineTick
	}
	return c.cfg.coarseTick
}

// callUser runs user code outside the runtime's locks, recovering and
// reporting a panic.
func (c *Controller) callUser(what string, fn func()) {
	catch(c, userCode{what: what}, struct{}{}, func() struct{} { fn(); return struct{}{} })
}

// userCode names the application's code that catch runs, for the report
// of a panic: what it is ("policy", "detector", "decision observer"), its
// name, and the method called. The message is built only on a panic, so
// naming costs the loop nothing.
type userCode struct{ what, name, method string }

// panicked is the error catch reports for a panic with value v.
func (u userCode) panicked(v any) error {
	who := u.what
	if u.name != "" {
		who += " " + u.name
	}
	if u.method != "" {
		return fmt.Errorf("moirai: %s panicked in %s: %v\n%s", who, u.method, v, debug.Stack())
	}
	return fmt.Errorf("moirai: %s panicked: %v\n%s", who, v, debug.Stack())
}

// catch runs fn, the application's code (a policy, a detector, an
// observer, a handler or hook it gave), and returns its result. If fn
// panics, catch reports the panic with who panicked and the stack, and
// returns fallback: user code never stops the controller's loop.
func catch[T any](c *Controller, who userCode, fallback T, fn func() T) (out T) {
	defer func() {
		if v := recover(); v != nil {
			c.report(who.panicked(v))
			out = fallback
		}
	}()
	return fn()
}

// observeLocked shows the snapshot to the detectors and policies that
// learn from every step.
func (c *Controller) observeLocked() {
	for _, d := range c.cfg.detectors {
		if o, ok := d.(policy.Observer); ok {
			observe(c, userCode{"detector", d.Name(), "Observe"}, o)
		}
	}
	for _, p := range c.cfg.policies {
		if o, ok := p.(policy.Observer); ok {
			observe(c, userCode{"policy", p.Name(), "Observe"}, o)
		}
	}
}

// observe shows the snapshot to o, recovering a panic.
func observe(c *Controller, who userCode, o policy.Observer) {
	catch(c, who, struct{}{}, func() struct{} { o.Observe(&c.snap); return struct{}{} })
}

// confirmedLocked reports whether the overload is resource overload: a
// policy confirms a contended resource, a cancellation is recent enough
// that its effect is still draining (one coarse tick, at least a second),
// or no policy can tell (then the overload is not called regular).
func (c *Controller) confirmedLocked() bool {
	if c.lastCancel != 0 && time.Duration(c.clock.Now()-c.lastCancel) < max(time.Second, c.cfg.coarseTick) {
		return true
	}
	can := false
	for _, p := range c.cfg.policies {
		cf, ok := p.(policy.Confirmer)
		if !ok {
			continue
		}
		can = true
		if catch(c, userCode{"policy", p.Name(), "Confirm"}, true, func() bool { return cf.Confirm(&c.snap) }) {
			return true
		}
	}
	return !can
}

// trackBusyLocked records, per resource, the last time anyone used it:
// waited for it, held it, or (memory) evicted from it. Re-execution waits
// for the resources a cancelled task used to be free for a while.
func (c *Controller) trackBusyLocked() {
	n := len(c.snap.Resources)
	now := max(int64(c.snap.At), 1)
	for len(c.busyAt) < n {
		c.busyAt = append(c.busyAt, now) // new: not known to be free yet
	}
	for i := range c.snap.Resources {
		r := &c.snap.Resources[i]
		busy := r.Waiters > 0 || r.WindowWaits > 0 || r.WindowWait > 0
		if r.Kind == KindMemory {
			busy = busy || r.WindowEvictions > 0
		} else {
			busy = busy || r.Holders > 0 || r.WindowHold > 0 || r.Held > 0
		}
		if busy {
			c.busyAt[i] = now
		}
	}
}

// detectLocked runs the detectors; a panicking detector is reported and
// counts as not firing.
func (c *Controller) detectLocked() bool {
	c.fired = c.fired[:0]
	for _, d := range c.cfg.detectors {
		type verdict struct {
			fired  bool
			reason string
		}
		v := catch(c, userCode{"detector", d.Name(), "Detect"}, verdict{}, func() verdict {
			fired, reason := d.Detect(&c.snap)
			return verdict{fired, reason}
		})
		if v.fired {
			c.fired = append(c.fired, d.Name()+": "+v.reason)
		}
	}
	return len(c.fired) > 0
}

// decide runs a policy's Decide; a panicking policy decides nothing.
func (c *Controller) decide(p policy.Policy) []policy.Decision {
	ds := catch(c, userCode{"policy", p.Name(), "Decide"}, nil, func() []policy.Decision { return p.Decide(&c.snap) })
	for i := range ds {
		if ds[i].Policy == "" {
			ds[i].Policy = p.Name()
		}
	}
	return ds
}

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
	switch {
	case d.Action == policy.Penalize:
		c.penalizeLocked(t, d, &rec)
	case d.Action == policy.Diagnose:
		// A finding about a class: recorded and logged, nothing done.
		rec.Outcome, rec.TaskClass = policy.Acted, d.Class
	case d.Action != policy.Cancel:
		rec.Outcome, rec.Note = policy.Skipped, "unknown action "+d.Action.String()
	case t == nil:
		rec.Outcome, rec.Note = policy.Skipped, "task is not live"
	case !t.Spec().Cancellable:
		rec.Outcome, rec.Note = policy.Skipped, "task is not cancellable"
	case t.Cancelled():
		rec.Outcome, rec.Note = policy.Skipped, "task was already cancelled"
	case !manual && c.lastCancel != 0 && time.Duration(now-c.lastCancel) < c.cfg.minCancelGap:
		rec.Outcome = policy.Skipped
		rec.Note = fmt.Sprintf("previous cancellation %v ago, minimum interval %v", time.Duration(now-c.lastCancel), c.cfg.minCancelGap)
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

// Firing returns the reasons of the detectors firing at the last step, or
// nil when none fired.
func (c *Controller) Firing() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.fired) == 0 {
		return nil
	}
	return append([]string(nil), c.fired...)
}

// Snapshot returns a snapshot of the live tasks and the resources now. Its
// window is the time since the loop's last snapshot.
func (c *Controller) Snapshot() *snapshot.Snapshot {
	s := new(snapshot.Snapshot)
	c.SnapshotInto(s)
	return s
}

// SnapshotInto stores a snapshot in dst, reusing dst's storage: repeated
// snapshots into one value allocate nothing once it has grown.
func (c *Controller) SnapshotInto(dst *snapshot.Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	live := c.scratchLive[:0]
	c.buildLocked(dst, &live, false)
	clear(live)
	c.scratchLive = live[:0]
}

// buildLocked fills dst from the registries. With advance, it also reports
// never-ended tasks and moves the window baseline to now.
func (c *Controller) buildLocked(dst *snapshot.Snapshot, live *[]*task.Task, advance bool) {
	now := c.clock.Now()
	dst.Reset()
	dst.At = time.Duration(now)
	dst.Time = c.clock.Time(now)
	dst.Precise = c.clock.IsPrecise()

	// Resources, with the totals of the tasks that have ended.
	n := c.res.Len()
	if cap(dst.Resources) < n {
		dst.Resources = make([]snapshot.Resource, n)
	}
	dst.Resources = dst.Resources[:n]
	c.liveTab = grow(c.liveTab, n)
	for i := range dst.Resources {
		r := c.res.ByID(task.ResourceID(i + 1))
		r.LiveHolds(now, &c.liveTab[i])
		e := r.EndedTotals()
		dst.Resources[i] = snapshot.Resource{
			ID: r.ID(), Name: r.Name(), Kind: r.Kind(), Capacity: r.Capacity(),
			Wait: e.Wait, Hold: e.Hold, Waits: e.Waits, Evictions: e.Evictions,
			InUse: r.Resident(), Queued: r.QueueLength(), Untracked: r.Untracked(),
		}
	}

	// Tasks and their usage.
	*live = taskx.AppendLive(c.tasks, (*live)[:0])
	c.buildTasks(dst, *live, now, advance)

	// Completions and window deltas against the baseline.
	c.tasks.TotalsInto(&c.totals)
	b := &c.base
	dst.Completed = snapshot.Completions{
		Begun: c.totals.Begun, Ended: c.totals.Ended, Failed: c.totals.Failed,
		Exec: c.totals.Exec, Latency: c.totals.Latency,
	}
	if b.valid {
		dst.Window = time.Duration(now - b.at)
		dst.Completed.Begun = sub(c.totals.Begun, b.totals.Begun)
		dst.Completed.Ended = sub(c.totals.Ended, b.totals.Ended)
		dst.Completed.Failed = sub(c.totals.Failed, b.totals.Failed)
		dst.Completed.Exec = max(c.totals.Exec-b.totals.Exec, 0)
		dst.Completed.Latency.Sub(&b.totals.Latency)
	}
	for i := range dst.Resources {
		r := &dst.Resources[i]
		if b.valid && i < len(b.res) {
			p := b.res[i]
			r.WindowWait = max(r.Wait-p.wait, 0)
			r.WindowHold = max(r.Hold-p.hold, 0)
			r.WindowWaits = max(r.Waits-p.waits, 0)
			r.WindowEvictions = max(r.Evictions-p.evictions, 0)
		} else {
			r.WindowWait, r.WindowHold, r.WindowWaits = r.Wait, r.Hold, r.Waits
			r.WindowEvictions = r.Evictions
		}
	}
	if advance {
		b.res = b.res[:0]
		for i := range dst.Resources {
			r := &dst.Resources[i]
			b.res = append(b.res, resCum{r.Wait, r.Hold, r.Waits, r.Evictions})
		}
		b.totals.Begun, b.totals.Ended, b.totals.Failed, b.totals.Exec = c.totals.Begun, c.totals.Ended, c.totals.Failed, c.totals.Exec
		b.totals.Latency = c.totals.Latency
		b.at = now
		b.valid = true
		clear(*live) // do not keep ended tasks reachable
	}
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
