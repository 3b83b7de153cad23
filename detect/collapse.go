package detect

import (
	"fmt"
	"time"

	"github.com/moirai-go/moirai/internal/opt"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/snapshot"
)

// Collapse fires when the throughput of the last second falls below a
// fraction of the best one-second throughput of a recent horizon while
// requests are waiting. See the package documentation.
//
// A Collapse is not safe for concurrent use.
type Collapse struct {
	frac float64
	collapseConfig
	steps  []collapseStep // oldest first, over the horizon
	recent float64
}

type collapseStep struct {
	at    time.Duration
	ended uint64
	rate  float64 // throughput over the span ending here; -1 until a span is covered
}

// CollapseOption configures [NewCollapse]. CollapseOptions are made by the
// With functions; they set an unexported configuration, which NewCollapse
// applies to the detector it returns once all of them ran.
type CollapseOption func(*collapseConfig)

// collapseConfig is what the CollapseOptions set.
type collapseConfig struct {
	span    time.Duration // the throughput's averaging span (1 s)
	horizon time.Duration // how far back "recent best" looks
	minRate float64
}

// WithHorizon sets how far back the best throughput is looked for (default
// 10 s, at least twice the span).
func WithHorizon(d time.Duration) CollapseOption {
	return func(c *collapseConfig) { c.horizon = d }
}

// WithSpan sets the span throughput is averaged over (default 1 s, at
// least 10 ms).
func WithSpan(d time.Duration) CollapseOption {
	return func(c *collapseConfig) { c.span = max(d, 10*time.Millisecond) }
}

// WithMinRate sets the best throughput, in completions per second, below
// which the detector never fires (default 10): a service that was never
// busy cannot collapse.
func WithMinRate(r float64) CollapseOption {
	return func(c *collapseConfig) { opt.Set(&c.minRate, r, r >= 0) }
}

// NewCollapse returns the detector that fires when throughput falls below
// frac of the recent best (the Atropos code uses one half). It panics if
// frac is not in (0, 1).
func NewCollapse(frac float64, opts ...CollapseOption) *Collapse {
	if !(frac > 0 && frac < 1) {
		panic(fmt.Sprintf("detect: collapse fraction %v not in (0, 1)", frac))
	}
	c := collapseConfig{span: time.Second, horizon: 10 * time.Second, minRate: 10}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	c.horizon = max(c.horizon, 2*c.span)
	return &Collapse{frac: frac, collapseConfig: c}
}

var (
	_ policy.Detector = (*Collapse)(nil)
	_ policy.Observer = (*Collapse)(nil)
)

// Name returns "collapse".
func (c *Collapse) Name() string { return "collapse" }

// Observe records a snapshot's completions.
func (c *Collapse) Observe(s *snapshot.Snapshot) {
	ended := s.Completed.Ended
	if s.Window <= 0 {
		ended = 0 // cumulative: belongs to no window
	}
	// Snapshots closer together than a tenth of the span share a step, so
	// the horizon holds a bounded number of steps whatever the loop's tick.
	if n := len(c.steps); n > 1 && s.At-c.steps[n-2].at < c.span/10 {
		st := &c.steps[n-1]
		st.at = max(st.at, s.At)
		st.ended += ended
		st.rate = -1
	} else {
		c.steps = append(c.steps, collapseStep{at: s.At, ended: ended, rate: -1})
	}
	// Throughput over the span ending now: completions of the steps after
	// the one at or before now−span.
	var n uint64
	covered := false
	for i := len(c.steps) - 1; i >= 1; i-- {
		n += c.steps[i].ended
		if s.At-c.steps[i-1].at >= c.span {
			covered = true
			d := s.At - c.steps[i-1].at
			c.steps[len(c.steps)-1].rate = float64(n) / d.Seconds()
			break
		}
	}
	if covered {
		c.recent = c.steps[len(c.steps)-1].rate
	} else {
		c.recent = -1
	}
	for len(c.steps) > 1 && s.At-c.steps[0].at > c.horizon {
		c.steps = c.steps[1:]
	}
	if cap(c.steps) > 4*len(c.steps)+64 {
		c.steps = append([]collapseStep(nil), c.steps...)
	}
}

// Rates returns the throughput over the last span and the best one-span
// throughput of the horizon, in completions per second; recent is −1
// until the observed snapshots cover a span.
func (c *Collapse) Rates() (recent, best float64) {
	for _, st := range c.steps {
		best = max(best, st.rate)
	}
	return c.recent, best
}

// Collapsed reports whether the throughput of the last span is below the
// detector's fraction of the recent best, the best being at least the
// minimum rate: the throughput half of Detect, without its requirement
// that a request wait (an observer from outside a server, such as moirai
// guard, sees no wait when the victims are slowed rather than blocked).
func (c *Collapse) Collapsed() bool {
	recent, best := c.Rates()
	return recent >= 0 && best >= c.minRate && recent < c.frac*best
}

// Detect reports whether throughput collapsed with requests waiting.
func (c *Collapse) Detect(s *snapshot.Snapshot) (bool, string) {
	if !c.Collapsed() {
		return false, ""
	}
	_, best := c.Rates()
	waiting := 0
	for i := range s.Tasks {
		if t := &s.Tasks[i]; t.HasObjective() && !t.Cancelled && waits(s, t) {
			waiting++
		}
	}
	if waiting == 0 {
		return false, ""
	}
	return true, fmt.Sprintf("throughput %.0f/s below %.0f%% of the recent best %.0f/s with %d request(s) waiting for a resource",
		c.recent, 100*c.frac, best, waiting)
}

// waits reports whether live task t waits for a resource now.
func waits(s *snapshot.Snapshot, t *snapshot.Task) bool {
	first, n := int(t.First), int(t.N)
	if first < 0 || n <= 0 || first+n > len(s.Usage) {
		return false
	}
	for _, u := range s.Usage[first : first+n] {
		if u.Waiting > 0 {
			return true
		}
	}
	return false
}
