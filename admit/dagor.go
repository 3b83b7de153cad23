package admit

import (
	mathbits "math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moirai-go/moirai/task"
)

// Defaults of [NewDAGOR], DAGOR's (SoCC'18 §4).
const (
	DefaultWindow      = time.Second
	DefaultWindowCount = 2000
	DefaultThreshold   = 20 * time.Millisecond
	DefaultAlpha       = 0.05
	DefaultBeta        = 0.01
	// DefaultGrace is how long after a cut continuations are still
	// admitted at the level before it (see [DAGOR.AdmitContinuation]).
	DefaultGrace = time.Second
)

// Sizes of the compound admission level.
const (
	// BusinessLevels is the number of business priorities; business
	// priorities at or above it count as the lowest.
	BusinessLevels = 64
	// UserLevels is the number of user priorities (DAGOR's 128).
	UserLevels = 128
	levels     = BusinessLevels * UserLevels
)

// A Level is a compound admission level (B, U): a request of priority
// (b, u) is admitted when b < B, or b == B and u <= U. The zero Level admits
// only the most important requests; [AdmitAll] admits everything.
type Level struct {
	Business uint8
	User     uint8
}

// AdmitAll is the level of a server that is not overloaded.
var AdmitAll = Level{Business: BusinessLevels - 1, User: UserLevels - 1}

func (l Level) index() int32 { return int32(l.Business)*UserLevels + int32(l.User) }

func levelOf(i int32) Level {
	return Level{Business: uint8(i / UserLevels), User: uint8(i % UserLevels)}
}

// Admits reports whether a request of priority p passes level l.
func (l Level) Admits(p task.Priority) bool { return prioIndex(p) <= l.index() }

func prioIndex(p task.Priority) int32 {
	b, u := int32(p.Business), int32(p.User)
	if b >= BusinessLevels {
		b = BusinessLevels - 1
	}
	if u >= UserLevels {
		u = UserLevels - 1
	}
	return b*UserLevels + u
}

// dagorConfig is what Options set.
type dagorConfig struct {
	window      time.Duration
	windowCount int64
	threshold   time.Duration
	alpha, beta float64
	grace       time.Duration
	regular     func(bool)
}

// An Option configures [NewDAGOR].
type Option func(*dagorConfig)

// WithWindow sets the detection window: it closes after d or after n
// started requests, whichever comes first (1 s and 2,000 by default).
// Non-positive values leave the defaults.
func WithWindow(d time.Duration, n int) Option {
	return func(c *dagorConfig) {
		if d > 0 {
			c.window = d
		}
		if n > 0 {
			c.windowCount = int64(n)
		}
	}
}

// WithThreshold sets the average queueing time above which a window
// counts as overloaded (20 ms by default). A non-positive d leaves it.
func WithThreshold(d time.Duration) Option {
	return func(c *dagorConfig) {
		if d > 0 {
			c.threshold = d
		}
	}
}

// WithSteps sets α, the fraction by which the admitted load shrinks
// after an overloaded window, and β, the fraction by which it grows after
// a calm one (5 % and 1 % by default). Values outside (0, 1) leave them.
func WithSteps(alpha, beta float64) Option {
	return func(c *dagorConfig) {
		if alpha > 0 && alpha < 1 {
			c.alpha = alpha
		}
		if beta > 0 && beta < 1 {
			c.beta = beta
		}
	}
}

// WithGrace sets how long after the level falls a continuation (a
// call of a task that an earlier call already got through, see
// [DAGOR.AdmitContinuation]) is still admitted at the level before the
// fall (1 s by default, about a request's deadline). A negative d turns
// continuations off: they are admitted as any request; 0 leaves the
// default.
func WithGrace(d time.Duration) Option {
	return func(c *dagorConfig) {
		if d != 0 {
			c.grace = max(d, 0)
		}
	}
}

// WithOverloadHook sets a function called at the end of every window
// with whether the window was overloaded. It is how a controller learns that
// the server is in "regular" overload (queueing, not a contended resource);
// see moirai.WithRegularOverload.
func WithOverloadHook(f func(overloaded bool)) Option {
	return func(c *dagorConfig) { c.regular = f }
}

