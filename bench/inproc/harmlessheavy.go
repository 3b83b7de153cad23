package inproc

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/bench"
)

// harmless-heavy is the case no controller should act in: a large but
// honest task uses half of a buffer pool that has room for it beside the
// hot set, so the point reads keep hitting and nobody is hurt. A policy
// that acts on a large share alone, without the others' misses rising,
// cancels it; one that reads the resource's trajectory leaves it alone.
//
// Parameters: the point reads of buffer-pool (200/s, 8 pages of a hot set
// of 1,500, 0.2 ms of work, a 2 ms page read per miss) on a pool of 4,000
// pages. A quarter into the run the heavy task (a report) reads 2,000 cold
// pages in read-ahead I/Os of 16 (2 ms each), keeps them charged to itself
// and works on them for the rest of half the run in steps of 10 ms,
// reporting progress. The pool never fills: no hot page is evicted. The
// report runs as a task of its own keyed bench.HarmlessKey, so the oracle
// controller knows it is not a culprit.
func init() {
	bench.Register(bench.Case{
		Suite: suite, Name: "harmless-heavy", Models: "honest heavy work",
		Resource: "buffer pool (Memory) with room to spare",
		Culprit:  "none: a report using half the pool, evicting nothing",
		Victims:  "point reads, which keep hitting",
		SLO:      20 * time.Millisecond,
		Build:    buildHarmlessHeavy,
	})
}

func buildHarmlessHeavy(env *bench.Env) (*bench.Service, error) {
	const (
		capacity   = 2 * poolPages
		heavyPages = poolPages
		pointPages = 8
		step       = 10 * time.Millisecond
	)
	pool := newLRU(env.Ctl.Memory("buffer-pool", capacity), capacity)
	for p := range uint64(hotPages) {
		pool.put(context.Background(), p, 1, nil)
	}
	report := func(ctx context.Context) error {
		own := &holder{ctx: ctx}
		defer pool.release(own)
		t, start := moirai.From(ctx), time.Now()
		ios := int64(heavyPages / readAhead)
		work := int64((env.Duration/2 - time.Duration(ios)*pageRead) / step)
		next := uint64(coldBase)
		for i := range ios {
			if err := paceTo(ctx, start, i, pageRead); err != nil {
				return err
			}
			for range readAhead {
				pool.put(ctx, next, 1, own)
				next++
			}
			t.Progress(i+1, ios+work)
		}
		loaded := time.Now()
		for i := range work {
			if err := paceTo(ctx, loaded, i, step); err != nil {
				return err
			}
			t.Progress(ios+i+1, ios+work)
		}
		return nil
	}
	return &bench.Service{
		Rate:    200,
		Workers: 64,
		Light: func(ctx context.Context, i int) error {
			rng := rand.New(rand.NewPCG(env.Seed, uint64(i)))
			return pointRead(ctx, pool, rng, pointPages)
		},
		Culprit: func(ctx context.Context) error {
			spec := moirai.Spec{Class: "culprit-heavy", Key: bench.HarmlessKey, Cancellable: true}
			if env.Reexecute {
				return moirai.Retry(ctx, env.Ctl, spec, report, env.RetryOptions...)
			}
			tctx, t := env.Ctl.Begin(ctx, spec)
			err := report(tctx)
			t.End(err)
			return err
		},
	}, nil
}
