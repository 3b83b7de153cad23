package inproc

import (
	"context"
	"time"

	"github.com/moirai-go/moirai/bench"
)

// table-lock models A-c4 / P-c1: a long SELECT … FOR UPDATE-like
// transaction holds a table lock while inserts into that table queue
// behind it.
//
// Parameters: inserts arrive at 200/s, each holding the table lock for
// 1 ms of simulated work; 64 worker slots. A quarter into the run the
// culprit takes the lock and scans rows for half the run (rows of 5 ms,
// reporting progress and checking its context after each one). Its noisy
// client (--culprit stream) runs such transactions of 4 rows (20 ms) from
// 4 connections, back to back, for half the run.
func init() {
	bench.Register(bench.Case{
		Suite: suite, Name: "table-lock", Models: "A-c4, P-c1",
		Resource: "table lock (Lock)",
		Culprit:  "long SELECT … FOR UPDATE-like transaction holding the table lock",
		Victims:  "inserts into that table",
		SLO:      50 * time.Millisecond,
		// The table lock, held for half the run in one stretch.
		LockExposure: 0.5,
		Build:        buildTableLock,
	})
}

func buildTableLock(env *bench.Env) (*bench.Service, error) {
	table := env.Ctl.Mutex("table:orders")
	const row = 5 * time.Millisecond
	rows := int64(env.Duration / 2 / row)
	return &bench.Service{
		Rate:    200,
		Workers: 64,
		Light: func(ctx context.Context, _ int) error {
			if err := table.Lock(ctx); err != nil {
				return err
			}
			defer table.Unlock()
			return sleep(ctx, time.Millisecond)
		},
		Culprit: func(ctx context.Context) error {
			if err := table.Lock(ctx); err != nil {
				return err
			}
			defer table.Unlock()
			return steps(ctx, rows, row)
		},
		// The noisy client runs short transactions of the same kind, each
		// locking the table for 4 rows (20 ms).
		Noisy: func(ctx context.Context, _ int) error {
			if err := table.Lock(ctx); err != nil {
				return err
			}
			defer table.Unlock()
			return steps(ctx, noisySteps, row)
		},
	}, nil
}
