package baseline

import (
	"sync"
	"time"
)

// Defaults of [NewRPCCoDel], the ones "Fail at Scale" gives: M = 5 ms,
// N = 100 ms.
const (
	DefaultRPCCoDelTarget   = 5 * time.Millisecond
	DefaultRPCCoDelInterval = 100 * time.Millisecond
)

// rpcCoDelConfig is what RPCCoDelOptions set.
type rpcCoDelConfig struct {
	target, interval time.Duration
}

// An RPCCoDelOption configures [NewRPCCoDel].
type RPCCoDelOption func(*rpcCoDelConfig)

// WithRPCCoDelTarget sets how long a request may queue while the server is
// overloaded ("Fail at Scale"'s M, 5 ms by default). A non-positive d
// leaves the default.
func WithRPCCoDelTarget(d time.Duration) RPCCoDelOption {
	return func(c *rpcCoDelConfig) {
		if d > 0 {
			c.target = d
		}
	}
}

// WithRPCCoDelInterval sets how long the queue must have stayed non-empty
// for the server to be overloaded, and how long a request may queue
// otherwise ("Fail at Scale"'s N, 100 ms by default). A non-positive d
// leaves the default.
func WithRPCCoDelInterval(d time.Duration) RPCCoDelOption {
	return func(c *rpcCoDelConfig) {
		if d > 0 {
			c.interval = d
		}
	}
}

// RPCCoDel is CoDel as RPC servers run it (Maurer, "Fail at Scale", ACM
// Queue 13(8), 2015): a server whose queue has not been empty for the last
// interval (N) is overloaded, and while it is a request may queue for the
// target (M) only; otherwise it may queue for the interval. A request that
// queued longer is rejected instead of served. Paired with adaptive LIFO
// ([LIFOQueue] with [RPCCoDel.Overloaded] as its switch), the requests
// served under overload are the newest ones. See the package
// documentation for how it differs from [CoDel].
//
// An RPCCoDel is safe for concurrent use. Its zero value is not usable:
// create one with [NewRPCCoDel].
type RPCCoDel struct {
	cfg rpcCoDelConfig

	mu        sync.Mutex
	backlog   int64         // Admit calls minus Started calls; guarded by mu
	lastEmpty time.Duration // when the backlog was last zero; guarded by mu
	drops     int64         // guarded by mu
}

// NewRPCCoDel returns an RPCCoDel with a target of 5 ms and an interval of
// 100 ms, unless opts change them.
func NewRPCCoDel(opts ...RPCCoDelOption) *RPCCoDel {
	cfg := rpcCoDelConfig{target: DefaultRPCCoDelTarget, interval: DefaultRPCCoDelInterval}
	for _, o := range opts {
		o(&cfg)
	}
	return &RPCCoDel{cfg: cfg}
}

// Name returns "codel-rpc" ([CoDel]'s is "codel").
func (c *RPCCoDel) Name() string { return "codel-rpc" }

// Admit counts the request into the queue and returns true: RPCCoDel
// rejects as requests leave the queue. Every request admitted must be
// reported to Started, served, rejected or abandoned.
func (c *RPCCoDel) Admit(now time.Duration) bool {
	c.mu.Lock()
	if c.backlog <= 0 {
		c.lastEmpty = now
	}
	c.backlog++
	c.mu.Unlock()
	return true
}

// Timeout returns how long a request arriving now may queue: the target if
// the server is overloaded, the interval otherwise. A queue that drops its
// requests when their time is up, as "Fail at Scale"'s does, takes it at
// enqueue.
func (c *RPCCoDel) Timeout(now time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timeoutLocked(now)
}

func (c *RPCCoDel) timeoutLocked(now time.Duration) time.Duration {
	if c.overloadedLocked(now) {
		return c.cfg.target
	}
	return c.cfg.interval
}

func (c *RPCCoDel) overloadedLocked(now time.Duration) bool {
	return c.backlog > 0 && now-c.lastEmpty >= c.cfg.interval
}

// Started takes a request leaving the queue at now after queueDelay (or
// abandoning it) and returns false if it queued longer than Timeout
// allows now: the caller must then reject it. Calls are expected with
// non-decreasing now.
func (c *RPCCoDel) Started(now, queueDelay time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := queueDelay <= c.timeoutLocked(now)
	c.backlog = max(c.backlog-1, 0)
	if c.backlog == 0 {
		c.lastEmpty = now
	}
	if !ok {
		c.drops++
	}
	return ok
}

// Done does nothing: RPCCoDel looks at its queue only.
func (c *RPCCoDel) Done(now, service time.Duration) {}

// Overloaded reports whether the queue has stayed non-empty for the last
// interval as of now: the switch of adaptive LIFO.
func (c *RPCCoDel) Overloaded(now time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overloadedLocked(now)
}

// Drops returns the number of requests Started has rejected.
func (c *RPCCoDel) Drops() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.drops
}
