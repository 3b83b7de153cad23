package moirai

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Maintenance that must run, runs: the error budget.
//
// A re-execution whose hold cannot fit while the load lasts (a compaction
// holding a write lock for a second under a read load that never stops)
// would wait for a window that never comes. The objective leaves room for
// it: "p99 ≤ 50 ms over 5 minutes" ([WithSLO], [WithSLOWindow]) allows 1 %
// of the window's requests to miss, and a maintenance run that delays
// fewer than that keeps the objective. So a re-execution of [Retry] that
// does not fit the spare capacity is also admitted when the window's
// error budget can absorb its expected harm:
//
//   - its harm is the requests it will delay past their objective: on
//     each lock it used, the rate at which the lock's other users arrive
//     (its ended users per second, over about 10 s) times its expected
//     hold less the objective (those arriving in the hold's last
//     objective wait less than it);
//   - the window's budget is (1 − q) of its requests (their rate over
//     the part of the window seen, times the window); half of it is kept
//     for everything else, and the misses already counted in the window
//     (every request past its objective, whatever the cause) and the
//     harm of the budgeted runs in flight come out of the other half;
//   - it runs when its harm fits what is left, so at most as often as
//     the budget allows: the misses it causes stay in the window for a
//     window's length.
//
// A hold whose harm exceeds the half of a whole window's budget can never
// fit while the load lasts: it waits for a window of spare capacity (the
// load stopping) until [RetryMaxWait], and then fails with an error
// naming the resource, the expected hold, the budget and what would make
// it fit; it is logged, counted ([RetryStats].OverBudget) and recorded
// as a diagnosis. [Controller.ExpectedWait], which a cancelled request's
// Retry-After says, gives the time until a waiting maintenance run of the
// class next fits the budget.

// budgetBuckets is the number of buckets the window's counts are kept in.
const budgetBuckets = 300

// budgetShare is the share of the window's error budget that budgeted
// runs may spend; the rest is kept for everything else.
const budgetShare = 0.5

// rateSpan is the span of the moving rate of a resource's users.
const rateSpan = 10 * time.Second

// budgetState is the objective's window: its requests and misses, per
// bucket, and the harm of the budgeted runs in flight. Guarded by c.mu.
type budgetState struct {
	total, late [budgetBuckets]float64
	sumTotal    float64
	sumLate     float64
	cur         int   // bucket being filled
	curStart    int64 // its start, on the controller's clock (snapshot.At)
	first       int64 // the first step's time; 0 before it
	committed   float64
	// releasing holds the harm of the budgeted runs over, with when they
	// ended: it stays promised until their victims, which complete just
	// after the hold, are counted among the window's misses.
	releasing  []release
	rate       []float64 // per resource ID−1: its ended users per second (see rateOf)
	rateWeight []float64 // per resource ID−1: the weight the moving mean has gathered
	// nextFit is, per class whose re-execution waits on the budget, when
	// it next fits (the controller's clock); bounded by maxDiagnosed.
	nextFit map[string]int64
	// atLeast is, per class a budgeted run of which was stopped at the
	// limit the budget absorbed, that hold: a lower bound of the class's
	// hold; bounded by maxDiagnosed.
	atLeast map[string]time.Duration
}

// holdOfLocked returns the hold to expect of a run of class: expected,
// or the hold a budgeted run of the class was stopped at, when longer.
func (c *Controller) holdOfLocked(class string, expected time.Duration) time.Duration {
	return max(expected, c.budget.atLeast[class])
}

// noteHoldAtLeastLocked records that a run of class held for hold and
// was not done.
func (c *Controller) noteHoldAtLeastLocked(class string, hold time.Duration) {
	b := &c.budget
	if b.atLeast == nil {
		b.atLeast = map[string]time.Duration{}
	}
	if _, ok := b.atLeast[class]; ok || len(b.atLeast) < maxDiagnosed {
		b.atLeast[class] = max(b.atLeast[class], hold)
	}
}

// release is the harm of a budgeted run over since at.
type release struct {
	victims float64
	at      int64
}

// releaseLocked gives back the harm promised to a budgeted run that is
// over, once its victims have had time to be counted (twice the
// objective).
func (c *Controller) releaseLocked(victims float64) {
	c.budget.releasing = append(c.budget.releasing, release{victims, c.clock.Now()})
}

// bucketWidth returns the width of one bucket of the window.
func (c *Controller) bucketWidth() int64 {
	return max(int64(c.cfg.sloWindow)/budgetBuckets, 1)
}

