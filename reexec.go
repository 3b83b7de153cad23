package moirai

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/task"
)

// Re-execution is admission, not a timer (the fourth rule of the design):
// a cancelled run of [Retry] runs again only when its class's predicted
// demand fits what each resource it used has spare, and meanwhile its class
// is capped, so that another heavy run of the class queues behind the
// re-execution instead of starting beside it.
//
// # Spare capacity
//
// Every step the controller keeps, per resource, a moving mean (over about
// a second) of its demand: the units held plus the tasks waiting. A
// re-execution that needs u units of a queue or pool of capacity C fits
// when nobody waits for it now and a + √a + u ≤ C, a the larger of the
// mean and the units held now (the mean lags a demand that just rose: a
// report that took most of a pool a moment ago is in it only a little):
// the others' demand a, arriving at random, needs a + √a units of what the
// re-execution leaves (square-root staffing, Halfin–Whitt with β = 1)
// for few of them to wait, and a queue left exactly a units is at full
// utilization, where every one of them waits and the wait grows without
// bound (a parallel request given back 7 slots of 8 beside light requests
// that keep one busy on average). A lock has room for one:
// a re-execution fits when nobody holds it or waits for it now and either
// its expected hold is at most half the objective (the others then wait
// less than their objective for it) or the lock has been unused for the
// quiet time ([RetryQuiet]) and at least a second: the load has stopped,
// not paused. Memory, CPU and IO
// resources fit when unused for the quiet time. No detector may fire.
//
// # The class cap
//
// When a first run of class K is cancelled while n runs of K were running
// under Retry, K is capped at max(n−1, 1) concurrent first runs until its
// re-executions are over: the bulkhead a user would write by hand, learnt
// from the concurrency that overloaded the resource. A first run over the
// cap waits for a slot, at most RetryMaxWait.
//
// # A class that cannot complete under load
//
// A class whose expected hold of a lock exceeds the objective, while others
// use the lock, cannot be re-executed without pushing them past it; it is
// reported once per class (log, [Controller.Decisions] as a Diagnose
// record) with the advice to split its work. Its re-executions wait for
// the load to leave a window and fail with [ErrNoWindow] when none comes.

// ErrNoWindow is wrapped by the error of [Retry] when a cancelled run found
// no window to run again (its class's demand did not fit the spare
// capacity of its resources) within the bounded wait, and by the error of
// a first run that waited too long behind its class's cap.
var ErrNoWindow = errors.New("moirai: no window under the current load")

// maxDiagnosed bounds the classes diagnosed once.
const maxDiagnosed = 1024

// reexecState is the controller's re-execution admission state, guarded
// by c.mu but for the class gates (c.gmu).
type reexecState struct {
	load   []float64 // per resource ID−1: moving mean of units held + tasks waiting
	usedAt []int64   // per resource ID−1: last step a task was seen to use it
	users  []int     // scratch: live tasks with a use of each resource
	// folds counts, per resource ID modulo its length, the ended tasks
	// that had used the resource (a lock taken for less than a clock
	// tick leaves no hold in the totals, but the task's use is folded);
	// seenFolds is the count at the last step, per resource ID−1.
	folds     [256]atomic.Int64
	seenFolds []int64
	gates     map[string]*classGate // guarded by Controller.gmu, not mu
	diagnosed map[string]bool
	// held is what each cancelled task held when cancelled, until it ends:
	// the units a re-execution will need.
	held map[uint64][]usedRes
	// reserved is, per resource ID−1, the units of the re-executions
	// admitted and still running: two re-executions admitted on one step
	// would otherwise both fit the same spare capacity.
	reserved []int64
}

// classGate counts a class's runs under Retry and caps them while a
// re-execution of the class is pending. Gates exist only while the class
// has runs: the map is bounded by the runs in flight.
type classGate struct {
	running int // first runs and re-executions running
	pending int // re-executions waiting or running
	limit   int // cap on first runs; 0: none
	wake    chan struct{}
}

// usedRes is a resource a cancelled run used and the units it held.
type usedRes struct {
	id    task.ResourceID
	units int64
}

