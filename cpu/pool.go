package cpu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moirai-go/moirai/resource"
)

// ErrClosed is returned by Submit and Go on a closed pool.
var ErrClosed = errors.New("cpu: pool closed")

// ErrRejected is wrapped by the error of Submit and Go when the pool's
// backlog is full. It is resource.ErrRejected, so one check covers the
// pool and every other queue.
var ErrRejected = resource.ErrRejected

// Pool runs work on at most its active count of workers at once, and
// moves the active count with the CPU time its neighbours use. Create it
// with [NewPool]; the zero value is not usable. Its methods are safe for
// concurrent use.
type Pool struct {
	cfg   config
	q     *resource.Queue
	cpus  float64
	host  float64 // the host's CPUs, that Sample.Total covers
	limit int

	active  atomic.Int64
	share   atomic.Uint64 // math.Float64bits of the last share; NaN before the first
	free    atomic.Uint64 // math.Float64bits of the last free CPUs; NaN before the first
	pending atomic.Int64  // submitted, not yet started or dropped

	ticks, readErrors, changes, dropped atomic.Int64
	loopNanos                           atomic.Int64

	mu     sync.Mutex // guards closed and the Add of wg
	closed bool
	wg     sync.WaitGroup // Submit and Go calls in flight

	stop     chan struct{}
	loopDone chan struct{}
	// The loop parks when the pool has been idle for a window and new
	// work wakes it: parked is set by the loop, cleared by whoever sends
	// on wake.
	parked  atomic.Bool
	wake    chan struct{}
	quantum time.Duration // the step in which the reader's counters advance
	procs0  int           // GOMAXPROCS before the pool, in GOMAXPROCS mode
	closer  io.Closer     // the reader the pool opened, if any
}

// NewPool returns a pool configured by opts and starts its loop. Without
// options it reads its budget with [ReadBudget], its counters with a
// [ProcReader] of /proc and ticks once per clock tick, with an overcommit
// factor of 1. It fails if an option is invalid or, for a
// neighbour-aware pool without [WithReader] or [WithTick], if /proc
// cannot be read.
//
// The active count starts at the pool's limit, ⌈O · CPUs⌉, and follows
// the CPUs its neighbours leave it from the first tick on (see the package
// doc).
func NewPool(opts ...Option) (*Pool, error) {
	cfg := defaults()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Pool{cfg: cfg, cpus: cfg.budget}
	p.share.Store(math.Float64bits(math.NaN()))
	p.free.Store(math.Float64bits(math.NaN()))
	if p.cpus == 0 || cfg.host == 0 {
		b := ReadBudget(os.DirFS("/"))
		if p.cpus == 0 {
			p.cpus = b.CPUs
		}
		p.host = float64(b.Host)
	}
	if cfg.host > 0 {
		p.host = float64(cfg.host)
	}
	p.host = max(p.host, math.Ceil(p.cpus))
	tick := cfg.tick
	if cfg.fixed > 0 {
		p.limit = cfg.fixed
	} else {
		p.limit = Limit(cfg.overcommit, p.cpus)
		if tick == 0 {
			hz, err := ReadClockTick("/")
			if err != nil {
				return nil, fmt.Errorf("%w (set the loop's period with WithTick)", err)
			}
			tick = time.Second / time.Duration(hz)
		}
		// The step of the counters: one clock tick for /proc, else
		// taken to be the loop's period.
		p.quantum = tick
		if cfg.reader == nil {
			r, err := NewProcReader("/")
			if err != nil {
				return nil, err
			}
			p.cfg.reader, p.closer = r, r
			if cfg.tick != 0 { // else the tick is the clock tick already
				if hz, err := ReadClockTick("/"); err == nil {
					p.quantum = time.Second / time.Duration(hz)
				}
			}
		}
	}
	p.active.Store(int64(p.limit))
	if cfg.queue != nil {
		p.q = cfg.queue
		if err := p.q.Resize(int64(p.limit)); err != nil {
			p.closeReader()
			return nil, err
		}
	} else {
		r, err := resource.NewRegistry().Register("cpu.pool", resource.KindQueue, int64(p.limit))
		if err != nil {
			p.closeReader()
			return nil, err
		}
		p.q = resource.NewQueue(r, int64(p.limit), 0)
	}
	if cfg.gomaxprocs {
		p.procs0 = cfg.setProcs(p.limit)
	}
	if cfg.fixed == 0 {
		p.stop, p.loopDone, p.wake = make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
		go p.loop(tick)
	}
	return p, nil
}

