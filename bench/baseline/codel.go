package baseline

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of [NewCoDel], RFC 8289's.
const (
	DefaultCoDelTarget   = 5 * time.Millisecond
	DefaultCoDelInterval = 100 * time.Millisecond
)

// codelConfig is what CoDelOptions set.
type codelConfig struct {
	target   time.Duration
	interval time.Duration
	backlog  int64 // negative: the backlog rule is off
}

// A CoDelOption configures [NewCoDel].
type CoDelOption func(*codelConfig)

// WithCoDelTarget sets the acceptable standing queueing delay (RFC 8289's
// TARGET, 5 ms by default). A non-positive d leaves the default.
func WithCoDelTarget(d time.Duration) CoDelOption {
	return func(c *codelConfig) {
		if d > 0 {
			c.target = d
		}
	}
}

// WithCoDelInterval sets the time the queueing delay must stay at or above
// the target before CoDel starts dropping, and the base of the spacing of
// its drops (RFC 8289's INTERVAL, 100 ms by default). A non-positive d leaves
// the default.
func WithCoDelInterval(d time.Duration) CoDelOption {
	return func(c *codelConfig) {
		if d > 0 {
			c.interval = d
		}
	}
}

// WithCoDelBacklog sets how many requests may remain queued behind a
// dequeued request for it never to count as above target: RFC 8289's
// bytes() <= MAXPACKET test with one request as the packet, 1 by default.
// A negative n turns the rule off. The backlog is the number of Admit calls
// minus the number of Started calls; if Started is called more often than
// Admit (a server that does not report arrivals), the rule is off too.
func WithCoDelBacklog(n int) CoDelOption {
	return func(c *codelConfig) { c.backlog = int64(n) }
}

// CoDel is the CoDel active queue management algorithm (RFC 8289) applied
// to a server's request queue: [CoDel.Started] drops requests at dequeue
// time once their queueing delay has stayed above the target for an
// interval. See the package documentation for the algorithm and for what it
// does not do.
//
// A CoDel is safe for concurrent use. Its zero value is not usable: create
// one with [NewCoDel].
type CoDel struct {
	cfg     codelConfig
	arrived atomic.Int64 // Admit calls
	drops   atomic.Int64 // Started calls that returned false

	mu sync.Mutex
	st codelState // guarded by mu
}

// next says how the next dequeue continues the RFC's dequeue routine.
type next uint8

const (
	// fresh: the next request goes through the top of dequeue.
	fresh next = iota
	// afterEntry: the previous request was dropped on entering the dropping
	// state; the RFC delivers the request dequeued right after it.
	afterEntry
	// afterDrop: the previous request was dropped inside the dropping loop;
	// the next one is examined by the loop.
	afterDrop
)

// codelState is RFC 8289's per-queue state, plus the continuation of its
// dequeue loop across Started calls.
type codelState struct {
	left       int64 // Started calls
	above      bool  // first_above_time is set
	firstAbove time.Duration
	dropping   bool
	dropNext   time.Duration
	count      int64
	lastCount  int64
	next       next
}

// NewCoDel returns a CoDel with a target of 5 ms and an interval of 100 ms,
// unless opts change them. It starts outside the dropping state.
func NewCoDel(opts ...CoDelOption) *CoDel {
	cfg := codelConfig{
		target:   DefaultCoDelTarget,
		interval: DefaultCoDelInterval,
		backlog:  1,
	}
	for _, o := range opts {
		o(&cfg)
	}
	return &CoDel{cfg: cfg}
}

// Name returns "codel".
func (c *CoDel) Name() string { return "codel" }

// Admit counts the arrival, for the backlog rule, and returns true: CoDel
// acts at dequeue time, not at arrival.
func (c *CoDel) Admit(now time.Duration) bool {
	c.arrived.Add(1)
	return true
}

// Started runs CoDel's dequeue step for a request that waited queueDelay
// and leaves the queue at now. It returns false if CoDel drops the request:
// the caller must then reject it, and not report it to Done. Calls are
// expected in dequeue order, with non-decreasing now.
func (c *CoDel) Started(now, queueDelay time.Duration) bool {
	arrived := c.arrived.Load()
	c.mu.Lock()
	ok := c.startedLocked(now, queueDelay, arrived)
	c.mu.Unlock()
	if !ok {
		c.drops.Add(1)
	}
	return ok
}

// startedLocked is RFC 8289's dequeue, one request per call.
func (c *CoDel) startedLocked(now, sojourn time.Duration, arrived int64) bool {
	s := &c.st
	s.left++
	okToDrop := c.okToDropLocked(now, sojourn, arrived-s.left)
	switch s.next {
	case afterEntry:
		// The RFC returns the request dequeued after the entry drop
		// whatever it is.
		s.next = fresh
		return true
	case afterDrop:
		if !okToDrop {
			s.dropping = false
			s.next = fresh
			return true
		}
		s.dropNext = c.controlLaw(s.dropNext, s.count)
		if now >= s.dropNext {
			s.count++
			return false
		}
		s.next = fresh
		return true
	}
	if s.dropping {
		if !okToDrop {
			s.dropping = false
			return true
		}
		if now >= s.dropNext {
			s.count++
			s.next = afterDrop
			return false
		}
		return true
	}
	if !okToDrop {
		return true
	}
	// Enter the dropping state, dropping this request. If the previous
	// dropping state ended recently, resume near its drop rate.
	s.dropping = true
	delta := s.count - s.lastCount
	s.count = 1
	if delta > 1 && now-s.dropNext < 16*c.cfg.interval {
		s.count = delta
	}
	s.dropNext = c.controlLaw(now, s.count)
	s.lastCount = s.count
	s.next = afterEntry
	return false
}

// okToDropLocked is RFC 8289's dodequeue test: whether the sojourn time has
// been at or above target for at least an interval.
func (c *CoDel) okToDropLocked(now, sojourn time.Duration, backlog int64) bool {
	s := &c.st
	if sojourn < c.cfg.target || (c.cfg.backlog >= 0 && backlog >= 0 && backlog <= c.cfg.backlog) {
		s.above = false
		return false
	}
	if !s.above {
		s.above = true
		s.firstAbove = now + c.cfg.interval
		return false
	}
	return now >= s.firstAbove
}

// controlLaw returns t + interval/√count.
func (c *CoDel) controlLaw(t time.Duration, count int64) time.Duration {
	return t + time.Duration(float64(c.cfg.interval)/math.Sqrt(float64(count)))
}

// Done does nothing: CoDel looks at queueing delays only.
func (c *CoDel) Done(now, service time.Duration) {}

// Dropping reports whether CoDel is in its dropping state.
func (c *CoDel) Dropping() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.dropping
}

// Drops returns the number of requests Started has dropped.
func (c *CoDel) Drops() int64 { return c.drops.Load() }
