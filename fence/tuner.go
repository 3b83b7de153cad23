package fence

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/moirai-go/moirai/internal/opt"
)

// A TunerOption configures a Tuner.
type TunerOption func(*tunerConfig)

type tunerConfig struct {
	model      SCT
	tick       time.Duration
	interval   time.Duration
	perLevel   int
	maxAge     int
	every      int
	localMin   int
	maxPermits int
	onChange   func(path string, from, to int, e Estimate)
}

// WithModel sets the SCT estimator's parameters.
func WithModel(m SCT) TunerOption { return func(c *tunerConfig) { c.model = m } }

// WithSampling sets how often the paths' running requests are counted
// (tick, default 2 ms) and the length of one sample (interval, default
// 50 ms, the SCT papers' granularity). The mean concurrency of a sample
// is the mean of its ticks' counts.
func WithSampling(tick, interval time.Duration) TunerOption {
	return func(c *tunerConfig) {
		if tick > 0 && interval >= tick {
			c.tick, c.interval = tick, interval
		}
	}
}

// WithWindow sets the model's memory: the last perLevel samples of each
// concurrency level a path has run at (default 16), each level forgotten
// once it has had no sample for maxAge samples (default 600: thirty
// seconds of 50 ms samples), and the model evaluated after every
// evaluate new samples (default 10: twice a second). A path held at its
// reservation visits no other level; the levels it left are forgotten
// after maxAge, and the model then probes the level below (see [SCT]).
func WithWindow(perLevel, maxAge, evaluate int) TunerOption {
	return func(c *tunerConfig) {
		if perLevel > 0 && maxAge > 0 && evaluate > 0 {
			c.perLevel, c.maxAge, c.every = perLevel, maxAge, evaluate
		}
	}
}

// WithLimits bounds what tuning may do: the local reservation keeps at
// least localMin permits (default 1) and no path gets more than
// maxPermits (default: what the pool and the other paths leave).
func WithLimits(localMin, maxPermits int) TunerOption {
	return func(c *tunerConfig) {
		opt.Set(&c.localMin, localMin, localMin >= 0)
		opt.Set(&c.maxPermits, maxPermits, maxPermits > 0)
	}
}

// OnChange sets a function told of every change of a path's reservation,
// with the estimate that caused it. It runs on the tuner's goroutine; a
// panic in it is recovered.
func OnChange(fn func(path string, from, to int, e Estimate)) TunerOption {
	return func(c *tunerConfig) { c.onChange = fn }
}

// Tuner sets the permits of a fence's paths online with the SCT model:
// it samples each path's concurrency and throughput, and every few
// samples resizes each path's reservation to what [SCT.Estimate] asks.
// Run drives it; it is safe for concurrent use.
type Tuner struct {
	f   *Fence
	cfg tunerConfig

	mu     sync.Mutex
	acc    []accum                 // per path, the sample being built
	hist   []map[int]*levelSamples // per path, per concurrency level
	seq    int64                   // samples taken per path so far
	last   []Estimate              // per path, the last evaluation
	since  int                     // samples since the last evaluation
	errors int64                   // resizes refused, onChange panics
}

// levelSamples are the last samples of one concurrency level, a ring.
type levelSamples struct {
	s    []Sample
	next int
	seen int64 // the tuner's seq at the last sample
}

type accum struct {
	ticks     int
	sum       int64
	saturated bool
	completed int64 // the path's completed count when the sample began
}

// NewTuner returns a tuner of f's path reservations.
func NewTuner(f *Fence, opts ...TunerOption) *Tuner {
	c := tunerConfig{tick: 2 * time.Millisecond, interval: 50 * time.Millisecond, perLevel: 16, maxAge: 600, every: 10, localMin: 1}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	n := len(f.paths)
	t := &Tuner{f: f, cfg: c, acc: make([]accum, n), hist: make([]map[int]*levelSamples, n), last: make([]Estimate, n)}
	for i, p := range f.paths {
		t.hist[i] = map[int]*levelSamples{}
		t.acc[i].completed = p.completed.Load()
		t.last[i] = Estimate{Permits: int(p.limit.Load()), Reason: "not evaluated yet"}
	}
	return t
}

// Run samples and tunes until ctx is done, then returns context.Cause.
func (t *Tuner) Run(ctx context.Context) error {
	tick := time.NewTicker(t.cfg.tick)
	defer tick.Stop()
	perSample := max(1, int(t.cfg.interval/t.cfg.tick))
	n := 0
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
		t.Tick()
		if n++; n >= perSample {
			n = 0
			t.Close(t.cfg.interval)
		}
	}
}