// observeLoadLocked updates the resources' moving demand from the step's
// snapshot.
func (c *Controller) observeLoadLocked() {
	st := &c.reexec
	n := len(c.snap.Resources)
	for len(st.load) < n {
		st.load = append(st.load, 0)
	}
	c.pruneHeldLocked()
	// A task that used a resource for less than a clock tick leaves no
	// hold or wait in the totals, but its use is listed: a lock read for
	// microseconds at 200/s is in use, not free.
	st.users = grow(st.users, n)
	clear(st.users)
	for _, u := range c.snap.Usage {
		if u.Res >= 0 && int(u.Res) < n && !c.snap.Tasks[u.Task].Cancelled {
			st.users[u.Res]++
		}
	}
	now := max(int64(c.snap.At), 1)
	for len(st.usedAt) < n {
		st.usedAt = append(st.usedAt, now)
		st.seenFolds = append(st.seenFolds, 0)
	}
	for i, k := range st.users {
		f := st.folds[(i+1)%len(st.folds)].Load()
		c.observeRateLocked(i, f-st.seenFolds[i])
		if k > 0 || f != st.seenFolds[i] || (i < len(c.busyAt) && c.busyAt[i] == now) {
			st.usedAt[i] = now
		}
		st.seenFolds[i] = f
	}
	alpha := 1.0
	if w := c.snap.Window; w > 0 && w < time.Second {
		alpha = float64(w) / float64(time.Second)
	}
	for i := range c.snap.Resources {
		r := &c.snap.Resources[i]
		x := float64(r.Held) + float64(max(r.Waiters, 0))
		st.load[i] += alpha * (x - st.load[i])
	}
}

// fold is the task registry's end hook: it folds an ended task's usage
// into its resources' totals and counts the task as a user of each.
func (c *Controller) fold(t *task.Task, now int64, usage []task.Usage) {
	c.res.Fold(t, now, usage)
	for _, u := range usage {
		c.reexec.folds[int(u.Resource)%len(c.reexec.folds)].Add(1)
	}
}

// gateLocked returns class's gate, creating it; c.gmu held.
func (c *Controller) gateLocked(class string) *classGate {
	if c.reexec.gates == nil {
		c.reexec.gates = map[string]*classGate{}
	}
	g := c.reexec.gates[class]
	if g == nil {
		g = &classGate{wake: make(chan struct{})}
		c.reexec.gates[class] = g
	}
	return g
}

// leaveLocked ends a run of class (a re-execution if reexec) and drops the
// gate once it has nothing left to count; c.gmu held.
func (c *Controller) leaveLocked(class string, g *classGate, reexec bool) {
	g.running--
	if reexec {
		g.pending--
		if g.pending <= 0 {
			g.pending, g.limit = 0, 0
		}
	}
	close(g.wake)
	g.wake = make(chan struct{})
	if g.running <= 0 && g.pending <= 0 {
		delete(c.reexec.gates, class)
	}
}

// enterFirst admits a first run of class under its cap, waiting at most
// maxWait for a slot. It returns the gate to leave.
func (c *Controller) enterFirst(ctx context.Context, class string, maxWait time.Duration) (*classGate, error) {
	var timer *time.Timer
	for {
		c.gmu.Lock()
		g := c.gateLocked(class)
		if g.limit <= 0 || g.running < g.limit {
			g.running++
			c.gmu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return g, nil
		}
		if timer == nil {
			c.retries.Capped++
			timer = time.NewTimer(maxWait)
		}
		wake := g.wake
		limit := g.limit
		if g.running <= 0 && g.pending <= 0 {
			delete(c.reexec.gates, class)
		}
		c.gmu.Unlock()
		select {
		case <-wake:
		case <-timer.C:
			return nil, fmt.Errorf("%w: class %q is capped at %d run(s) while a cancelled run of it waits to run again; no slot within %v", ErrNoWindow, class, limit, maxWait)
		case <-ctx.Done():
			timer.Stop()
			return nil, context.Cause(ctx)
		case <-c.done:
			timer.Stop()
			return nil, fmt.Errorf("%w: controller closed", ErrNoWindow)
		}
	}
}

