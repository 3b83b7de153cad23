// Package cpuheavy is bench/inproc's cpu-heavy service written with the
// standard library only: the CPU tokens are a buffered channel.
package cpuheavy

import (
	"context"
	"crypto/sha256"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

func build(d time.Duration) *Service {
	const (
		cores   = 2
		short   = 500 * time.Microsecond
		quantum = 5 * time.Millisecond
		workers = 4
	)
	cpu := &cpuTokens{tokens: make(chan struct{}, cores)} // resource: cpu
	shortIters := int(hashesPerMs * short / time.Millisecond)
	quantumIters := int(hashesPerMs * quantum / time.Millisecond)
	perWorker := int64(d/2/quantum) * cores / workers
	return &Service{
		Light: func(ctx context.Context, i int) error {
			return cpu.run(ctx, shortIters, uint64(i))
		},
		Culprit: func(ctx context.Context) error {
			errs := make([]error, workers)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for q := range perWorker {
						if err := cpu.run(ctx, quantumIters, uint64(w)<<32|uint64(q)); err != nil {
							errs[w] = err
							return
						}
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
	}
}

var _ = build

// cpuTokens is the service's processors: one token per core.
type cpuTokens struct {
	tokens chan struct{}
}

// run computes iters hashes holding a token.
func (c *cpuTokens) run(ctx context.Context, iters int, seed uint64) error {
	select {
	case c.tokens <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	hashWork(iters, seed)
	<-c.tokens
	return nil
}

var hashSink atomic.Uint64

const yieldEvery = 256

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

const hashesPerMs = 12000
