// Package bufferpool is bench/inproc's buffer-pool service written with
// the standard library only.
package bufferpool

import (
	"context"
	"math/rand/v2"
	"time"
)

const (
	poolPages    = 2000
	hotPages     = 1500
	pageRead     = 2 * time.Millisecond
	readAhead    = 16
	pointReadCPU = 200 * time.Microsecond
	coldBase     = 1 << 32
)

func build(d time.Duration, seed uint64) *Service {
	pool := newLRU(poolPages) // resource: buffer-pool
	for p := range uint64(hotPages) {
		pool.put(p, 1)
	}
	const pointPages = 8
	ios := int64(d / 2 / pageRead)
	return &Service{
		Light: func(ctx context.Context, i int) error {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			return pointRead(ctx, pool, rng, pointPages)
		},
		Culprit: func(ctx context.Context) error {
			return scan(ctx, pool, coldBase, ios, readAhead)
		},
	}
}

var _ = build

// read makes page key resident: a hit is free, a miss waits for a page
// read.
func read(ctx context.Context, p *lru, key uint64) error {
	if p.get(key) {
		return nil
	}
	if err := sleep(ctx, pageRead); err != nil {
		return err
	}
	p.put(key, 1)
	return nil
}

func pointRead(ctx context.Context, pool *lru, rng *rand.Rand, n int) error {
	for range n {
		if err := read(ctx, pool, rng.Uint64N(hotPages)); err != nil {
			return err
		}
	}
	return sleep(ctx, pointReadCPU)
}

func scan(ctx context.Context, pool *lru, base uint64, ios, per int64) error {
	start := time.Now()
	next := base
	for i := range ios {
		if err := paceTo(ctx, start, i, pageRead); err != nil {
			return err
		}
		for range per {
			pool.put(next, 1)
			next++
		}
	}
	return nil
}