// DAGOR is the server side of DAGOR's priority-based admission control
// (Zhou et al., "Overload Control for Scaling WeChat Microservices",
// SoCC 2018, §4). Overload is detected from the average queueing time of
// the requests started in a window; the admission level is moved by the
// priorities of the tasks that arrived in the last windows (first calls;
// see [DAGOR.AdmitContinuation]) so that after an overloaded window it
// admits (1−α) of what the server started, and after a calm one β more,
// or again what the server served while overloaded (see levelCtl in the
// source for where and why this departs from the paper).
//
// The check at arrival, [DAGOR.AdmitPriority], is one atomic load, a
// compare and one atomic add to the histogram.
type DAGOR struct {
	cfg dagorConfig

	level atomic.Int32 // index of the current Level
	// the highest level a cut of the last grace period fell from, and
	// until when continuations are admitted at it (see updateGrace)
	graceLevel atomic.Int32
	graceUntil atomic.Int64
	windowEnd  atomic.Int64 // now at which the window closes by time

	// the current window
	count atomic.Int64 // started requests
	delay atomic.Int64 // their summed queueing delay, ns
	hist  [levels]atomic.Uint32
	// touched has bit i set when hist[i] may be non-zero, so that closing
	// a window swaps the few bins that arrived instead of all 8,192.
	touched [levels / 64]atomic.Uint64

	mu         sync.Mutex // closes windows; TryLock so only one closes
	ctl        levelCtl   // under mu
	cuts       [16]cut    // under mu: the last cuts, for the continuations' grace
	cutNext    int        // under mu: where the next cut goes in cuts
	overloaded atomic.Bool
	windows    atomic.Int64
	// rejected counts refused arrivals by business priority (a refusal
	// only: the admitted path pays nothing more).
	rejected [BusinessLevels]atomic.Int64
	// continued counts continuations admitted only by the grace.
	continued atomic.Int64
	// conts counts the continuations the level admitted in the current
	// window (not those only the grace admitted).
	conts atomic.Int64
}

// NewDAGOR returns a DAGOR admitter that admits everything until its first
// overloaded window.
func NewDAGOR(opts ...Option) *DAGOR {
	d := &DAGOR{cfg: dagorConfig{
		window:      DefaultWindow,
		windowCount: DefaultWindowCount,
		threshold:   DefaultThreshold,
		alpha:       DefaultAlpha,
		beta:        DefaultBeta,
		grace:       DefaultGrace,
	}}
	for _, o := range opts {
		o(&d.cfg)
	}
	d.ctl.init()
	d.level.Store(AdmitAll.index())
	d.windowEnd.Store(int64(d.cfg.window))
	return d
}

// Name returns "dagor".
func (d *DAGOR) Name() string { return "dagor" }

// Level returns the current admission level, the one every response
// carries to the server's callers.
func (d *DAGOR) Level() Level { return levelOf(d.level.Load()) }

// Overloaded reports whether the last closed window was overloaded.
func (d *DAGOR) Overloaded() bool { return d.overloaded.Load() }

// Window returns the longest a detection window lasts (see
// [WithWindow]); middleware bounds the queueing delays it reports
// from outside by it.
func (d *DAGOR) Window() time.Duration { return d.cfg.window }

// Admit admits a request of unknown priority, which counts as the lowest.
func (d *DAGOR) Admit(now time.Duration) bool {
	return d.AdmitPriority(now, task.Priority{Business: 255, User: 255})
}

// AdmitPriority reports whether a request of priority p arriving at now may
// enter, and counts it in the histogram of the current window.
func (d *DAGOR) AdmitPriority(now time.Duration, p task.Priority) bool {
	if int64(now) >= d.windowEnd.Load() {
		d.closeWindow(now)
	}
	i := prioIndex(p)
	d.arrive(i)
	if i <= d.level.Load() {
		return true
	}
	d.rejected[i/UserLevels].Add(1)
	return false
}

// arrive adds an arrival of priority index i to the window's histogram.
func (d *DAGOR) arrive(i int32) {
	d.hist[i].Add(1)
	if w, bit := &d.touched[i>>6], uint64(1)<<(i&63); w.Load()&bit == 0 {
		w.Or(bit)
	}
}

