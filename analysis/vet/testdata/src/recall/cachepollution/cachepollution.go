// Package cachepollution is bench/inproc's cache-pollution service written
// with the standard library only.
package cachepollution

import (
	"context"
	"math/rand/v2"
	"time"
)

func build(d time.Duration, seed uint64) *Service {
	const (
		cacheKiB  = 4096
		hot       = 256
		hotKiB    = 8
		hit       = 200 * time.Microsecond
		recompute = 15 * time.Millisecond
		bigKiB    = 256
		bigPage   = 4 * time.Millisecond
		bigBase   = 1 << 32
	)
	cache := newLRU(cacheKiB) // resource: query-cache
	for q := range uint64(hot) {
		cache.put(q, hotKiB)
	}
	pages := int64(d / 2 / bigPage)
	return &Service{
		Light: func(ctx context.Context, i int) error {
			q := rand.New(rand.NewPCG(seed, uint64(i))).Uint64N(hot)
			if !cache.get(q) {
				if err := sleep(ctx, recompute); err != nil {
					return err
				}
				cache.put(q, hotKiB)
			}
			return sleep(ctx, hit)
		},
		Culprit: func(ctx context.Context) error {
			start := time.Now()
			for p := range pages {
				if err := paceTo(ctx, start, p, bigPage); err != nil {
					return err
				}
				cache.put(bigBase+uint64(p), bigKiB)
			}
			return nil
		},
	}
}

var _ = build