// Tick counts each path's running requests once (Run calls it every
// tick).
func (t *Tuner) Tick() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, p := range t.f.paths {
		a := &t.acc[i]
		a.ticks++
		a.sum += p.runningNow()
		a.saturated = a.saturated || p.nwait.Load() > 0
	}
}

// Close ends the current sample of every path, which lasted d, and
// evaluates the model when enough new samples have come (Run calls it
// every sampling interval).
func (t *Tuner) Close(d time.Duration) {
	t.mu.Lock()
	for i, p := range t.f.paths {
		a := &t.acc[i]
		done := p.completed.Load()
		s := Sample{Saturated: a.saturated}
		if a.ticks > 0 {
			s.Concurrency = float64(a.sum) / float64(a.ticks)
		}
		if d > 0 {
			s.Throughput = float64(done-a.completed) / d.Seconds()
		}
		if s.Throughput > 0 {
			// Little's law: the mean response time of the interval.
			s.ResponseTime = time.Duration(s.Concurrency / s.Throughput * float64(time.Second))
		}
		*a = accum{completed: done}
		t.addLocked(i, s)
	}
	t.seq++
	t.since++
	evaluate := t.since >= t.cfg.every
	if evaluate {
		t.since = 0
	}
	t.mu.Unlock()
	if evaluate {
		t.Evaluate()
	}
}

// Observe adds a sample of the path named name, as Close does from the
// fence's counters; tests and callers that measure paths themselves use
// it. It reports whether the fence has such a path.
func (t *Tuner) Observe(name string, s Sample) bool {
	p, ok := t.f.byName[name]
	if !ok || p.index < 0 {
		return false
	}
	t.mu.Lock()
	t.addLocked(p.index, s)
	t.seq++
	t.mu.Unlock()
	return true
}

func (t *Tuner) addLocked(i int, s Sample) {
	if !(s.Concurrency >= 0.5) || math.IsInf(s.Concurrency, 0) {
		return // idle, or garbage: no level to learn about
	}
	k := int(math.Round(s.Concurrency))
	l := t.hist[i][k]
	if l == nil {
		l = &levelSamples{}
		t.hist[i][k] = l
	}
	l.seen = t.seq
	if len(l.s) < t.cfg.perLevel {
		l.s = append(l.s, s)
		return
	}
	l.s[l.next] = s
	l.next = (l.next + 1) % t.cfg.perLevel
}

// windowLocked forgets the levels of path i not seen for maxAge samples
// and returns the samples of the others.
func (t *Tuner) windowLocked(i int) []Sample {
	var out []Sample
	for k, l := range t.hist[i] {
		if t.seq-l.seen > int64(t.cfg.maxAge) {
			delete(t.hist[i], k)
			continue
		}
		out = append(out, l.s...)
	}
	return out
}

// Evaluate runs the model on every path's window and resizes the
// reservations it asks to change, within the limits of [WithLimits].
func (t *Tuner) Evaluate() {
	type change struct {
		p        *Path
		from, to int
		e        Estimate
	}
	var changes []change
	t.mu.Lock()
	for i, p := range t.f.paths {
		cur := int(p.limit.Load())
		others := 0
		for _, q := range t.f.paths {
			if q != p {
				others += int(q.limit.Load())
			}
		}
		maxP := int(t.f.size) - others - t.cfg.localMin
		if t.cfg.maxPermits > 0 {
			maxP = min(maxP, t.cfg.maxPermits)
		}
		e := t.cfg.model.Estimate(t.windowLocked(i), cur, max(maxP, 1))
		t.last[i] = e
		if e.Permits != cur {
			if err := t.f.Resize(p.name, e.Permits); err != nil {
				t.errors++
				continue
			}
			changes = append(changes, change{p, cur, e.Permits, e})
		}
	}
	t.mu.Unlock()
	if t.cfg.onChange != nil {
		for _, c := range changes {
			t.notify(c.p.name, c.from, c.to, c.e)
		}
	}
}

func (t *Tuner) notify(name string, from, to int, e Estimate) {
	defer func() {
		if recover() != nil {
			t.mu.Lock()
			t.errors++
			t.mu.Unlock()
		}
	}()
	t.cfg.onChange(name, from, to, e)
}

// Estimates returns the last evaluation of each path, by name.
func (t *Tuner) Estimates() map[string]Estimate {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]Estimate, len(t.last))
	for i, p := range t.f.paths {
		out[p.name] = t.last[i]
	}
	return out
}

// Errors returns the number of resizes the fence refused and of OnChange
// panics recovered.
func (t *Tuner) Errors() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.errors
}
