// Package tablelock is bench/inproc's table-lock service written with the
// standard library only.
package tablelock

import (
	"context"
	"sync"
	"time"
)

func build(d time.Duration) *Service {
	var table sync.Mutex // resource: table:orders
	const row = 5 * time.Millisecond
	rows := int64(d / 2 / row)
	return &Service{
		Light: func(ctx context.Context, _ int) error {
			table.Lock()
			defer table.Unlock()
			return sleep(ctx, time.Millisecond)
		},
		Culprit: func(ctx context.Context) error {
			table.Lock()
			defer table.Unlock()
			start := time.Now()
			for i := range rows {
				if err := paceTo(ctx, start, i, row); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

var _ = build
