// Package kvrange is bench/inproc's kv-range service written with the
// standard library only.
package kvrange

import (
	"context"
	"sync"
	"time"
)

func build(d time.Duration) *Service {
	const (
		chunkKeys = 64
		chunk     = 5 * time.Millisecond
	)
	var index sync.RWMutex // resource: kv:index
	chunks := int64(d / 2 / chunk)
	values := make([]uint64, chunks*chunkKeys) // guarded by index
	return &Service{
		Light: func(ctx context.Context, i int) error {
			key := (i * 7919) % len(values)
			if i%5 == 4 { // a get
				index.RLock()
				defer index.RUnlock()
				_ = values[key]
				return sleep(ctx, time.Millisecond)
			}
			index.Lock()
			defer index.Unlock()
			values[key] = uint64(i)
			return sleep(ctx, time.Millisecond)
		},
		Culprit: func(ctx context.Context) error {
			index.RLock()
			defer index.RUnlock()
			start := time.Now()
			var sum uint64
			for c := range chunks {
				for _, v := range values[c*chunkKeys : (c+1)*chunkKeys] {
					sum += v
				}
				if err := paceTo(ctx, start, c, chunk); err != nil {
					return err
				}
			}
			_ = sum
			return nil
		},
	}
}

var _ = build
