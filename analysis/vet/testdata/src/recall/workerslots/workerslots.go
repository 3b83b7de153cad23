// Package workerslots is bench/inproc's worker-slots service written with
// the standard library and golang.org/x/sync/semaphore (a weighted
// semaphore: the culprit takes 7 slots at once).
package workerslots

import (
	"context"
	"time"

	"golang.org/x/sync/semaphore"
)

func build(d time.Duration) *Service {
	slots := semaphore.NewWeighted(8) // resource: worker-slots
	const step = 10 * time.Millisecond
	steps := int64(d / 2 / step)
	return &Service{
		Light: func(ctx context.Context, _ int) error {
			if err := slots.Acquire(ctx, 1); err != nil {
				return err
			}
			defer slots.Release(1)
			return sleep(ctx, 5*time.Millisecond)
		},
		Culprit: func(ctx context.Context) error {
			if err := slots.Acquire(ctx, 7); err != nil {
				return err
			}
			defer slots.Release(7)
			start := time.Now()
			for i := range steps {
				if err := paceTo(ctx, start, i, step); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

var _ = build
