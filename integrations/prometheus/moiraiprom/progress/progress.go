// Package progress is what Prometheus's patched PromQL engine calls at
// each step of its evaluation loops: the query's progress, reported to its
// moirai task. It does not import the engine, which imports it.
package progress

import (
	"context"
	"sync/atomic"

	"github.com/moirai-go/moirai"
)

var reported atomic.Bool

// Report tells the task in ctx, if any, that its query has done done of
// total (steps of a range evaluation, or series of a range function).
func Report(ctx context.Context, done, total int64) {
	if !reported.Load() {
		reported.Store(true)
	}
	moirai.From(ctx).Progress(done, total)
}

// Reported reports whether Report was ever called: a server built without
// the patch never calls it.
func Reported() bool { return reported.Load() }
