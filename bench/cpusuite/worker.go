package cpusuite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moirai-go/moirai/cpu"
)

// WorkerConfig is what one process of a run is told to do. The parent
// passes it as JSON to the child's command line.
type WorkerConfig struct {
	// Pool is "ignorant", "optimal", "static" (Fixed workers), "friendly"
	// or "hog"; Overcommit is O for
	// friendly; K the number of processes of the run.
	Pool       string  `json:"pool"`
	Overcommit float64 `json:"overcommit,omitempty"`
	Tolerance  float64 `json:"tolerance,omitempty"`
	K          int     `json:"k"`
	// Index is the process's number in the run, 0 to K−1: its arrival
	// stream is seeded by Seed and Index.
	Index int    `json:"index"`
	Seed  uint64 `json:"seed"`
	// Rate is the arrival rate of work items per second; Fib the size of
	// an item (the item computes fib(Fib)).
	Rate float64 `json:"rate"`
	Fib  int     `json:"fib"`
	// StartAt is when arrivals begin (Unix nanoseconds), the same for
	// every process of a run; Duration how long they last; Warmup the
	// part of it that is not measured (the friendly pool's first
	// windows, the processes' start-up).
	StartAt  int64         `json:"start_at"`
	Duration time.Duration `json:"duration_ns"`
	Warmup   time.Duration `json:"warmup_ns"`
	// Optimal is the size of the optimal pool (0: budget / K); Case and
	// Controller name the run, for the trace's file names.
	Optimal    int    `json:"optimal,omitempty"`
	Fixed      int    `json:"fixed,omitempty"` // the static pool's size
	Case       string `json:"case,omitempty"`
	Controller string `json:"controller,omitempty"`
}

// WorkerResult is what one process measured: the latencies of every
// measured item and the pool's own figures.
type WorkerResult struct {
	Index int `json:"index"`
	// Work is each completed item's work latency (from its start on a
	// worker to its end), Queue each measured item's queue latency (from
	// its arrival to its start; items never started count with their
	// time queued by the end), both in microseconds.
	Work  []int32 `json:"work_us"`
	Queue []int32 `json:"queue_us"`
	// Completed counts the items that ended in the measured part; Sent
	// those that arrived in it.
	Completed int `json:"completed"`
	Sent      int `json:"sent"`
	// Ran counts every item that ended within the run, warm-up
	// included: CPUTime / Ran is the process's CPU time per item, the
	// item's own and everything else the process spent on it (the pool,
	// its loop, the runtime).
	Ran      int     `json:"ran"`
	Measured float64 `json:"measured_s"` // length of the measured part
	// ActiveMean is the mean active count over the loop's ticks (the
	// fixed size of a static pool).
	ActiveMean float64 `json:"active_mean"`
	Limit      int     `json:"limit"`
	// Tolerance is a friendly pool's grow margin (cpu.WithTolerance).
	Tolerance float64 `json:"tolerance,omitempty"`
	// Ticks counts the friendly pool's loop steps; CPUTime is the
	// process's own CPU time from the start of arrivals to the end.
	Ticks   int64         `json:"ticks"`
	CPUTime time.Duration `json:"cpu_ns"`
	Budget  float64       `json:"budget"`
	// Loop summarizes a friendly pool's loop over the measured part;
	// nil for a static pool.
	Loop *LoopSummary `json:"loop,omitempty"`
}

// LoopSummary is what a friendly pool's loop read and chose over the
// measured part of a run: the trace of every tick, summed up, so that
// each round of the suite says how the pool behaved in it.
type LoopSummary struct {
	// Ticks counts the loop's ticks; AtCount[n] those that ended with an
	// active count of n (index 0 unused).
	Ticks   int     `json:"ticks"`
	AtCount []int64 `json:"at_count"`
	// Grows and Shrinks count the changes of the active count.
	Grows   int `json:"grows"`
	Shrinks int `json:"shrinks"`
	// Share, Others and Free are the means over the ticks of the share
	// read and of the CPUs the rest of the host wanted and left free.
	Share  float64 `json:"share"`
	Others float64 `json:"others_cpus"`
	Free   float64 `json:"free_cpus"`
	// RunQueue is the time the process's threads spent runnable but not
	// running (the scheduler's run-queue delay, summed over the threads),
	// per second of the measured part: the mean number of its threads
	// waiting for a CPU. Steal is the host's steal time over it, in CPUs.
	RunQueue float64 `json:"runq_threads"`
	Steal    float64 `json:"steal_cpus"`

	prev    int
	sums    [3]float64
	rq0     time.Duration
	steal0  time.Duration
	t0      time.Time
	stealOK bool
}