// fitsLocked reports whether a re-execution holding used for about hold
// fits the spare capacity now, and why not.
func (c *Controller) fitsLocked(used []usedRes, hold, quiet time.Duration) (bool, string) {
	if c.steps == 0 {
		return false, "no step yet"
	}
	if c.firing {
		return false, "a detector fires"
	}
	now := int64(c.snap.At)
	for _, u := range used {
		i := int(u.id) - 1
		if i < 0 || i >= len(c.snap.Resources) || i >= len(c.reexec.load) {
			continue
		}
		r := &c.snap.Resources[i]
		idle := i < len(c.reexec.usedAt) && time.Duration(now-c.reexec.usedAt[i]) >= quiet
		switch {
		case r.Waiters > 0:
			return false, fmt.Sprintf("%d task(s) wait for %s", r.Waiters, r.Name)
		case r.Kind == KindQueue && r.Capacity > 1:
			res := c.reservedLocked(i)
			// The moving mean lags a demand that just rose (a holder
			// that took most of the pool a moment ago is in it only a
			// little): the units held now count as the demand when
			// they are more.
			load := max(c.reexec.load[i], float64(r.Held))
			headroom := math.Sqrt(max(load, 0))
			if need := load + headroom + float64(res+max(u.units, 1)); need > float64(r.Capacity) {
				return false, fmt.Sprintf("%s: demand %.1f (+%.1f headroom; %d of it re-executions) + %d unit(s) over capacity %d", r.Name, load+float64(res), headroom, res, max(u.units, 1), r.Capacity)
			}
		case r.Kind == KindLock:
			if r.Holders > 0 || c.reservedLocked(i) > 0 {
				return false, r.Name + " is held"
			}
			// A long hold needs the load to have stopped, not paused: a
			// second unused, at least.
			long := max(quiet, time.Second)
			if hold > c.cfg.sloTarget/2 && !(i < len(c.reexec.usedAt) && time.Duration(now-c.reexec.usedAt[i]) >= long) {
				return false, fmt.Sprintf("%s: a hold of about %v delays its other users past half the objective %v, and it was used within %v", r.Name, hold.Round(time.Millisecond), c.cfg.sloTarget, long)
			}
		default:
			if !idle {
				return false, fmt.Sprintf("%s was used within %v", r.Name, quiet)
			}
		}
	}
	return true, ""
}

// reservedLocked returns the units reserved on resource index i.
func (c *Controller) reservedLocked(i int) int64 {
	if i < len(c.reexec.reserved) {
		return c.reexec.reserved[i]
	}
	return 0
}

// reserveLocked adds sign × the units of used to the reservations.
func (c *Controller) reserveLocked(used []usedRes, sign int64) {
	for _, u := range used {
		i := int(u.id) - 1
		if i < 0 {
			continue
		}
		for len(c.reexec.reserved) <= i {
			c.reexec.reserved = append(c.reexec.reserved, 0)
		}
		c.reexec.reserved[i] = max(c.reexec.reserved[i]+sign*max(u.units, 1), 0)
	}
}

// diagnoseLocked reports, once per class, a class whose expected hold of a
// lock exceeds the objective while others use it, or, when its wait for a
// window is over (final), half the objective: its re-execution would push
// the others past it. It returns the record to publish, or nil.
func (c *Controller) diagnoseLocked(class string, used []usedRes, hold time.Duration, final bool) *policy.Record {
	limit := c.cfg.sloTarget
	if final {
		limit /= 2
	}
	if hold <= limit || c.reexec.diagnosed[class] || len(c.reexec.diagnosed) >= maxDiagnosed {
		return nil
	}
	for _, u := range used {
		i := int(u.id) - 1
		if i < 0 || i >= len(c.snap.Resources) || i >= len(c.reexec.load) {
			continue
		}
		r := &c.snap.Resources[i]
		if r.Kind != KindLock || (c.reexec.load[i] <= 0.01 && time.Duration(int64(c.snap.At)-c.reexec.usedAt[i]) > time.Second) {
			continue
		}
		if c.reexec.diagnosed == nil {
			c.reexec.diagnosed = map[string]bool{}
		}
		c.reexec.diagnosed[class] = true
		c.seq++
		rec := policy.Record{Seq: c.seq, Time: c.clock.Time(c.clock.Now()), TaskClass: class, Outcome: policy.Acted,
			Decision: policy.Decision{Policy: "reexecution", Action: policy.Diagnose, Class: class,
				Reason: fmt.Sprintf("class %q holds %s for %v or more, against an objective of %v for the others who use it: it cannot complete under this load; split its work into pieces shorter than %v, or run it when the load stops",
					class, r.Name, hold.Round(time.Millisecond), c.cfg.sloTarget, c.cfg.sloTarget/2)}}
		c.ring[(c.seq-1)%uint64(len(c.ring))] = rec
		c.ringLen = min(c.ringLen+1, len(c.ring))
		return &rec
	}
	return nil
}

