// Package inproc is the in-process suite of moirai bench: small services,
// served over real loopback HTTP, whose handlers use moirai's instrumented
// resources, each modelling an overload or interference case reported for
// a real system (CASES.md names them after the Atropos (A) and pBox (P)
// papers' cases). They use only moirai's public API, so they double as
// integration examples.
//
// Simulated I/O (a page read, an fsync) is a sleep of realistic length;
// CPU work is real computation. Every long operation checks its context at
// safe points, as production code does, so a cancellation takes effect.
// Sizes are chosen for a 2-core machine and a run of a few seconds: each
// case's file documents its parameters.
package inproc

import (
	"context"
	"time"

	"github.com/moirai-go/moirai"
)

const suite = "inproc"

// sleep waits for d or until ctx is done, and returns the context's cause
// in the latter case: simulated I/O that a cancellation interrupts.
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

// steps does n steps of length d, paced against its start, reporting the
// task's progress after each and returning the context's cause if it is
// done first: a long operation that can be stopped between steps.
func steps(ctx context.Context, n int64, d time.Duration) error {
	t, start := moirai.From(ctx), time.Now()
	for i := range n {
		if err := paceTo(ctx, start, i, d); err != nil {
			return err
		}
		t.Progress(i+1, n)
	}
	return nil
}

// noisySteps is how many steps of its culprit's work a noisy client's
// request does: about 20 ms where a step is 5 ms.
const noisySteps = 4

// paceTo waits until the end of the i-th step of length d after start, or
// until ctx is done (returning its cause). Pacing long work against its
// start, rather than sleeping d after each step, keeps timer overshoot
// under load from stretching the culprit's hold from run to run.
func paceTo(ctx context.Context, start time.Time, i int64, d time.Duration) error {
	return sleep(ctx, time.Until(start.Add(time.Duration(i+1)*d)))
}