// observe adds a tick.
func (l *LoopSummary) observe(s cpu.StepInfo) {
	if s.Active < 1 {
		return
	}
	for len(l.AtCount) <= s.Active {
		l.AtCount = append(l.AtCount, 0)
	}
	l.AtCount[s.Active]++
	switch {
	case l.prev == 0:
	case s.Active > l.prev:
		l.Grows++
	case s.Active < l.prev:
		l.Shrinks++
	}
	l.prev = s.Active
	if s.OK && !math.IsNaN(s.Free) {
		l.Ticks++
		l.sums[0] += s.Share
		l.sums[1] += s.Others
		l.sums[2] += s.Free
	}
	if !l.stealOK && s.Err == nil {
		l.steal0, l.stealOK = s.Sample.Steal, true
	}
	l.Steal = s.Sample.Steal.Seconds() // the last, until finish
}

// finish computes the means, the run-queue delay and the steal since
// start.
func (l *LoopSummary) finish() {
	if l.Ticks > 0 {
		n := float64(l.Ticks)
		l.Share, l.Others, l.Free = l.sums[0]/n, l.sums[1]/n, l.sums[2]/n
	}
	el := time.Since(l.t0).Seconds()
	if el > 0 {
		l.RunQueue = (runQueueDelay() - l.rq0).Seconds() / el
		if l.stealOK {
			l.Steal = (l.Steal - l.steal0.Seconds()) / el
		} else {
			l.Steal = 0
		}
	}
}

// String is one round's summary: "1 83%, 2 17%; 3↑ 3↓; free 1.12, others 0.88; runq 0.05".
func (l *LoopSummary) String() string {
	var b strings.Builder
	total := int64(0)
	for _, n := range l.AtCount {
		total += n
	}
	for c, n := range l.AtCount {
		if n > 0 && total > 0 {
			if b.Len() > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%d:%.0f%%", c, 100*float64(n)/float64(total))
		}
	}
	fmt.Fprintf(&b, ", %d↑ %d↓, free %.2f, others %.2f, share %.2f, runq %.2f, steal %.3f", l.Grows, l.Shrinks, l.Free, l.Others, l.Share, l.RunQueue, l.Steal)
	return b.String()
}

// Fib computes the n-th Fibonacci number the slow way: real CPU work
// whose length depends on nothing but n and the CPU it gets.
func Fib(n int) int {
	if n < 2 {
		return n
	}
	return Fib(n-1) + Fib(n-2)
}

// sink keeps the compiler from removing the work.
var sink atomic.Int64

// item is one work item's times, from the run's start.
type item struct {
	arrival, start, end time.Duration
}

