package baseline

import (
	"sync"
	"time"
)

// Defaults of [NewRPCCoDel], the ones "Fail at Scale" gives (M = 5 ms,
// N = 100 ms) and a bound of twice the target.
const (
	DefaultRPCCoDelTarget   = 5 * time.Millisecond
	DefaultRPCCoDelInterval = 100 * time.Millisecond
)

// rpcCoDelConfig is what RPCCoDelOptions set.
type rpcCoDelConfig struct {
	target, interval, bound time.Duration
}

// An RPCCoDelOption configures [NewRPCCoDel].
type RPCCoDelOption func(*rpcCoDelConfig)

// WithRPCCoDelTarget sets the queueing delay that, when even the shortest
// one of an interval exceeds it, marks the server overloaded (5 ms by
// default). A non-positive d leaves the default.
func WithRPCCoDelTarget(d time.Duration) RPCCoDelOption {
	return func(c *rpcCoDelConfig) {
		if d > 0 {
			c.target = d
		}
	}
}

// WithRPCCoDelInterval sets the interval over which the shortest queueing
// delay is taken (100 ms by default). A non-positive d leaves the default.
func WithRPCCoDelInterval(d time.Duration) RPCCoDelOption {
	return func(c *rpcCoDelConfig) {
		if d > 0 {
			c.interval = d
		}
	}
}

// WithRPCCoDelBound sets how long a request may have queued and still be
// served while the server is overloaded (twice the target by default). A
// non-positive d leaves the default.
func WithRPCCoDelBound(d time.Duration) RPCCoDelOption {
	return func(c *rpcCoDelConfig) {
		if d > 0 {
			c.bound = d
		}
	}
}

// RPCCoDel is CoDel as RPC servers run it (Maurer, "Fail at Scale", ACM
// Queue 13(8), 2015): at the end of every interval the server is marked
// overloaded if the shortest queueing delay of the requests that left the
// queue during that interval exceeded the target (the queue never
// drained), and while it is overloaded every request that queued longer
// than a short bound is rejected as it leaves the queue. Paired with
// adaptive LIFO ([LIFOQueue] with [RPCCoDel.Overloaded] as its switch), the
// requests served under overload are the newest ones. See the package
// documentation for how it differs from [CoDel].
//
// An RPCCoDel is safe for concurrent use. Its zero value is not usable:
// create one with [NewRPCCoDel].
type RPCCoDel struct {
	cfg rpcCoDelConfig

	mu         sync.Mutex
	started    bool          // an interval is open; guarded by mu
	end        time.Duration // when the open interval ends; guarded by mu
	minDelay   time.Duration // shortest delay of the open interval; guarded by mu
	overloaded bool          // guarded by mu
	drops      int64         // guarded by mu
}

// NewRPCCoDel returns an RPCCoDel with a target of 5 ms, an interval of
// 100 ms and a bound of twice the target, unless opts change them.
func NewRPCCoDel(opts ...RPCCoDelOption) *RPCCoDel {
	cfg := rpcCoDelConfig{target: DefaultRPCCoDelTarget, interval: DefaultRPCCoDelInterval}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.bound <= 0 {
		cfg.bound = 2 * cfg.target
	}
	return &RPCCoDel{cfg: cfg}
}

// Name returns "codel".
func (c *RPCCoDel) Name() string { return "codel" }

// Admit returns true: RPCCoDel acts as requests leave the queue.
func (c *RPCCoDel) Admit(now time.Duration) bool { return true }

// Started takes the queueing delay of a request leaving the queue at now
// and returns false if the request must be rejected: the server is
// overloaded and the request queued longer than the bound. A request that
// opens an interval is never rejected. Calls are expected with
// non-decreasing now.
func (c *RPCCoDel) Started(now, queueDelay time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started || now >= c.end {
		// Close the interval: overloaded if even its shortest delay was
		// above the target. An interval that saw no request (the server
		// idle for longer than an interval) is no evidence of overload.
		c.overloaded = c.started && now < c.end+c.cfg.interval && c.minDelay > c.cfg.target
		c.started, c.end, c.minDelay = true, now+c.cfg.interval, queueDelay
		return true
	}
	c.minDelay = min(c.minDelay, queueDelay)
	if c.overloaded && queueDelay > c.cfg.bound {
		c.drops++
		return false
	}
	return true
}

// Done does nothing: RPCCoDel looks at queueing delays only.
func (c *RPCCoDel) Done(now, service time.Duration) {}

// Overloaded reports whether the last closed interval marked the server
// overloaded: the switch of adaptive LIFO.
func (c *RPCCoDel) Overloaded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overloaded
}

// Drops returns the number of requests Started has rejected.
func (c *RPCCoDel) Drops() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.drops
}
