package admit

import "time"

// Constants of the level's controller (see levelCtl).
const (
	// maxClimb bounds a blind step up of the level: four user levels,
	// about 3 % of a business priority's users.
	maxClimb = UserLevels / 32
	// holdNum/holdDen: a calm window whose mean queueing time is above
	// this fraction of the threshold holds the level, and an overloaded
	// one drains the backlog beyond it.
	holdNum, holdDen = 3, 4
	// smoothing: the rate the server starts while overloaded is a moving
	// average over about this many windows.
	smoothing = 4
	// rateSmoothing: the arrival rates per level, of first calls only,
	// which move only with the demand, are moving averages over about
	// this many windows; so are the calls per task, long enough to span a
	// task's calls.
	rateSmoothing = 16
	// drainWindows: after an overloaded window, the backlog is drained
	// over about this many windows, and drainMax thresholds at most.
	drainWindows = 4
	drainMax     = 20
)

// A window is what closeWindow learned in one window.
type window struct {
	hist    *[levels]uint32 // first calls (tasks) arrived, by priority index
	started int64           // requests started
	conts   int64           // continuations the level admitted
	mean    time.Duration   // their mean queueing time
	dur     time.Duration   // the window's length
}

// levelCtl moves the admission level from window to window: DAGOR's
// Algorithm 1, with these changes, each measured in the dagor suite
// (docs/ADMISSION.md, "Design"):
//
//   - Fractional level. The level is kept as a fractional index (pos);
//     requests are admitted up to its floor. Within a business priority
//     the keyed hash spreads users uniformly over the user levels, so the
//     arrivals at the levels admitted are read as a rate per user level (a
//     moving average over windows, not one window's lumpy histogram), and
//     the level moves by what the rates say, even by less than one user
//     level: at four times the capacity one user level is 3 % of the
//     capacity, more than β.
//   - Cut to the capacity. After an overloaded window the level admits
//     (1−α) times what the server started in the window (its capacity,
//     since it had a queue), less the backlog beyond 3/4 of the threshold
//     spread over a few windows, not (1−α) times what the level admitted:
//     from ten times the capacity the paper's rule needs forty windows, and
//     every one of them builds the queue further. α applies in full from
//     twice the threshold and in proportion below: a window just over the
//     threshold is a queue building slowly, and a cut of α, plus the
//     backlog, is two or three user levels at four times the capacity.
//     The level never rises after an overloaded window.
//   - Draining. While an overloaded window's mean queueing time is at least
//     a fifth below the previous overloaded window's, the level holds: the
//     delay of the requests started now reflects the backlog built before
//     the last cut, which is taking effect.
//   - Holding. A calm window whose mean queueing time is above 3/4 of
//     the threshold holds the level: the queue is building, and climbing
//     on would only make the next cut deeper.
//   - Calm without evidence. The paper's rule picks the level whose
//     cumulative arrivals reach (1+β) times what the current level
//     admitted. Under DAGOR's own cooperation nothing above the level
//     arrives (callers shed it locally), no level reaches that, and the
//     paper's rule opens the door completely: measured in the suite, the
//     server flooded and the level swung between fully open and the
//     overload point. Here the level then climbs to the larger of (1+β)
//     times the admitted rate and (1−β) times the rate the server started
//     at in overloaded windows, mapped to a level by the rates per level;
//     before any of that is known, or from the last user level of a
//     business priority, by a blind step that doubles from one user level
//     up to maxClimb. When the window did see demand above the
//     level, the paper's rule applies, counting only levels where requests
//     arrived.
//   - Tasks, not calls. The histogram holds first calls only (see
//     [DAGOR.AdmitContinuation]), whose rate per level moves only with the
//     demand, so it is averaged over rateSmoothing windows; the rates the
//     server starts are divided by the calls per task (all calls admitted
//     over first calls admitted, moving averages) before they are mapped
//     to a level. Without continuations that is 1.
//
// It keeps at least the most important level open.
type levelCtl struct {
	pos       float64       // the level, fractional; the admitted index is its floor
	climb     int32         // the next blind step up, in user levels
	lastDelay time.Duration // the last overloaded window's mean queueing time (0: calm)
	capRate   float64       // requests started per ns in overloaded windows (moving average; 0: none yet)
	start     time.Duration // when the current window opened
	// Arrival rates (per ns) at the levels admitted, moving averages over
	// windows: hi of the business priorities above pos's, per of one user
	// level of pos's. perB is the index of that business priority's first
	// level (-1: none yet).
	hi, per float64
	perB    int32
	// calls and firsts: calls admitted (first calls and continuations)
	// and first calls admitted, per window, moving averages.
	calls, firsts float64
}

func (c *levelCtl) init() { c.pos, c.perB = levels-1, -1 }

// learn folds the arrivals of window w at the levels up to cur into the
// rates hi and per.
func (c *levelCtl) learn(w *window, cur int32) {
	if w.dur <= 0 {
		return
	}
	b0 := businessStart(cur)
	var hi, at float64
	for i := int32(0); i < b0; i++ {
		hi += float64(w.hist[i])
	}
	for i := b0; i <= cur; i++ {
		at += float64(w.hist[i])
	}
	hi /= float64(w.dur)
	per := at / float64(w.dur) / float64(cur-b0+1)
	if c.perB != b0 {
		c.hi, c.per, c.perB = hi, per, b0
		return
	}
	c.hi += (hi - c.hi) / rateSmoothing
	c.per += (per - c.per) / rateSmoothing
}