func (p *Pool) closeReader() {
	if p.closer != nil {
		p.closer.Close()
	}
}

// loop runs one step per tick until Close. When the pool has had no
// work for a whole window it stops ticking (an idle pool costs nothing)
// until new work arrives; the window then starts afresh, from the active
// count it had.
func (p *Pool) loop(tick time.Duration) {
	defer close(p.loopDone)
	win := newWindow(p.cfg.window)
	seed := p.cfg.seed
	if seed == 0 {
		seed = rand.Uint64() // a different seed in every process
	}
	c := newControl(p.cpus, p.host, p.cfg.overcommit, p.cfg.grow, p.limit, p.cfg.window, p.quantum, seed)
	t := time.NewTicker(tick)
	defer t.Stop()
	idle := 0
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		start := time.Now()
		p.step(win, c)
		p.loopNanos.Add(int64(time.Since(start)))
		if p.cfg.noPark || p.pending.Load() > 0 || p.q.Running() > 0 {
			idle = 0
			continue
		}
		if idle++; idle < p.cfg.window {
			continue
		}
		idle = 0
		t.Stop()
		// Park, unless work arrived between the check and here: admit
		// adds to pending before it looks at parked, the loop sets
		// parked before it looks at pending, so one of them sees the
		// other, and the one whose CompareAndSwap wins decides.
		p.parked.Store(true)
		if p.pending.Load() == 0 || !p.parked.CompareAndSwap(true, false) {
			select {
			case <-p.stop:
				return
			case <-p.wake:
			}
		}
		win.reset()
		t.Reset(tick)
	}
}

// step reads the counters, measures the window and sets the active
// count. A failed read keeps the active count and restarts the window.
func (p *Pool) step(win *window, c *control) {
	p.ticks.Add(1)
	info := StepInfo{Others: math.NaN(), Free: math.NaN()}
	s, err := p.cfg.reader.Read()
	if err != nil {
		p.readErrors.Add(1)
		win.reset()
		info.Err = err
	} else {
		info = c.step(win, s, int(p.q.Running()))
		if info.OK {
			p.share.Store(math.Float64bits(info.Share))
			p.free.Store(math.Float64bits(info.Free))
			p.setActive(c.n)
		}
	}
	if p.cfg.onStep != nil {
		info.Active = int(p.active.Load())
		p.cfg.onStep(info)
	}
}

// setActive moves the active count to n: the queue's slots, or
// GOMAXPROCS. Work running above a smaller count finishes; no new work
// starts until the running count is below it.
func (p *Pool) setActive(n int) {
	if int64(n) == p.active.Load() {
		return
	}
	p.active.Store(int64(n))
	p.changes.Add(1)
	if p.cfg.gomaxprocs {
		p.cfg.setProcs(n)
		return
	}
	p.q.Resize(int64(n)) // n ≥ 1: cannot fail
}

// Submit runs fn in the calling goroutine once one of the pool's active
// workers is free, and returns fn's error. Waiting for a worker is a wait
// on the pool's queue, charged to the task in ctx. If ctx is done first,
// fn is not run and Submit returns context.Cause(ctx); on a closed pool it
// returns ErrClosed, and with a full backlog an error wrapping
// ErrRejected, both at once. A panic in fn frees its worker and goes on
// unwinding.
func (p *Pool) Submit(ctx context.Context, fn func(context.Context) error) error {
	if err := p.admit(); err != nil {
		return err
	}
	defer p.wg.Done()
	return p.run(ctx, fn)
}

