package admit

import (
	mathbits "math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moirai-go/moirai/task"
)

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