// observeBudgetLocked adds the step's completions to the window.
func (c *Controller) observeBudgetLocked() {
	b := &c.budget
	now := int64(c.snap.At)
	if b.first == 0 {
		b.first, b.curStart = max(now, 1), now
	}
	w := c.bucketWidth()
	for n := 0; now-b.curStart >= w && n <= budgetBuckets; n++ {
		b.cur = (b.cur + 1) % budgetBuckets
		b.curStart += w
		b.sumTotal -= b.total[b.cur]
		b.sumLate -= b.late[b.cur]
		b.total[b.cur], b.late[b.cur] = 0, 0
	}
	if now-b.curStart >= w { // a gap of more than a window
		b.curStart = now
	}
	for len(b.releasing) > 0 && time.Duration(c.clock.Now()-b.releasing[0].at) >= 2*c.cfg.sloTarget {
		b.committed = max(b.committed-b.releasing[0].victims, 0)
		b.releasing = b.releasing[1:]
	}
	lat := &c.snap.Completed.Latency
	n, late := float64(lat.Count()), lat.Above(c.cfg.sloTarget)
	b.total[b.cur] += n
	b.late[b.cur] += late
	b.sumTotal += n
	b.sumLate += late
}

// observeRateLocked updates resource i's rate of ended users, ended of
// them since the last step.
func (c *Controller) observeRateLocked(i int, ended int64) {
	b := &c.budget
	for len(b.rate) <= i {
		b.rate = append(b.rate, 0)
		b.rateWeight = append(b.rateWeight, 0)
	}
	w := c.snap.Window
	if w <= 0 {
		return
	}
	alpha := min(float64(w)/float64(rateSpan), 1)
	b.rate[i] += alpha * (float64(max(ended, 0))/w.Seconds() - b.rate[i])
	b.rateWeight[i] += alpha * (1 - b.rateWeight[i])
}

// rateOf returns resource index i's rate of ended users per second: the
// moving mean, corrected for the weight it has gathered (a mean begun at
// 0 a few seconds ago is not yet the rate).
func (c *Controller) rateOf(i int) float64 {
	b := &c.budget
	if i >= len(b.rate) || b.rateWeight[i] <= 0 {
		return 0
	}
	return b.rate[i] / b.rateWeight[i]
}

// budgetSeen is how much of the window the steps must have seen before
// the rate of its requests, and so its budget, is known.
const budgetSeen = 10 * time.Second

// budgetOf is the window's error budget as the steps have seen it: the
// misses allowed over the window, the misses counted in it, and whether
// enough of it has been seen to tell (budgetSeen, or the whole window
// when shorter). Until a whole window has been seen, the requests of
// the part not seen yet are those of the last budgetSeen's rate.
func (c *Controller) budgetOf() (allowed, late float64, known bool) {
	b := &c.budget
	now := int64(c.snap.At)
	seen := time.Duration(min(now-b.first, int64(c.cfg.sloWindow)))
	if b.first == 0 || seen < min(budgetSeen, c.cfg.sloWindow) || b.sumTotal <= 0 {
		return 0, max(b.sumLate, 0), false
	}
	requests := b.sumTotal
	if rest := c.cfg.sloWindow - seen; rest > 0 {
		// The last budgetSeen's buckets (the current one partly filled).
		k := max(int(int64(budgetSeen)/c.bucketWidth()), 1)
		var recent float64
		for j := range k {
			recent += b.total[(b.cur-j+budgetBuckets)%budgetBuckets]
		}
		span := time.Duration(int64(k-1)*c.bucketWidth() + max(now-b.curStart, 1))
		requests += recent / span.Seconds() * rest.Seconds()
	}
	return (1 - c.cfg.sloQuantile) * requests, max(b.sumLate, 0), true
}

// harm is what a run holding used for hold is expected to cost the
// objective: the requests it delays past their objective, and the
// contended lock it costs most on (nil: none, the budget does not apply).
type harm struct {
	victims float64
	res     string
	rate    float64 // the users per second of res
	// limit is, for a run admitted on the budget, the longest hold the
	// budget absorbs: a run still going then is stopped.
	limit time.Duration
	// left and allowed are the budget left for it and the window's
	// budget when it was admitted.
	left, allowed float64
}