// next returns the level after window w.
func (c *levelCtl) next(w *window, cfg *dagorConfig) int32 {
	cur := int32(c.pos)
	over := w.started > 0 && w.mean > cfg.threshold
	hold := cfg.threshold * holdNum / holdDen
	queued := w.started > 0 && w.mean > hold
	draining := over && c.lastDelay > 0 && w.mean < c.lastDelay*4/5
	if over {
		c.lastDelay = w.mean
	} else {
		c.lastDelay = 0
	}
	var rate float64 // started per ns
	if w.dur > 0 {
		rate = float64(w.started) / float64(w.dur)
	}
	if over && rate > 0 {
		if c.capRate == 0 {
			c.capRate = rate
		} else {
			c.capRate += (rate - c.capRate) / smoothing
		}
	}
	c.learn(w, cur)
	var admitted float64 // first calls admitted
	for i := int32(0); i <= cur; i++ {
		admitted += float64(w.hist[i])
	}
	k := c.callsPerTask(admitted, w.conts)
	if draining {
		return cur
	}
	if over {
		c.climb = 1
		// α of the rate, in full from twice the threshold
		excess := min(1, float64(w.mean-cfg.threshold)/float64(cfg.threshold))
		target := rate * (1 - cfg.alpha*excess)
		if w.dur > 0 {
			horizon := min(drainWindows*w.dur, drainMax*cfg.threshold)
			target -= rate * float64(w.mean-hold) / float64(horizon)
		}
		c.pos = min(c.pos, c.posFor(max(target, 0)/k, cur, w))
		return int32(c.pos)
	}
	if cur == levels-1 || queued {
		c.climb = 1
		return cur
	}
	// the paper's rule, where demand above the level arrived
	target := admitted * (1 + cfg.beta)
	cum, top := admitted, cur
	for i := cur + 1; i < levels; i++ {
		if w.hist[i] == 0 {
			continue
		}
		cum += float64(w.hist[i])
		top = i
		if cum >= target {
			break
		}
	}
	if top > cur {
		c.climb = 1
		c.pos = float64(top)
		return top
	}
	if top := businessStart(cur) + UserLevels - 1; c.capRate > 0 && c.per > 0 && w.dur > 0 && cur < top {
		c.climb = 1
		// β more than the fractional level admits, or (1−β) of the capacity
		b0 := float64(businessStart(cur))
		up := c.pos + cfg.beta*(c.hi/c.per+c.pos-b0+1)
		c.pos = min(max(up, c.posFor(c.capRate*(1-cfg.beta)/k, cur, w)), float64(top))
		return int32(c.pos)
	}
	step := max(c.climb, 1)
	c.climb = min(2*step, maxClimb)
	c.pos = float64(min(cur+step, levels-1))
	return int32(c.pos)
}

// callsPerTask folds a window's first calls and continuations admitted
// at the level into the moving averages of calls and first calls, and
// returns their ratio: the calls a task admitted brings, at least 1.
// (Continuations the grace admits belong to tasks above the level, whose
// first calls are not counted either.)
func (c *levelCtl) callsPerTask(firsts float64, conts int64) float64 {
	// Both averages start at zero and are never seeded from one window,
	// which would weigh the first windows (few continuations yet) for
	// seconds; their ratio weighs every window as the average does.
	calls := firsts + float64(conts)
	c.calls += (calls - c.calls) / rateSmoothing
	c.firsts += (firsts - c.firsts) / rateSmoothing
	if c.firsts <= 0 || c.calls <= c.firsts {
		return 1
	}
	return c.calls / c.firsts
}

// posFor returns the fractional level whose admitted arrivals would come
// at rate r (per ns): from the rates learned at cur's business priority,
// or from the histogram of w where r is below what the business
// priorities above it bring. It is at most the last level of cur's
// business priority: the rates of the next one are not known.
func (c *levelCtl) posFor(r float64, cur int32, w *window) float64 {
	b0 := businessStart(cur)
	if c.per > 0 && r > c.hi {
		return min(float64(b0)-1+(r-c.hi)/c.per, float64(b0+UserLevels-1))
	}
	return admitting(w.hist, cur, r*float64(w.dur))
}

// businessStart is the index of the first level of i's business priority.
func businessStart(i int32) int32 { return i / UserLevels * UserLevels }

// admitting returns the fractional level at or below cur at which target
// of the arrivals in hist would have been admitted, spreading each business
// priority's arrivals uniformly over the user levels that were admitted. It
// is at least 0.
func admitting(hist *[levels]uint32, cur int32, target float64) float64 {
	var cum float64
	for b0 := int32(0); b0 <= cur; b0 += UserLevels {
		top := min(b0+UserLevels-1, cur)
		var n float64
		for i := b0; i <= top; i++ {
			n += float64(hist[i])
		}
		if cum+n > target {
			users := float64(top - b0 + 1)
			return max(float64(b0)-1+(target-cum)/n*users, 0)
		}
		cum += n
	}
	return float64(cur)
}
