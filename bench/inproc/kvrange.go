package inproc

import (
	"context"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/bench"
)

// kv-range models A-c16: a key-value store whose index is guarded by a
// reader/writer lock. An expensive range read holds the read lock while
// it scans; a put needs the write lock and waits; and since a waiting
// writer holds back the readers that arrive after it (the moirai RWMutex
// grants in arrival order, as sync.RWMutex does), the gets behind the
// first waiting put wait too.
//
// The index is real: a slice of values by key, read under the read lock
// and written under the write lock.
//
// Parameters: requests arrive at 200/s, 4 in 5 puts and 1 in 5 gets, each
// holding the index lock (write or read) for 1 ms of simulated I/O; 64
// worker slots. The index holds 64 keys per range chunk. A quarter into
// the run the culprit takes the read lock and scans the whole index for
// half the run, one chunk of 64 keys at a time (5 ms of simulated page
// reads each, paced against the scan's start so timer overshoot does not
// lengthen the hold), reporting progress and checking its context after
// each chunk. Its noisy client (--culprit stream) runs range reads of 4
// chunks (20 ms) from 4 connections, back to back, for half the run.
func init() {
	bench.Register(bench.Case{
		Suite: suite, Name: "kv-range", Models: "A-c16",
		Resource: "store index RWMutex (Lock)",
		Culprit:  "expensive range read holding the read lock while writes wait",
		Victims:  "puts (and the gets queued behind them)",
		SLO:      50 * time.Millisecond,
		// The read lock, held for half the run in one stretch, with a put
		// and the gets behind it waiting.
		LockExposure: 0.5,
		Build:        buildKVRange,
	})
}

func buildKVRange(env *bench.Env) (*bench.Service, error) {
	const (
		chunkKeys = 64
		chunk     = 5 * time.Millisecond
	)
	index := env.Ctl.RWMutex("kv:index")
	chunks := int64(env.Duration / 2 / chunk)
	values := make([]uint64, chunks*chunkKeys) // guarded by index
	// scan reads n chunks from chunk first under the read lock.
	scan := func(ctx context.Context, first, n int64) error {
		if err := index.RLock(ctx); err != nil {
			return err
		}
		defer index.RUnlock(ctx)
		t, start := moirai.From(ctx), time.Now()
		var sum uint64
		for c := range n {
			for _, v := range values[(first+c)*chunkKeys : (first+c+1)*chunkKeys] {
				sum += v
			}
			if err := paceTo(ctx, start, c, chunk); err != nil {
				return err
			}
			t.Progress(c+1, n)
		}
		_ = sum
		return nil
	}
	return &bench.Service{
		Rate:    200,
		Workers: 64,
		Light: func(ctx context.Context, i int) error {
			key := (i * 7919) % len(values)
			if i%5 == 4 { // a get
				if err := index.RLock(ctx); err != nil {
					return err
				}
				defer index.RUnlock(ctx)
				_ = values[key]
				return sleep(ctx, time.Millisecond)
			}
			// a put
			if err := index.Lock(ctx); err != nil {
				return err
			}
			defer index.Unlock()
			values[key] = uint64(i)
			return sleep(ctx, time.Millisecond)
		},
		Culprit: func(ctx context.Context) error { return scan(ctx, 0, chunks) },
		// The noisy client: range reads of 4 chunks (20 ms) each, over
		// successive ranges.
		Noisy: func(ctx context.Context, i int) error {
			return scan(ctx, int64(i)*noisySteps%(chunks-noisySteps+1), noisySteps)
		},
	}, nil
}
