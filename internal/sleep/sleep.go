// Package sleep waits for a duration unless a context ends first, for the
// runtime (a task serving its penalty in Pause) and the command's services
// and load generators (the demo, the bench harness).
// The bench suites' cases keep a copy of their own: they use moirai's
// public API only, as examples.
package sleep

import (
	"context"
	"time"
)

// For waits for d or until ctx is done, and then returns ctx's cause.
func For(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
