package inproc

import (
	"context"
	"sync"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/bench"
)

// The cases of this file are the shapes where the choice of what to cancel
// decides how much work is lost: two heavy holders of one resource, each
// harmless alone, where the newer one oversubscribes it, and a monolithic
// writer that cannot complete while a steady read load lasts.
//
// In the two-holder cases the culprit request plays a report service: it
// runs three reports (tasks of class "culprit-report", run through
// moirai.Retry when the controller re-executes) one after another. The
// first runs alone and ends, so the runtime has seen a report complete;
// the third starts when the second is half done and oversubscribes the
// resource until the second ends. The first two are harmless alone (their
// Key is bench.HarmlessKey, which the oracle controller reads); the third
// is the culprit the oracle cancels at its first acquisition. Cancelling
// the third loses next to nothing; cancelling the second loses half a
// report.
//
// Parameters: a report lasts 0.3 of the run; the first starts 0.1 into
// the run, the second at 0.45, the third at 0.6. Light requests arrive
// at 200/s with an objective of 50 ms. No worker slots: nothing but the
// case's resource is contended.
func init() {
	bench.Register(bench.Case{
		Suite: suite, Name: "two-reports-pool", Models: "a second report on a pgxpool",
		Resource: "connection pool (Queue), one acquisition per query",
		Culprit:  "a second report fanning out over the pool while one runs",
		Victims:  "short queries waiting for a connection",
		SLO:      50 * time.Millisecond,
		Build:    buildTwoReportsPool,
	})
	bench.Register(bench.Case{
		Suite: suite, Name: "two-heavy-semaphore", Models: "a bulkhead's weighted semaphore",
		Resource: "weighted semaphore (Queue), units held for the whole job",
		Culprit:  "a second batch job taking half the units while one holds the other half",
		Victims:  "short requests needing one unit",
		SLO:      50 * time.Millisecond,
		Build:    buildTwoHeavySemaphore,
	})
	bench.Register(bench.Case{
		Suite: suite, Name: "compaction-rwlock", Models: "a map's compaction",
		Resource: "one reader/writer lock (Lock)",
		Culprit:  "a compaction holding the write lock for 0.3 of the run",
		Victims:  "readers of the map",
		SLO:      50 * time.Millisecond,
		// The write lock, held for 0.3 of the run in one stretch.
		LockExposure: 0.3,
		Build:        buildCompaction,
	})
}

// reports runs the three reports of a two-holder case, each as a task of
// class "culprit-report" begun under ctx (through moirai.Retry when env
// re-executes), and returns the first error. report is one report's work.
func reports(ctx context.Context, env *bench.Env, report func(ctx context.Context) error) error {
	d := env.Duration
	run := func(key string) error {
		spec := moirai.Spec{Class: "culprit-report", Key: key, Cancellable: true}
		if env.Reexecute {
			return moirai.Retry(ctx, env.Ctl, spec, report, env.RetryOptions...)
		}
		tctx, t := env.Ctl.Begin(ctx, spec)
		err := report(tctx)
		t.End(err)
		return err
	}
	start := time.Now()
	// The harness sends the culprit a tenth into the run (CulpritAt).
	if err := run(bench.HarmlessKey); err != nil {
		return err
	}
	if err := sleep(ctx, time.Until(start.Add(d*35/100))); err != nil {
		return err
	}
	var wg sync.WaitGroup
	var second error
	wg.Go(func() { second = run(bench.HarmlessKey) })
	third := sleep(ctx, d*15/100)
	if third == nil {
		third = run("oversubscribes")
	}
	wg.Wait()
	if second != nil {
		return second
	}
	return third
}

func buildTwoReportsPool(env *bench.Env) (*bench.Service, error) {
	// A pool of 10 connections; a report runs 6 workers, each taking a
	// connection per query of 200 ms, reporting progress per query. One
	// report leaves 4 connections to the light queries (3 ms each, 0.6
	// of a connection); two want 12, and a light query queues behind the
	// reports' workers, a connection coming free every 20 ms.
	pool := env.Ctl.Semaphore("db-pool", 10)
	const (
		workers = 6
		query   = 200 * time.Millisecond
	)
	queries := int64(env.Duration*30/100/query) * workers
	report := func(ctx context.Context) error {
		t := moirai.From(ctx)
		var mu sync.Mutex
		var next, done int64
		var first error
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					mu.Lock()
					if next >= queries || first != nil {
						mu.Unlock()
						return
					}
					next++
					mu.Unlock()
					err := func() error {
						p, err := pool.Acquire(ctx, 1)
						if err != nil {
							return err
						}
						defer p.Release()
						return sleep(ctx, query)
					}()
					mu.Lock()
					if err != nil && first == nil {
						first = err
					}
					if err == nil {
						done++
						t.Progress(done, queries)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return first
	}
	return &bench.Service{
		Rate:      200,
		CulpritAt: 0.1,
		Light: func(ctx context.Context, _ int) error {
			p, err := pool.Acquire(ctx, 1)
			if err != nil {
				return err
			}
			defer p.Release()
			return sleep(ctx, 3*time.Millisecond)
		},
		Culprit: func(ctx context.Context) error { return reports(ctx, env, report) },
	}, nil
}

func buildTwoHeavySemaphore(env *bench.Env) (*bench.Service, error) {
	// 8 units; a batch job holds 4 for its whole length (steps of 10 ms,
	// reporting progress). One job leaves 4 units to the light requests
	// (2 ms each, one unit: under half a unit busy, a few units on a
	// loaded machine whose timers overshoot); two leave none.
	sem := env.Ctl.Semaphore("bulkhead", 8)
	const step = 10 * time.Millisecond
	n := int64(env.Duration * 30 / 100 / step)
	job := func(ctx context.Context) error {
		p, err := sem.Acquire(ctx, 4)
		if err != nil {
			return err
		}
		defer p.Release()
		return steps(ctx, n, step)
	}
	return &bench.Service{
		Rate:      200,
		CulpritAt: 0.1,
		Light: func(ctx context.Context, _ int) error {
			p, err := sem.Acquire(ctx, 1)
			if err != nil {
				return err
			}
			defer p.Release()
			return sleep(ctx, 2*time.Millisecond)
		},
		Culprit: func(ctx context.Context) error { return reports(ctx, env, job) },
	}, nil
}

func buildCompaction(env *bench.Env) (*bench.Service, error) {
	// A map behind one RWMutex: readers arrive at 200/s and read it (a
	// lookup of microseconds, shorter than the runtime's clock tick); a
	// compaction a quarter into the run takes the write lock and
	// rewrites the map for 0.3 of the run, in steps of 10 ms at which it
	// checks its context, without reporting progress (a monolithic
	// writer). Under this load no window is ever long enough for it.
	m := env.Ctl.RWMutex("map")
	table := make([]int, 1024)
	const step = 10 * time.Millisecond
	n := int64(env.Duration * 30 / 100 / step)
	return &bench.Service{
		Rate: 200,
		Light: func(ctx context.Context, i int) error {
			if err := m.RLock(ctx); err != nil {
				return err
			}
			defer m.RUnlock(ctx)
			_ = table[i%len(table)]
			return nil
		},
		Culprit: func(ctx context.Context) error {
			if err := m.Lock(ctx); err != nil {
				return err
			}
			defer m.Unlock()
			start := time.Now()
			for i := range n {
				if err := paceTo(ctx, start, i, step); err != nil {
					return err
				}
			}
			return nil
		},
	}, nil
}
