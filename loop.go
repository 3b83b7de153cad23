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
			c.wakeOn = c.safeWakeOn(p.Name(), w, c.wakeOn)
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

// safeWakeOn asks a policy for the resources to arm, recovering a panic.
func (c *Controller) safeWakeOn(name string, w policy.Waker, dst []int) (out []int) {
	defer func() {
		if v := recover(); v != nil {
			c.report(fmt.Errorf("moirai: %s panicked: %v", name, v))
			out = dst
		}
	}()
	return w.WakeOn(&c.snap, dst)
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
	c.durations.Observe(&c.snap)
	c.observeLocked()
	firing := c.detectLocked()
	c.snap.Quiet = !firing && len(c.cfg.detectors) > 0
	if firing != c.firing {
		c.firing = firing
		c.clock.SetPrecise(firing)
	}
	var recs []policy.Record
	cancels, watching := 0, false
	for _, p := range c.cfg.policies {
		// Continuous policies (penalties) decide on every step; the others
		// only while a detector fires, or always when there is none.
		cont, isCont := p.(policy.Continuous)
		if !firing && len(c.cfg.detectors) > 0 && !isCont {
			continue
		}
		for _, d := range c.safeDecide(p) {
			rec := c.actLocked(d, false, nil)
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
		}
		if isCont && c.safeWatching(p.Name(), cont) {
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
	c.publish(recs)
	if changed && c.cfg.regularOverload != nil {
		c.callUser("regular-overload handler", func() { c.cfg.regularOverload(regular) })
	}
	if firing || watching {
		return c.cfg.fineTick
	}
	return c.cfg.coarseTick
}

// safeWatching asks a continuous policy whether it wants the fine tick,
// recovering a panic.
func (c *Controller) safeWatching(name string, cp policy.Continuous) (w bool) {
	defer func() {
		if v := recover(); v != nil {
			c.report(fmt.Errorf("moirai: %s panicked: %v", name, v))
			w = false
		}
	}()
	return cp.Watching()
}

// callUser runs user code outside the runtime's locks, recovering and
// reporting a panic.
func (c *Controller) callUser(what string, fn func()) {
	defer func() {
		if v := recover(); v != nil {
			c.report(fmt.Errorf("moirai: %s panicked: %v", what, v))
		}
	}()
	fn()
}

// observeLocked shows the snapshot to the detectors and policies that
// learn from every step.
func (c *Controller) observeLocked() {
	for _, d := range c.cfg.detectors {
		if o, ok := d.(policy.Observer); ok {
			c.safeObserve(d.Name(), o)
		}
	}
	for _, p := range c.cfg.policies {
		if o, ok := p.(policy.Observer); ok {
			c.safeObserve(p.Name(), o)
		}
	}
}

func (c *Controller) safeObserve(name string, o policy.Observer) {
	defer func() {
		if v := recover(); v != nil {
			c.report(fmt.Errorf("moirai: %s panicked observing: %v\n%s", name, v, debug.Stack()))
		}
	}()
	o.Observe(&c.snap)
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
		if c.safeConfirm(p.Name(), cf) {
			return true
		}
	}
	return !can
}

func (c *Controller) safeConfirm(name string, cf policy.Confirmer) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			c.report(fmt.Errorf("moirai: %s panicked confirming: %v", name, v))
			ok = true
		}
	}()
	return cf.Confirm(&c.snap)
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
		fired, reason := c.safeDetect(d)
		if fired {
			c.fired = append(c.fired, d.Name()+": "+reason)
		}
	}
	return len(c.fired) > 0
}

func (c *Controller) safeDetect(d policy.Detector) (fired bool, reason string) {
	defer func() {
		if v := recover(); v != nil {
			c.report(fmt.Errorf("moirai: detector %s panicked: %v\n%s", d.Name(), v, debug.Stack()))
			fired = false
		}
	}()
	return d.Detect(&c.snap)
}

func (c *Controller) safeDecide(p policy.Policy) (ds []policy.Decision) {
	defer func() {
		if v := recover(); v != nil {
			c.report(fmt.Errorf("moirai: policy %s panicked: %v\n%s", p.Name(), v, debug.Stack()))
			ds = nil
		}
	}()
	ds = p.Decide(&c.snap)
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
// It records the decision in the log. A cancelled task's context's cause
// wraps because, when non-nil, beside ErrCancelled.
func (c *Controller) actLocked(d policy.Decision, manual bool, because error) policy.Record {
	now := c.clock.Now()
	c.seq++
	rec := policy.Record{Seq: c.seq, Time: c.clock.Time(now), Decision: d}
	t := c.tasks.Lookup(d.Task)
	if t != nil {
		sp := t.Spec()
		rec.TaskKey, rec.TaskClass = sp.Key, sp.Class
	}
	switch {
	case d.Action == policy.Penalize:
		c.penalizeLocked(t, d, &rec)
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
	return rec
}

// publish logs records and hands them to the observer, outside c.mu.
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

func (c *Controller) publish(recs []policy.Record) {
	for i := range recs {
		r := &recs[i]
		c.log.LogAttrs(context.Background(), slog.LevelInfo, "moirai decision", c.logAttrs(*r)...)
		if c.cfg.decisionObserver != nil {
			func() {
				defer func() {
					if v := recover(); v != nil {
						c.report(fmt.Errorf("moirai: decision observer panicked: %v", v))
					}
				}()
				c.cfg.decisionObserver(*r)
			}()
		}
	}
}

// Cancel cancels the live task with the given ID on an operator's or the
// application's behalf, through the same safety checks and decision log as
// the policies' cancellations (but not the minimum interval). It returns an
// error if the task was not cancelled.
func (c *Controller) Cancel(id uint64, reason string) error {
	c.mu.Lock()
	rec := c.actLocked(policy.Decision{Policy: "manual", Action: policy.Cancel, Task: id, Reason: reason}, true, nil)
	c.mu.Unlock()
	c.publish([]policy.Record{rec})
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
