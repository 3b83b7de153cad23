// Package tworesources is bench/inproc's two-resources service written
// with the standard library only.
package tworesources

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

const (
	poolPages = 2000
	hotPages  = 1500
	pageRead  = 2 * time.Millisecond
	coldBase  = 1 << 32
)

func build(d time.Duration, seed uint64) *Service {
	const (
		readPages  = 4
		scanPerIO  = 32
		batchIOs   = 10
		batchPerIO = 16
		batchGap   = 4 * time.Millisecond
		insertWork = time.Millisecond
		batchBase  = coldBase + 1<<31
	)
	pool := newLRU(poolPages) // resource: buffer-pool
	for p := range uint64(hotPages) {
		pool.put(p, 1)
	}
	var table sync.Mutex // resource: table:orders
	scanIOs := int64(d / 2 / pageRead)
	cycle := batchIOs*pageRead + batchGap
	cycles := int64(d / 2 / cycle)

	read := func(ctx context.Context, key uint64) error {
		if pool.get(key) {
			return nil
		}
		if err := sleep(ctx, pageRead); err != nil {
			return err
		}
		pool.put(key, 1)
		return nil
	}

	batchUpdate := func(ctx context.Context) error {
		start := time.Now()
		next := uint64(batchBase)
		for c := range cycles {
			table.Lock()
			at := start.Add(time.Duration(c) * cycle)
			for j := range batchIOs {
				if err := sleep(ctx, time.Until(at.Add(time.Duration(j+1)*pageRead))); err != nil {
					table.Unlock()
					return err
				}
				for range batchPerIO {
					pool.put(next, 1)
					next++
				}
			}
			table.Unlock()
			if err := sleep(ctx, time.Until(at.Add(cycle))); err != nil {
				return err
			}
		}
		return nil
	}

	scan := func(ctx context.Context) error {
		start := time.Now()
		next := uint64(coldBase)
		for i := range scanIOs {
			if err := paceTo(ctx, start, i, pageRead); err != nil {
				return err
			}
			for range scanPerIO {
				pool.put(next, 1)
				next++
			}
		}
		return nil
	}

	return &Service{
		Light: func(ctx context.Context, i int) error {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			if i%5 != 4 {
				for range readPages {
					if err := read(ctx, rng.Uint64N(hotPages)); err != nil {
						return err
					}
				}
				return sleep(ctx, 200*time.Microsecond)
			}
			table.Lock()
			defer table.Unlock()
			if err := read(ctx, rng.Uint64N(hotPages)); err != nil {
				return err
			}
			return sleep(ctx, insertWork)
		},
		Culprit: func(ctx context.Context) error {
			batchDone := make(chan error, 1)
			go func() { batchDone <- batchUpdate(ctx) }()
			err := scan(ctx)
			if berr := <-batchDone; err == nil {
				err = berr
			}
			return err
		},
	}
}

var _ = build
