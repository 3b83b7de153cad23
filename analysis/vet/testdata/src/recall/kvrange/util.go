package kvrange

import (
	"context"
	"time"
)

// Service is a case's service: light requests and the culprit.
type Service struct {
	Light   func(ctx context.Context, i int) error
	Culprit func(ctx context.Context) error
	Close   func()
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// paceTo waits until the end of the i-th step of length d after start.
func paceTo(ctx context.Context, start time.Time, i int64, d time.Duration) error {
	return sleep(ctx, time.Until(start.Add(time.Duration(i+1)*d)))
}

var _ = paceTo