// harmLocked returns the expected harm of a run holding used for hold.
func (c *Controller) harmLocked(used []usedRes, hold time.Duration) harm {
	var h harm
	var most float64
	over := hold - c.cfg.sloTarget
	if over <= 0 {
		return h
	}
	for _, u := range used {
		i := int(u.id) - 1
		if i < 0 || i >= len(c.snap.Resources) {
			continue
		}
		r := &c.snap.Resources[i]
		if r.Kind != KindLock {
			continue
		}
		rate := c.rateOf(i)
		v := rate * over.Seconds()
		h.victims += v
		if h.res == "" || v > most {
			h.res, h.rate, most = r.Name, rate, v
		}
	}
	return h
}

// budgetFitsLocked reports whether the error budget absorbs the harm of a
// run of class holding used for hold, reserving it when it does; never
// is set, with why, when its harm exceeds what a whole window allows.
// ok and never are both false when the budget does not apply (no lock
// held past the objective, or the window not seen long enough).
func (c *Controller) budgetFitsLocked(class string, used []usedRes, hold time.Duration) (ok, never bool, h harm, why string) {
	h = c.harmLocked(used, hold)
	allowed, late, known := c.budgetOf()
	if h.res == "" || !known {
		return false, false, h, ""
	}
	share := budgetShare * allowed
	if h.victims > share {
		return false, true, h, c.budgetAdviceLocked(class, h, "about "+hold.Round(time.Millisecond).String(), allowed, share)
	}
	left := share - late - c.budget.committed
	if h.victims > left {
		return false, false, h, fmt.Sprintf("the error budget left (%.0f of %.0f misses, %.0f spent, %.0f promised) cannot absorb the %.0f requests a hold of %v of %s delays",
			max(left, 0), share, late, c.budget.committed, h.victims, hold.Round(time.Millisecond), h.res)
	}
	c.budget.committed += h.victims
	h.limit = c.cfg.sloTarget + time.Duration(left/max(h.rate, 1e-9)*float64(time.Second))
	h.left, h.allowed = left, allowed
	return true, false, h, ""
}

// budgetAdviceLocked says why a run of class, of harm h for a hold
// described by hold, does not fit the error budget (allowed misses over
// the window, left of them for it), and what would make it fit.
func (c *Controller) budgetAdviceLocked(class string, h harm, hold string, allowed, left float64) string {
	share := budgetShare * allowed
	fit := c.cfg.sloTarget + time.Duration(share/max(h.rate, 1e-9)*float64(time.Second))
	window := time.Duration(h.victims / budgetShare / max(allowed/c.cfg.sloWindow.Seconds(), 1e-9) * float64(time.Second))
	of := fmt.Sprintf("the %.0f misses of the error budget it may spend", share)
	if left < share {
		of = fmt.Sprintf("the %.0f misses left of the %.0f of the error budget it may spend", max(left, 0), share)
	}
	return fmt.Sprintf("class %q holds the lock %s for %s; at the %.0f/s its other users arrive, that delays about %.0f of them past the objective %v, more than %s (half of the %.0f of p%s over %v); it fits with a hold under %v (split the work into chunks, each taking the lock anew: `moirai vet` points at the loop), or an objective window of %v or more",
		class, h.res, hold, h.rate, h.victims, c.cfg.sloTarget, of, allowed,
		quantileName(c.cfg.sloQuantile), c.cfg.sloWindow, fit.Round(time.Millisecond), window.Round(time.Second))
}

// nextFitLocked returns how long until the misses aging out of the window
// leave room for victims more (with what is promised), or the window's
// length when they never would.
func (c *Controller) nextFitLocked(victims float64) time.Duration {
	allowed, late, known := c.budgetOf()
	share := budgetShare * allowed
	if !known || victims > share {
		return c.cfg.sloWindow
	}
	b := &c.budget
	excess := late + b.committed + victims - share
	if excess <= 0 {
		return 0
	}
	w := c.bucketWidth()
	// The oldest bucket is the one after cur; it leaves the window a
	// bucket's width after the newest began, and so on.
	for k := 1; k <= budgetBuckets; k++ {
		i := (b.cur + k) % budgetBuckets
		excess -= b.late[i]
		if excess <= 0 {
			left := b.curStart + int64(k)*w - int64(c.snap.At)
			return time.Duration(max(left, 0))
		}
	}
	return c.cfg.sloWindow
}

// quantileName writes q as a percentile: 0.99 → "99", 0.999 → "99.9".
func quantileName(q float64) string {
	s := fmt.Sprintf("%.3f", math.Round(q*1e5)/1e3)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}
