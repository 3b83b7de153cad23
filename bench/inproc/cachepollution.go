package inproc

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/bench"
)

// cache-pollution models A-c10: a query cache keeps the results of hot
// searches; a large search streams its result pages into the cache, which
// pushes the hot results out, and the cached searches recompute.
//
// The cache is real: an LRU of result entries sized in KiB (see lru),
// accounted to a moirai Memory in KiB. The large search is charged (Use)
// for its result pages while they stay cached and it runs, and for every
// hot result its insertions push out (Evict); a cached search that misses
// waits for its recomputation (MissBegin/MissEnd), then caches the result
// again, shared.
//
// Parameters: a cache of 4 MiB; 256 hot searches with results of 8 KiB
// (2 MiB, they fit). Cached searches arrive at 200/s, pick a hot search
// uniformly, and take 0.2 ms of simulated work on a hit; a miss recomputes
// the result, 15 ms of simulated index search, before that work. 64 worker
// slots. A quarter into the run the large search runs for half the run: it
// produces a 256 KiB result page every 4 ms of simulated index search and
// caches it (64 MiB/s: the cache turns over every 64 ms, far faster than
// a hot search recurs, every 1.3 s), reporting progress and checking its
// context after each page; it lets its pages go when it ends.
func init() {
	bench.Register(bench.Case{
		Suite: suite, Name: "cache-pollution", Models: "A-c10",
		Resource: "query cache (Memory)",
		Culprit:  "large search evicting hot entries",
		Victims:  "cached searches",
		// The culprit slows the victims rather than blocking them: an
		// objective of 20 ms (3–6× their normal p99 on the reference
		// machine) is one the slowdown breaks.
		SLO:   20 * time.Millisecond,
		Build: buildCachePollution,
	})
}

func buildCachePollution(env *bench.Env) (*bench.Service, error) {
	const (
		cacheKiB  = 4096
		hot       = 256
		hotKiB    = 8
		hit       = 200 * time.Microsecond
		recompute = 15 * time.Millisecond
		bigKiB    = 256
		bigPage   = 4 * time.Millisecond
		bigBase   = 1 << 32 // keys of the large search's result pages
	)
	cache := newLRU(env.Ctl.Memory("query-cache", cacheKiB), cacheKiB)
	for q := range uint64(hot) {
		cache.put(context.Background(), q, hotKiB, nil)
	}
	pages := int64(env.Duration / 2 / bigPage)
	return &bench.Service{
		Rate:    200,
		Workers: 64,
		Light: func(ctx context.Context, i int) error {
			q := rand.New(rand.NewPCG(env.Seed, uint64(i))).Uint64N(hot)
			if !cache.get(q) {
				cache.mem.MissBegin(ctx)
				err := sleep(ctx, recompute)
				cache.mem.MissEnd(ctx)
				if err != nil {
					return err
				}
				cache.put(ctx, q, hotKiB, nil)
			}
			cache.mem.Use(ctx, hotKiB) // reading the cached result
			defer cache.mem.Free(ctx, hotKiB)
			return sleep(ctx, hit)
		},
		Culprit: func(ctx context.Context) error {
			own := &holder{ctx: ctx}
			defer cache.release(own)
			t, start := moirai.From(ctx), time.Now()
			for p := range pages {
				// Paced from the start, so timer overshoot does not slow
				// the search.
				if err := paceTo(ctx, start, int64(p), bigPage); err != nil {
					return err
				}
				cache.put(ctx, bigBase+uint64(p), bigKiB, own)
				t.Progress(p+1, pages)
			}
			return nil
		},
	}, nil
}