// waitWindow waits until a re-execution of class, holding used for about
// hold, fits (see fitsLocked), or the objective's error budget can absorb
// its harm (see budget.go). It returns "" when it does, with the harm
// promised to the budget (to release when the run is over), the reason
// of the last refusal when the wait timed out (cfg.maxWait, or latest),
// with over set when the hold can never fit the budget, or ctx's cause.
func (c *Controller) waitWindow(ctx context.Context, class string, used []usedRes, hold time.Duration, cfg retryConfig, latest time.Time) (reason string, promised harm, over bool, err error) {
	deadline := time.Now().Add(cfg.maxWait)
	bound := fmt.Sprintf("within %v", cfg.maxWait)
	if !latest.IsZero() && latest.Before(deadline) {
		deadline, bound = latest, "before its objective could no longer be met"
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	defer func() {
		c.mu.Lock()
		delete(c.budget.nextFit, class)
		c.mu.Unlock()
	}()
	var never string // why the budget can never absorb it, once known
	for {
		c.mu.Lock()
		ok, why := c.fitsLocked(used, hold, cfg.quiet)
		var h harm
		if !ok {
			var bok, bnever bool
			var bwhy string
			bok, bnever, h, bwhy = c.budgetFitsLocked(class, used, hold)
			switch {
			case bok:
				ok, promised = true, h
			case bnever:
				never = bwhy
			case bwhy != "":
				why += "; " + bwhy
				c.noteNextFitLocked(class, h.victims)
			}
		}
		if ok {
			c.reserveLocked(used, 1) // released by Retry when the run is over
		}
		diag := c.diagnoseLocked(class, used, hold, false)
		stepped := c.stepped
		c.mu.Unlock()
		c.publishDiagnosis(diag)
		if ok {
			if promised.victims > 0 {
				c.log.LogAttrs(context.Background(), slog.LevelInfo, "moirai maintenance on the error budget",
					slog.String("class", class), slog.String("resource", h.res), slog.Duration("hold", hold),
					slog.Float64("victims", h.victims), slog.Duration("limit", h.limit))
			}
			return "", promised, false, nil
		}
		select {
		case <-stepped:
		case <-timer.C:
			if never != "" {
				c.mu.Lock()
				diag = c.overBudgetLocked(class, never)
				c.mu.Unlock()
				c.publishDiagnosis(diag)
				return fmt.Sprintf("no window %s: %s", bound, never), harm{}, true, nil
			}
			c.mu.Lock()
			diag = c.diagnoseLocked(class, used, hold, true)
			c.mu.Unlock()
			c.publishDiagnosis(diag)
			return fmt.Sprintf("no window %s: %s", bound, why), harm{}, false, nil
		case <-ctx.Done():
			return "", harm{}, false, context.Cause(ctx)
		case <-c.done:
			return "controller closed", harm{}, false, nil
		}
	}
}

// noteNextFitLocked records when a re-execution of class, harming
// victims, next fits the budget (what ExpectedWait says).
func (c *Controller) noteNextFitLocked(class string, victims float64) {
	b := &c.budget
	if b.nextFit == nil {
		b.nextFit = map[string]int64{}
	}
	if _, ok := b.nextFit[class]; !ok && len(b.nextFit) >= maxDiagnosed {
		return
	}
	b.nextFit[class] = int64(c.snap.At) + int64(c.nextFitLocked(victims))
}

// overBudgetLocked records a re-execution of class that can never fit the
// error budget (why says so) as a diagnosis, and returns it to publish.
func (c *Controller) overBudgetLocked(class, why string) *policy.Record {
	c.seq++
	rec := policy.Record{Seq: c.seq, Time: c.clock.Time(c.clock.Now()), TaskClass: class, Outcome: policy.Acted,
		Decision: policy.Decision{Policy: "reexecution", Action: policy.Diagnose, Class: class, Reason: why}}
	c.ring[(c.seq-1)%uint64(len(c.ring))] = rec
	c.ringLen = min(c.ringLen+1, len(c.ring))
	return &rec
}

// publishDiagnosis logs a diagnosis and hands it to the decision
// observer, outside c.mu; nil does nothing.
func (c *Controller) publishDiagnosis(r *policy.Record) {
	if r == nil {
		return
	}
	c.log.LogAttrs(context.Background(), slog.LevelWarn, "moirai diagnosis", c.logAttrs(*r)...)
	c.observe(context.Background(), r)
}

// ExpectedWait returns how long a new run of class can expect to wait
// before it is served without being cancelled again: its class's mean
// learned duration for each re-execution of the class pending and for
// itself, or 0 when the class has no learned duration. It is what a
// cancelled request's Retry-After says. Safe for concurrent use.
func (c *Controller) ExpectedWait(class string) time.Duration {
	c.mu.Lock()
	mean, ok := c.durations.Mean(class)
	var fit time.Duration
	if at, has := c.budget.nextFit[class]; has {
		fit = time.Duration(at - int64(c.snap.At))
	}
	c.mu.Unlock()
	if !ok || mean <= 0 {
		return max(fit, 0)
	}
	n := 1
	c.gmu.Lock()
	if g := c.reexec.gates[class]; g != nil {
		n += g.pending
	}
	c.gmu.Unlock()
	return max(time.Duration(n)*mean, fit)
}
