package moirai

import (
	"context"
	"time"

	"github.com/moirai-go/moirai/policy"
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
			c.disarmPreempts()
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
	c.armPreemptsLocked()
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
	c.notePreemptedLocked()
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