// AdmitContinuation is [DAGOR.AdmitPriority] for a call of a task that an
// earlier call already got through (to this server or another): for the
// grace period after the level falls ([WithGrace]), such a call is
// admitted at the level before the fall (the highest such level when the
// level fell more than once in the period). DAGOR gives all the calls of a
// task one priority so that a task is admitted or rejected whole, but that
// holds only while the level stays put: a task of several calls that
// straddles a cut loses its later calls and wastes the work its earlier
// ones did, and the more calls a task makes the more often that happens.
// The middleware sends a call as a continuation when its task was marked
// with [task.Task.MarkAdmittedDownstream], and honours the mark only from
// trusted peers. Continuations never count in the histogram, which holds
// the tasks that arrive: a task's later calls follow its first by up to a
// deadline and come faster as the queue drains, so a histogram of calls
// shows more demand per level while the server drains and less while the
// level climbs, and the level swings. The level is read in tasks, and
// what a task costs the server is learned from the continuations admitted.
func (d *DAGOR) AdmitContinuation(now time.Duration, p task.Priority) bool {
	if int64(now) >= d.windowEnd.Load() {
		d.closeWindow(now)
	}
	i := prioIndex(p)
	if i <= d.level.Load() {
		d.conts.Add(1)
		return true
	}
	if int64(now) < d.graceUntil.Load() && i <= d.graceLevel.Load() {
		d.continued.Add(1)
		return true
	}
	d.rejected[i/UserLevels].Add(1)
	return false
}

// Continued returns how many continuations were admitted only by the
// grace (see [DAGOR.AdmitContinuation]).
func (d *DAGOR) Continued() int64 { return d.continued.Load() }

// RejectedInto stores in dst the arrivals refused since d was made, by
// business priority (index b holds priority b's; arrivals without a
// priority count as the lowest, BusinessLevels − 1).
func (d *DAGOR) RejectedInto(dst *[BusinessLevels]int64) {
	for b := range dst {
		dst[b] = d.rejected[b].Load()
	}
}

// Started records the queueing delay of a request a worker took; DAGOR
// never drops at dequeue.
func (d *DAGOR) Started(now, queueDelay time.Duration) bool {
	d.delay.Add(int64(queueDelay))
	if d.count.Add(1) >= d.cfg.windowCount || int64(now) >= d.windowEnd.Load() {
		d.closeWindow(now)
	}
	return true
}

// Done does nothing: DAGOR learns from queueing delays only.
func (d *DAGOR) Done(now, service time.Duration) {}

// closeWindow ends the current window at now and moves the level.
func (d *DAGOR) closeWindow(now time.Duration) {
	if !d.mu.TryLock() {
		return
	}
	defer d.mu.Unlock()
	n := d.count.Swap(0)
	sum := d.delay.Swap(0)
	if n < d.cfg.windowCount && int64(now) < d.windowEnd.Load() {
		// another goroutine closed it already; put the counts back
		d.count.Add(n)
		d.delay.Add(sum)
		return
	}
	d.windowEnd.Store(int64(now + d.cfg.window))
	var mean int64
	if n > 0 {
		mean = sum / n
	}
	w := window{
		conts:   d.conts.Swap(0),
		started: n,
		mean:    time.Duration(mean),
		dur:     now - d.ctl.start,
	}
	d.ctl.start = now
	over := n > 0 && w.mean > d.cfg.threshold
	d.overloaded.Store(over)
	d.windows.Add(1)

	var hist [levels]uint32
	for w := range d.touched {
		for bits := d.touched[w].Swap(0); bits != 0; bits &= bits - 1 {
			i := w<<6 | mathbits.TrailingZeros64(bits)
			hist[i] = d.hist[i].Swap(0)
		}
	}
	w.hist = &hist
	prev := d.level.Load()
	next := d.ctl.next(&w, &d.cfg)
	d.level.Store(next)
	if d.cfg.grace > 0 {
		d.updateGrace(now, prev, next)
	}
	if d.cfg.regular != nil {
		d.cfg.regular(over)
	}
}

// updateGrace records a cut from prev to next at now and sets the level
// continuations are admitted at: the highest level any cut of the last
// grace period fell from. A task admitted before two cuts in a row is
// still let through; the level, recomputed at every window's close, may
// outlive its cut's grace by up to a window.
func (d *DAGOR) updateGrace(now time.Duration, prev, next int32) {
	if next < prev {
		d.cuts[d.cutNext%len(d.cuts)] = cut{at: now, from: prev}
		d.cutNext++
	}
	level, until := int32(-1), time.Duration(0)
	for _, c := range d.cuts[:min(d.cutNext, len(d.cuts))] {
		if now-c.at < d.cfg.grace && c.from > level {
			level, until = c.from, c.at+d.cfg.grace
		}
	}
	if level < 0 {
		d.graceUntil.Store(0)
		return
	}
	d.graceLevel.Store(level)
	d.graceUntil.Store(int64(until))
}

// A cut is a fall of the level, for the continuations' grace.
type cut struct {
	at   time.Duration
	from int32
}

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
