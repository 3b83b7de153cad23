package inproc

import (
	"context"
	"time"

	"github.com/moirai-go/moirai/bench"
)

// worker-slots models A-c2/c9/c15 and P-c3/c12: a bounded pool of worker
// slots (a thread pool, a connection pool) where slow requests occupy the
// slots and fast requests queue for one.
//
// Parameters: 16 front workers (the queue admission controllers watch) in
// front of 8 worker slots; fast requests arrive at 200/s and each holds
// a slot for 5 ms (about 12 % of the pool). A quarter into the run the
// culprit, a parallel scan, takes 7 of the 8 slots and works for half the
// run in steps of 10 ms, reporting progress; the fast requests are left
// one slot, which they need at 100 % utilization. Its noisy client
// (--culprit stream) sends slow requests of one slot and 40 ms from 7
// connections, back to back, for half the run.
func init() {
	bench.Register(bench.Case{
		Suite: suite, Name: "worker-slots", Models: "A-c2/c9/c15, P-c3/c12",
		Resource: "bounded worker slots (Queue)",
		Culprit:  "a slow parallel request occupying most slots",
		Victims:  "fast requests queued for a slot",
		SLO:      50 * time.Millisecond,
		Build:    buildWorkerSlots,
	})
}

func buildWorkerSlots(env *bench.Env) (*bench.Service, error) {
	slots := env.Ctl.Semaphore("worker-slots", 8)
	const step = 10 * time.Millisecond
	n := int64(env.Duration / 2 / step)
	return &bench.Service{
		Rate:    200,
		Workers: 16, // the front pool: requests waiting for a slot hold a worker
		Light: func(ctx context.Context, _ int) error {
			p, err := slots.Acquire(ctx, 1)
			if err != nil {
				return err
			}
			defer p.Release()
			return sleep(ctx, 5*time.Millisecond)
		},
		Culprit: func(ctx context.Context) error {
			p, err := slots.Acquire(ctx, 7)
			if err != nil {
				return err
			}
			defer p.Release()
			return steps(ctx, n, step)
		},
		// The noisy client: 7 connections, each sending slow requests
		// that hold one slot for 4 steps (40 ms).
		Noisy: func(ctx context.Context, _ int) error {
			p, err := slots.Acquire(ctx, 1)
			if err != nil {
				return err
			}
			defer p.Release()
			return steps(ctx, noisySteps, step)
		},
		NoisyClients: 12,
	}, nil
}
