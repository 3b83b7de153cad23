// Package backuplock is bench/inproc's backup-lock service written with
// the standard library only: the recall corpus of moirai vet.
package backuplock

import (
	"context"
	"sync"
	"time"
)

func build(d time.Duration) *Service {
	const (
		nTables     = 8
		row         = 5 * time.Millisecond
		backupDelay = 100 * time.Millisecond
		backupCopy  = 20 * time.Millisecond
	)
	var global sync.RWMutex        // resource: global-read-lock
	var tables [nTables]sync.Mutex // resource: table:t0..t7
	rows := int64(d / 2 / row)

	write := func(ctx context.Context, table *sync.Mutex, fn func() error) error {
		global.RLock()
		defer global.RUnlock()
		table.Lock()
		defer table.Unlock()
		return fn()
	}

	backup := func(ctx context.Context) {
		if err := sleep(ctx, backupDelay); err != nil {
			return
		}
		global.Lock()
		defer global.Unlock()
		_ = sleep(ctx, backupCopy)
	}

	return &Service{
		Light: func(ctx context.Context, i int) error {
			return write(ctx, &tables[i%nTables], func() error {
				return sleep(ctx, time.Millisecond)
			})
		},
		Culprit: func(ctx context.Context) error {
			var wg sync.WaitGroup
			defer wg.Wait()
			return write(ctx, &tables[0], func() error {
				wg.Go(func() { backup(context.WithoutCancel(ctx)) })
				start := time.Now()
				for i := range rows {
					if err := paceTo(ctx, start, i, row); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
}

var _ = build
