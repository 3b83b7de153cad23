package inproc

import (
	"context"
	"crypto/sha256"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/bench"
)

// cpu-heavy models A-c12: long CPU-bound queries take the processors and
// short queries wait for one.
//
// The model: the service runs query work under CPU tokens, one per core
// (as a database's thread concurrency limit or a search engine's search
// pool sized to the cores does), handed out in arrival order; a query
// computes for a quantum holding a token and gives it back between quanta,
// so a long query is time-sliced with everybody else. The tokens are a raw
// resource of kind moirai.KindCPU: a wait for a token is WaitBegin/WaitEnd,
// a token held is Acquire/Release. The computation is real: SHA-256 chained
// over its own output, a fixed number of hashes per millisecond of the
// reference machine (see hashesPerMs).
//
// Parameters: 2 tokens (GOMAXPROCS is 2). Short queries arrive at 200/s
// and each computes for 0.5 ms in one quantum. 64 worker slots. A quarter
// into the run the culprit, a parallel query of 4 workers, computes for
// half the run's worth of both cores in quanta of 5 ms (150 quanta per
// worker over a 3 s run), each worker checking its context and reporting
// the query's progress after every quantum. All work yields its goroutine
// every 256 hashes (see yieldEvery). A short query then waits for a token
// behind the culprit's queued quanta.
func init() {
	bench.Register(bench.Case{
		Suite: suite, Name: "cpu-heavy", Models: "A-c12",
		Resource: "CPU (tokens, one per core)",
		Culprit:  "long CPU-bound parallel query",
		Victims:  "short queries",
		// The culprit slows the victims rather than blocking them: an
		// objective of 20 ms (3–6× their normal p99 on the reference
		// machine) is one the slowdown breaks.
		SLO:         20 * time.Millisecond,
		ProcessWide: true,
		Build:       buildCPUHeavy,
	})
}

func buildCPUHeavy(env *bench.Env) (*bench.Service, error) {
	const (
		cores   = 2
		short   = 500 * time.Microsecond
		quantum = 5 * time.Millisecond
		workers = 4
	)
	res, err := env.Ctl.Register("cpu", moirai.KindCPU, cores)
	if err != nil {
		return nil, err
	}
	cpu := &cpuTokens{res: res, tokens: make(chan struct{}, cores)}
	shortIters := int(hashesPerMs * short / time.Millisecond)
	quantumIters := int(hashesPerMs * quantum / time.Millisecond)
	perWorker := int64(env.Duration/2/quantum) * cores / workers
	return &bench.Service{
		Rate:    200,
		Workers: 64,
		Light: func(ctx context.Context, i int) error {
			return cpu.run(ctx, shortIters, uint64(i))
		},
		Culprit: func(ctx context.Context) error {
			t := moirai.From(ctx)
			total := perWorker * workers
			var done atomic.Int64
			errs := make([]error, workers)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for q := range perWorker {
						if err := cpu.run(ctx, quantumIters, uint64(w)<<32|uint64(q)); err != nil {
							errs[w] = err
							return
						}
						t.Progress(done.Add(1), total)
					}
				})
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					return err
				}
			}
			return nil
		},
	}, nil
}

// cpuTokens is the service's processors: one token per core, taken in
// arrival order (a full buffered channel queues its senders FIFO).
type cpuTokens struct {
	res    *moirai.Resource
	tokens chan struct{}
}

// run computes iters hashes holding a token, for the task in ctx.
func (c *cpuTokens) run(ctx context.Context, iters int, seed uint64) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	select {
	case c.tokens <- struct{}{}: // a free core
	default:
		c.res.WaitBegin(ctx)
		select {
		case c.tokens <- struct{}{}:
			c.res.WaitEnd(ctx)
		case <-ctx.Done():
			c.res.WaitEnd(ctx)
			return context.Cause(ctx)
		}
	}
	c.res.Acquire(ctx, 1)
	hashWork(iters, seed)
	c.res.Release(ctx, 1)
	<-c.tokens
	return nil
}

var hashSink atomic.Uint64

// yieldEvery is how many hashes the work does between two yields of its
// goroutine (a few tens of microseconds): the points where a query
// executor lets the scheduler run the goroutines that serve requests, as
// an OS scheduler would wake an interactive thread, so that a short query
// waits for a CPU token, the modelled resource, and not for Go's 10 ms
// preemption of a busy goroutine.
const yieldEvery = 256

// hashWork chains iters SHA-256 hashes from seed: real CPU work.
func hashWork(iters int, seed uint64) {
	var h [32]byte
	for i := range 8 {
		h[i] = byte(seed >> (8 * i))
	}
	for i := range iters {
		h = sha256.Sum256(h[:])
		if i%yieldEvery == yieldEvery-1 {
			runtime.Gosched()
		}
	}
	hashSink.Add(uint64(h[0]))
}

// hashesPerMs is how many hashWork iterations a core of the reference
// machine (the 2-core machine the suite is sized for) does in a
// millisecond. A fixed count, not a calibration, keeps the work of every
// run the same: a calibration on a shared machine varied by a quarter.
const hashesPerMs = 12000