// Go runs fn in a new goroutine once one of the pool's active workers is
// free, and returns at once: nil when fn was queued, ErrClosed or an
// error wrapping ErrRejected otherwise. If ctx is done before a worker is
// free, fn is not run (it is counted in [Stats].Dropped). Close waits for
// every fn queued by Go.
func (p *Pool) Go(ctx context.Context, fn func(context.Context)) error {
	if err := p.admit(); err != nil {
		return err
	}
	go func() {
		defer p.wg.Done()
		p.run(ctx, func(ctx context.Context) error { fn(ctx); return nil })
	}()
	return nil
}

// admit counts a new piece of work in, or refuses it.
func (p *Pool) admit() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if b := p.cfg.backlog; b > 0 {
		free := max(p.q.Slots()-p.q.Running(), 0)
		if waiting := p.pending.Load() - free; waiting >= b {
			return fmt.Errorf("%w: cpu pool has %d waiting", ErrRejected, waiting)
		}
	}
	p.pending.Add(1)
	p.wg.Add(1)
	if p.parked.Load() && p.parked.CompareAndSwap(true, false) {
		p.wake <- struct{}{}
	}
	return nil
}

func (p *Pool) run(ctx context.Context, fn func(context.Context) error) error {
	permit, err := p.q.Enter(ctx)
	p.pending.Add(-1)
	if err != nil {
		p.dropped.Add(1)
		return err
	}
	defer permit.Release()
	return fn(ctx)
}

// Close stops the loop, refuses new work with ErrClosed, and waits for the
// work already submitted, queued included, to finish: queued work still
// runs, on the active count of the last tick. In GOMAXPROCS mode it then
// restores GOMAXPROCS. It must not be called from work the pool runs.
// Closing a closed pool does nothing and returns nil.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	if p.stop != nil {
		close(p.stop)
		<-p.loopDone
	}
	p.wg.Wait()
	if p.cfg.gomaxprocs {
		p.cfg.setProcs(p.procs0)
	}
	if p.closer != nil {
		return p.closer.Close()
	}
	return nil
}

// Queue returns the queue the pool admits its work through.
func (p *Pool) Queue() *resource.Queue { return p.q }

// Active returns the active count: the most work the pool starts running
// at once.
func (p *Pool) Active() int { return int(p.active.Load()) }

// Stats is a pool's state and counters, for monitoring.
type Stats struct {
	// CPUs is the budget; Overcommit the factor O; Limit ⌈O · CPUs⌉ (or
	// the fixed size).
	CPUs       float64
	Overcommit float64
	Limit      int
	// Tolerance is the loop's grow margin (see WithTolerance).
	Tolerance float64
	// Active is the active count; Running the work running now; Waiting
	// the work waiting for a worker.
	Active           int
	Running, Waiting int64
	// Share is the last measured share of the host's busy time, NaN
	// before the first (and for a fixed pool). Free is the last measured
	// CPUs of the budget the rest of the host left unused, the estimate
	// the active count follows; NaN before the first, for a fixed pool,
	// and for a reader that gives no total time.
	Share, Free float64
	// Ticks counts the loop's steps (none while it is parked, after a
	// window without work), ReadErrors its failed reads, Changes
	// the changes of the active count, Dropped the work whose context was
	// done before a worker was free.
	Ticks, ReadErrors, Changes, Dropped int64
	// LoopTime is the time spent in the loop's steps.
	LoopTime time.Duration
}

// Stats returns the pool's state and counters.
func (p *Pool) Stats() Stats {
	return Stats{
		CPUs: p.cpus, Overcommit: p.cfg.overcommit, Limit: p.limit, Tolerance: p.cfg.grow,
		Active: p.Active(), Running: p.q.Running(), Waiting: p.q.Waiting(),
		Share: math.Float64frombits(p.share.Load()), Free: math.Float64frombits(p.free.Load()),
		Ticks: p.ticks.Load(), ReadErrors: p.readErrors.Load(), Changes: p.changes.Load(),
		Dropped: p.dropped.Load(), LoopTime: time.Duration(p.loopNanos.Load()),
	}
}
