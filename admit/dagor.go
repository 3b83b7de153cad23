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
	DefaultDAGORWindow      = time.Second
	DefaultDAGORWindowCount = 2000
	DefaultDAGORThreshold   = 20 * time.Millisecond
	DefaultDAGORAlpha       = 0.05
	DefaultDAGORBeta        = 0.01
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

// dagorConfig is what DAGOROptions set.
type dagorConfig struct {
	window      time.Duration
	windowCount int64
	threshold   time.Duration
	alpha, beta float64
	regular     func(bool)
}

// A DAGOROption configures [NewDAGOR].
type DAGOROption func(*dagorConfig)

// WithDAGORWindow sets the detection window: it closes after d or after n
// started requests, whichever comes first (1 s and 2,000 by default).
// Non-positive values leave the defaults.
func WithDAGORWindow(d time.Duration, n int) DAGOROption {
	return func(c *dagorConfig) {
		if d > 0 {
			c.window = d
		}
		if n > 0 {
			c.windowCount = int64(n)
		}
	}
}

// WithDAGORThreshold sets the average queueing time above which a window
// counts as overloaded (20 ms by default). A non-positive d leaves it.
func WithDAGORThreshold(d time.Duration) DAGOROption {
	return func(c *dagorConfig) {
		if d > 0 {
			c.threshold = d
		}
	}
}

// WithDAGORSteps sets α, the fraction by which the admitted load shrinks
// after an overloaded window, and β, the fraction by which it grows after
// a calm one (5 % and 1 % by default). Values outside (0, 1) leave them.
func WithDAGORSteps(alpha, beta float64) DAGOROption {
	return func(c *dagorConfig) {
		if alpha > 0 && alpha < 1 {
			c.alpha = alpha
		}
		if beta > 0 && beta < 1 {
			c.beta = beta
		}
	}
}

// WithDAGOROverloadHook sets a function called at the end of every window
// with whether the window was overloaded. It is how a controller learns that
// the server is in "regular" overload (queueing, not a contended resource);
// see moirai.WithRegularOverload.
func WithDAGOROverloadHook(f func(overloaded bool)) DAGOROption {
	return func(c *dagorConfig) { c.regular = f }
}

// DAGOR is the server side of DAGOR's priority-based admission control
// (Zhou et al., "Overload Control for Scaling WeChat Microservices",
// SoCC 2018, §4). Overload is detected from the average queueing time of
// the requests started in a window; the admission level is moved by the
// histogram of the priorities that arrived in the last window so that the
// admitted load shrinks by α after an overloaded window and grows by β
// after a calm one.
//
// The check at arrival, [DAGOR.AdmitPriority], is one atomic load, a
// compare and one atomic add to the histogram.
type DAGOR struct {
	cfg dagorConfig

	level     atomic.Int32 // index of the current Level
	windowEnd atomic.Int64 // now at which the window closes by time

	// the current window
	count atomic.Int64 // started requests
	delay atomic.Int64 // their summed queueing delay, ns
	hist  [levels]atomic.Uint32
	// touched has bit i set when hist[i] may be non-zero, so that closing
	// a window swaps the few bins that arrived instead of all 8,192.
	touched [levels / 64]atomic.Uint64

	mu         sync.Mutex // closes windows; TryLock so only one closes
	climb      int32      // under mu: the next blind step up (see nextLevel)
	lastDelay  int64      // under mu: the last window's mean queueing delay, ns (0: calm)
	overloaded atomic.Bool
	windows    atomic.Int64
	// rejected counts refused arrivals by business priority (a refusal
	// only: the admitted path pays nothing more).
	rejected [BusinessLevels]atomic.Int64
}

