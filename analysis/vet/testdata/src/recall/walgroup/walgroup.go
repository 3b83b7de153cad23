// Package walgroup is bench/inproc's wal-group service written with the
// standard library only.
package walgroup

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

func build(d time.Duration) *Service {
	const (
		write       = 4 * time.Millisecond
		fsync       = time.Millisecond
		groupRecord = 100
	)
	var wal sync.Mutex // resource: wal-writer
	var inserted atomic.Int64
	var flushed int64
	groups := int64(d / 2 / (write + fsync))
	return &Service{
		Light: func(ctx context.Context, _ int) error {
			lsn := inserted.Add(1)
			wal.Lock()
			defer wal.Unlock()
			if flushed >= lsn {
				return nil
			}
			upto := inserted.Load()
			if err := sleep(ctx, fsync); err != nil {
				return err
			}
			flushed = upto
			return nil
		},
		Culprit: func(ctx context.Context) error {
			wal.Lock()
			defer wal.Unlock()
			start := time.Now()
			for i := range groups {
				end := start.Add(time.Duration(i+1) * (write + fsync))
				inserted.Add(groupRecord)
				if err := sleep(ctx, time.Until(end.Add(-fsync))); err != nil {
					return err
				}
				upto := inserted.Load()
				if err := sleep(ctx, time.Until(end)); err != nil {
					return err
				}
				flushed = upto
			}
			return nil
		},
	}
}

var _ = build
