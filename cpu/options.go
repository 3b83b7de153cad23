package cpu

import (
	"fmt"
	"runtime"
	"time"

	"github.com/moirai-go/moirai/resource"
)

// Option configures [NewPool]. Options are made by the With functions;
// they set an unexported configuration, which NewPool validates once all
// of them ran, failing with an error that names the option whose value is
// invalid.
type Option func(*config)

type config struct {
	budget     float64 // CPUs; 0: ReadBudget of the real file system
	overcommit float64
	grow       float64
	host       int    // the host's CPUs; 0: read them (tests set it)
	seed       uint64 // the control's jitter; 0: from the clock (tests set it)
	fixed      int    // > 0: a static pool of this many workers, no loop
	reader     Reader
	tick       time.Duration // 0: one clock tick
	window     int
	queue      *resource.Queue
	backlog    int64
	gomaxprocs bool
	setProcs   func(int) int // runtime.GOMAXPROCS; replaced in tests
	noPark     bool          // tests of the loop: never park when idle
	onStep     func(StepInfo)
	// given holds the options called whose zero value means something
	// else by default (the budget read from the system, a loop, /proc,
	// the clock tick, a queue of the pool's own), so that validate
	// checks the value they were given.
	given struct{ budget, fixed, reader, tick, queue bool }
}

func defaults() config {
	return config{overcommit: 1, grow: DefaultGrow, window: 10, setProcs: runtime.GOMAXPROCS}
}

// validate reports the first option, in the order of this list, whose
// value is invalid.
func (c *config) validate() error {
	g := c.given
	switch {
	case g.budget && (!(c.budget > 0) || c.budget > 1<<16):
		return fmt.Errorf("cpu: WithBudget: budget of %v CPUs", c.budget)
	case !(c.overcommit > 0) || c.overcommit > 16:
		return fmt.Errorf("cpu: WithOvercommit: factor %v is not in (0, 16]", c.overcommit)
	case !(c.grow >= 0) || c.grow >= 1:
		return fmt.Errorf("cpu: WithTolerance: %v is not in [0, 1)", c.grow)
	case g.fixed && c.fixed < 1:
		return fmt.Errorf("cpu: WithFixed: pool of %d workers", c.fixed)
	case g.reader && c.reader == nil:
		return fmt.Errorf("cpu: WithReader: nil Reader")
	case g.tick && c.tick < time.Millisecond:
		return fmt.Errorf("cpu: WithTick: tick of %v is below 1ms", c.tick)
	case c.window < 1 || c.window > 10000:
		return fmt.Errorf("cpu: WithWindow: window of %d ticks", c.window)
	case g.queue && c.queue == nil:
		return fmt.Errorf("cpu: WithQueue: nil Queue")
	case c.backlog < 0:
		return fmt.Errorf("cpu: WithBacklog: backlog of %d", c.backlog)
	}
	return nil
}

// WithBudget sets the pool's CPU budget, instead of the one [ReadBudget]
// derives from the real file system. cpus must be positive.
func WithBudget(cpus float64) Option {
	return func(c *config) { c.budget, c.given.budget = cpus, true }
}

// WithOvercommit sets the overcommit factor O (default 1): the pool runs
// as many workers as O times the CPUs its neighbours leave it. Above 1
// it claims more than that, trading latency for throughput (work that
// waits on I/O inside a worker); it must be in (0, 16].
func WithOvercommit(o float64) Option {
	return func(c *config) { c.overcommit = o }
}

// WithTolerance sets the grow margin (tol in [0, 1), default 0.5): the
// pool adds a worker to its n only when the CPUs its neighbours leave
// free, times O, reach n + tol, and takes one away when they fall below
// n − 1.25 + tol (see [Next]). A small margin claims idle CPU sooner and
// risks running a worker more than the CPUs when a neighbour's use comes
// back; a large one waits for more idle CPU. 0 grows as soon as a whole
// worker's CPU is free.
func WithTolerance(tol float64) Option {
	return func(c *config) { c.grow = tol }
}

// WithFixed makes a static pool of n workers: no loop, no reader. It is
// the neighbour-ignorant baseline (n = the budget) and the optimal one
// when the neighbours are known (n = budget / neighbours).
func WithFixed(n int) Option {
	return func(c *config) { c.fixed, c.given.fixed = n, true }
}

// WithReader sets where the loop reads the CPU time counters, instead of
// a [ProcReader] of the real /proc. Tests script it.
func WithReader(r Reader) Option {
	return func(c *config) { c.reader, c.given.reader = r, true }
}

// WithTick sets the loop's period, instead of one clock tick
// (sysconf(_SC_CLK_TCK), see [ReadClockTick]). It must be at least 1 ms.
func WithTick(d time.Duration) Option {
	return func(c *config) { c.tick, c.given.tick = d, true }
}

// WithWindow sets over how many ticks the loop measures (default 10:
// 100 ms at the usual 100 Hz); a grow also looks back four windows. The
// counters advance by whole clock ticks, so what one tick measures is
// mostly rounding; see the package doc.
func WithWindow(ticks int) Option {
	return func(c *config) { c.window = ticks }
}

// WithQueue makes the pool admit its work through q, a Queue resource
// (moirai.Controller.Queue creates one): work waiting for a worker is a
// wait on q, charged to the task in the work's context, and running work
// holds a slot of q. The pool owns q's size from then on and resizes it at
// every change of the active count. Without WithQueue the pool uses a
// queue of its own that no controller sees.
func WithQueue(q *resource.Queue) Option {
	return func(c *config) { c.queue, c.given.queue = q, true }
}

// WithBacklog bounds the work waiting for a worker: past n, Submit and Go
// fail at once with [ErrRejected]. 0 (the default) means unbounded.
func WithBacklog(n int) Option {
	return func(c *config) { c.backlog = int64(n) }
}

// WithGOMAXPROCS makes the loop drive runtime.GOMAXPROCS to the active
// count instead of the pool's own number of workers: the Go scheduler
// then runs at most that many goroutines at once in the whole process,
// the pool's and everyone else's. The pool's queue then admits up to the
// pool's limit. Close restores the GOMAXPROCS the pool found. Only one
// pool of a process should use it.
func WithGOMAXPROCS() Option {
	return func(c *config) { c.gomaxprocs = true }
}

// StepInfo is what one tick of the pool's loop read and decided.
type StepInfo struct {
	Sample Sample
	// Share is the measured share of the host's busy time; valid only
	// if OK.
	Share float64
	// Others is the CPUs the rest of the host wanted over the window
	// (what it used, corrected for the sharing of a saturated host, and
	// the CPU time the hypervisor stole from the host), Free
	// what that leaves of the budget: min(budget, host − Others), the
	// estimate the active count follows. NaN unless OK and the reader
	// gives the total time. Running is the work the pool ran, on average
	// over the window.
	Others, Free, Running float64
	OK                    bool
	// Active is the active count after the tick.
	Active int
	// Err is the read error, if the read failed.
	Err error
}

// WithObserver calls fn after every tick of the loop, from the loop's
// goroutine. fn must not block.
func WithObserver(fn func(StepInfo)) Option {
	return func(c *config) { c.onStep = fn }
}