// NewDAGOR returns a DAGOR admitter that admits everything until its first
// overloaded window.
func NewDAGOR(opts ...DAGOROption) *DAGOR {
	d := &DAGOR{cfg: dagorConfig{
		window:      DefaultDAGORWindow,
		windowCount: DefaultDAGORWindowCount,
		threshold:   DefaultDAGORThreshold,
		alpha:       DefaultDAGORAlpha,
		beta:        DefaultDAGORBeta,
	}}
	for _, o := range opts {
		o(&d.cfg)
	}
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
	d.hist[i].Add(1)
	if w, bit := &d.touched[i>>6], uint64(1)<<(i&63); w.Load()&bit == 0 {
		w.Or(bit)
	}
	if i <= d.level.Load() {
		return true
	}
	d.rejected[i/UserLevels].Add(1)
	return false
}

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
	over := n > 0 && time.Duration(mean) > d.cfg.threshold
	// Draining: still above the threshold, but the queueing time fell by
	// at least a fifth since the last overloaded window. The level cut
	// then is taking effect; the delay of the requests started now
	// reflects the backlog built before it, and cutting again would
	// overshoot far below the capacity.
	draining := over && d.lastDelay > 0 && mean < d.lastDelay*4/5
	if over {
		d.lastDelay = mean
	} else {
		d.lastDelay = 0
	}
	d.overloaded.Store(over)
	d.windows.Add(1)

	var hist [levels]uint32
	for w := range d.touched {
		for bits := d.touched[w].Swap(0); bits != 0; bits &= bits - 1 {
			i := w<<6 | mathbits.TrailingZeros64(bits)
			hist[i] = d.hist[i].Swap(0)
		}
	}
	if !draining {
		d.level.Store(nextLevel(&hist, d.level.Load(), over, d.cfg.alpha, d.cfg.beta, &d.climb))
	}
	if d.cfg.regular != nil {
		d.cfg.regular(over)
	}
}

// maxClimb bounds a blind step up of the level: four user levels, about
// 3 % of a business priority's users, so that a step into demand the
// server cannot see adds little more than the β the histogram rule would.
const maxClimb = UserLevels / 32

// nextLevel is DAGOR's Algorithm 1: from the counts of the priorities that
// arrived in the last window, the level whose admitted load is (1−α) times
// the load admitted at level cur when overloaded, (1+β) times otherwise.
// It keeps at least the most important level open.
//
// When calm, it moves to the lowest level whose admitted load reaches
// (1+β) times the current one, counting only the levels where requests
// arrived. When none does, the window carries no evidence of the demand
// above the level: nothing was rejected, either because there is no such
// demand or because callers shed it locally on the level they cached, so
// that it never arrived (DAGOR's cooperation hides exactly the demand the
// histogram would need). The paper's rule then opens the door completely,
// which under cooperation floods the server and makes the level oscillate
// between fully open and the overload point. Here the level instead climbs
// blindly by a step that doubles with every such window, from one level up
// to maxClimb, and starts over at one after an overloaded window or a
// window that saw the demand above it.
func nextLevel(hist *[levels]uint32, cur int32, over bool, alpha, beta float64, climb *int32) int32 {
	var admitted float64
	for i := int32(0); i <= cur; i++ {
		admitted += float64(hist[i])
	}
	if over {
		*climb = 1
		target := admitted * (1 - alpha)
		var cum float64
		next := int32(0)
		for i := int32(0); i < levels; i++ {
			cum += float64(hist[i])
			if cum > target {
				break
			}
			next = i
		}
		if next >= cur && cur > 0 {
			next = cur - 1
		}
		return next
	}
	if cur == levels-1 {
		return cur
	}
	target := admitted * (1 + beta)
	cum, top := admitted, cur
	for i := cur + 1; i < levels; i++ {
		if hist[i] == 0 {
			continue
		}
		cum += float64(hist[i])
		top = i
		if cum >= target {
			*climb = 1
			return i
		}
	}
	if top > cur {
		// Demand above, all of it within (1+β): admit all of it.
		*climb = 1
		return top
	}
	step := max(*climb, 1)
	*climb = min(2*step, maxClimb)
	return min(cur+step, levels-1)
}
