// Package undopurge is bench/inproc's undo-purge service written with the
// standard library only.
package undopurge

import (
	"context"
	"sync"
	"time"
)

func build(d time.Duration) *Service {
	const (
		record = 5 * time.Millisecond
		batch  = 50
	)
	var undo sync.Mutex // resource: undo-log
	backlog := int64(d * 2 / 5 / record)
	return &Service{
		Light: func(ctx context.Context, _ int) error {
			undo.Lock()
			defer undo.Unlock()
			return sleep(ctx, time.Millisecond)
		},
		Culprit: func(ctx context.Context) error {
			var done int64
			purge := func() error {
				undo.Lock()
				defer undo.Unlock()
				start := time.Now()
				for i := range min(batch, backlog-done) {
					if err := paceTo(ctx, start, i, record); err != nil {
						return err
					}
					done++
				}
				return nil
			}
			for done < backlog {
				if err := purge(); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

var _ = build