// Worker runs one process's part of a run: an open-loop arrival stream of
// fib items through a pool configured by c, and returns what it measured.
// It stops by itself after c.Duration; items still queued then are
// dropped, items running finish.
func Worker(ctx context.Context, c WorkerConfig) (*WorkerResult, error) {
	if c.K < 1 || c.Rate <= 0 || c.Duration <= 0 || c.Warmup >= c.Duration || c.Fib < 1 || c.Fib > 45 {
		return nil, fmt.Errorf("cpusuite: bad worker config %+v", c)
	}
	budget := cpu.ReadBudget(os.DirFS("/")).CPUs
	var (
		opts      []cpu.Option
		mu        sync.Mutex
		activeSum float64
		activeN   int
		loop      *LoopSummary
		tr        *tracer
		pool      *cpu.Pool
	)
	traceDir := os.Getenv(TraceEnv)
	switch c.Pool {
	case "ignorant":
		opts = append(opts, cpu.WithFixed(int(math.Ceil(budget))))
	case "optimal":
		n := c.Optimal
		if n == 0 {
			n = max(1, int(math.Round(budget/float64(c.K))))
		}
		opts = append(opts, cpu.WithFixed(n))
	case "static":
		if c.Fixed < 1 {
			return nil, fmt.Errorf("cpusuite: a static pool of %d workers", c.Fixed)
		}
		opts = append(opts, cpu.WithFixed(c.Fixed))
	case "hog":
		return hog(ctx, c, budget)
	case "friendly":
		opts = append(opts, cpu.WithBudget(budget), cpu.WithOvercommit(c.Overcommit))
		if c.Tolerance > 0 {
			// 0 is the default, not a tolerance of 0 (a controller
			// names its tolerance only when it departs from the default).
			opts = append(opts, cpu.WithTolerance(c.Tolerance))
		}
		opts = append(opts, cpu.WithObserver(func(s cpu.StepInfo) {
			mu.Lock()
			activeSum += float64(s.Active)
			activeN++
			if loop != nil {
				loop.observe(s)
			}
			if tr != nil {
				tr.observe(s)
			}
			mu.Unlock()
		}))
		if traceDir != "" {
			tr = &tracer{start: time.Unix(0, c.StartAt), pool: func() cpu.Stats { return pool.Stats() }}
		}
	default:
		return nil, fmt.Errorf("cpusuite: unknown pool %q", c.Pool)
	}
	mu.Lock()
	pool, err := cpu.NewPool(opts...)
	mu.Unlock()
	if err != nil {
		return nil, err
	}
	defer pool.Close()

	start := time.Unix(0, c.StartAt)
	if err := waitUntil(ctx, start); err != nil {
		return nil, err
	}
	cpu0 := processCPUTime()
	runCtx, cancel := context.WithDeadline(ctx, start.Add(c.Duration))
	defer cancel()
	if c.Pool == "friendly" {
		// The loop's summary covers the measured part.
		measured := time.NewTimer(time.Until(start.Add(c.Warmup)))
		defer measured.Stop()
		go func() {
			select {
			case <-measured.C:
			case <-runCtx.Done():
				return
			}
			l := &LoopSummary{rq0: runQueueDelay(), t0: time.Now()}
			mu.Lock()
			loop = l
			mu.Unlock()
		}()
	}

	// The arrival schedule: Poisson, seeded per process.
	rng := rand.New(rand.NewPCG(c.Seed, uint64(c.Index)+1))
	var arrivals []time.Duration
	for at := time.Duration(0); ; {
		at += time.Duration(rng.ExpFloat64() / c.Rate * float64(time.Second))
		if at >= c.Duration {
			break
		}
		arrivals = append(arrivals, at)
	}
	items := make([]item, len(arrivals))
	started := make([]bool, len(arrivals))
	var startedMu sync.Mutex
	for i, at := range arrivals {
		if d := time.Until(start.Add(at)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-runCtx.Done():
				t.Stop()
			}
		}
		if runCtx.Err() != nil {
			break
		}
		items[i].arrival = at
		err := pool.Go(runCtx, func(context.Context) {
			s := time.Since(start)
			sink.Add(int64(Fib(c.Fib)))
			e := time.Since(start)
			startedMu.Lock()
			items[i].start, items[i].end, started[i] = s, e, true
			startedMu.Unlock()
		})
		if err != nil {
			return nil, err
		}
	}
	<-runCtx.Done()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st := pool.Stats()
	mu.Lock()
	if loop != nil {
		loop.finish()
	}
	mu.Unlock()
	pool.Close()
	cpu1 := processCPUTime()

	res := &WorkerResult{Index: c.Index, Limit: st.Limit, Tolerance: st.Tolerance, Ticks: st.Ticks, Budget: budget,
		Measured: (c.Duration - c.Warmup).Seconds(),
		CPUTime:  cpu1 - cpu0}
	mu.Lock()
	if tr != nil {
		if err := tr.write(traceDir, fmt.Sprintf("trace-%s-%s-%d-%d.tsv", c.Case, c.Controller, c.Index, c.StartAt)); err != nil {
			mu.Unlock()
			return nil, err
		}
	}
	res.Loop = loop
	res.ActiveMean = float64(st.Limit)
	if activeN > 0 {
		res.ActiveMean = activeSum / float64(activeN)
	}
	mu.Unlock()
	startedMu.Lock()
	defer startedMu.Unlock()
	for i, it := range items {
		done := started[i] && it.end <= c.Duration
		if done {
			res.Ran++
		}
		// Throughput: every item that ended in the measured part, whenever
		// it arrived. Work latency: the items that started in it and
		// ended by the end of the run.
		if done && it.end > c.Warmup {
			res.Completed++
		}
		if done && it.start >= c.Warmup {
			res.Work = append(res.Work, us(it.end-it.start))
		}
		// Queue latency: the items that arrived in the measured part; an
		// item never started counts with its time queued by the end.
		if arrivals[i] < c.Warmup {
			continue
		}
		res.Sent++
		if started[i] {
			res.Queue = append(res.Queue, us(it.start-it.arrival))
		} else {
			res.Queue = append(res.Queue, us(c.Duration-arrivals[i]))
		}
	}
	return res, nil
}

// hog spins one thread from the start of arrivals to the end of the run:
// a neighbour that is no pool at all.
func hog(ctx context.Context, c WorkerConfig, budget float64) (*WorkerResult, error) {
	start := time.Unix(0, c.StartAt)
	if err := waitUntil(ctx, start); err != nil {
		return nil, err
	}
	cpu0 := processCPUTime()
	end := start.Add(c.Duration)
	for time.Now().Before(end) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sink.Add(int64(Fib(20)))
	}
	return &WorkerResult{Index: c.Index, Budget: budget, ActiveMean: 1, Limit: 1,
		Measured: (c.Duration - c.Warmup).Seconds(), CPUTime: processCPUTime() - cpu0}, nil
}

// waitUntil waits for t, or for ctx to be done.
func waitUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func us(d time.Duration) int32 {
	return int32(min(max(d.Microseconds(), 0), math.MaxInt32))
}

// quantile returns the q-quantile (nearest rank) of xs, in milliseconds;
// xs is sorted in place.
func quantile(xs []int32, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return float64(xs[min(max(i, 0), len(xs)-1)]) / 1000
}

var errNoResult = errors.New("cpusuite: a process printed no result")
