package inproc

import (
	"context"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/bench"
)

// undo-purge models A-c3 / P-c5: InnoDB's undo log (the history list). A
// long transaction kept old row versions alive, so the log grew; when it
// ends, the purge works through the backlog holding the undo log for long
// stretches, one batch of records at a time. Reads (building old versions
// of rows) and writes (appending undo records) each need the log briefly
// and queue behind every batch.
//
// The culprit request is the purge: the harness begins it as a
// cancellable request of class "culprit", which is what the controllers
// see and what the harness counts a cancellation against, so the handler
// does the purge in that task rather than in an inner background task
// (whose cancellation the harness would log as a victim's). A purge can
// be stopped between records and resumed later, so cancelling it is safe.
//
// Parameters: reads and writes arrive at 200/s, each holding the undo log
// for 1 ms of simulated work; 64 worker slots. The history list has grown
// to as many records as 40 % of the run purges at 5 ms a record (simulated
// page reads and frees). A quarter into the run the purge starts; it takes
// the log for batches of 50 records (250 ms; the records are paced
// against the batch's start, so timer overshoot does not lengthen it),
// reporting progress and checking its context after each record, and lets
// go of it between batches, queueing again behind the requests that waited
// (about 70 ms each time), so that it works for about half the run. Its
// noisy client (--culprit stream) is 4 purge threads (InnoDB's default
// innodb_purge_threads), each request a batch of 4 records (20 ms), back
// to back, for half the run.
func init() {
	bench.Register(bench.Case{
		Suite: suite, Name: "undo-purge", Models: "A-c3, P-c5",
		Resource: "undo log (Lock)",
		Culprit:  "background purge holding the undo log while long transactions grew it",
		Victims:  "reads and writes needing the log",
		SLO:      50 * time.Millisecond,
		// The log, held by the purge for about 0.4 of the run in batches of
		// 250 ms; a request arriving in a batch's last 50 ms (its objective)
		// meets its objective: 0.4 × 200/250.
		LockExposure: 0.32,
		Build:        buildUndoPurge,
	})
}

func buildUndoPurge(env *bench.Env) (*bench.Service, error) {
	const (
		record = 5 * time.Millisecond
		batch  = 50
	)
	undo := env.Ctl.Mutex("undo-log")
	// backlog is the history a long transaction left for the purge.
	backlog := int64(env.Duration * 2 / 5 / record)
	return &bench.Service{
		Rate:    200,
		Workers: 64,
		// A write appends its undo record; a read builds an old version
		// of a row from the log. Either holds the log for 1 ms.
		Light: func(ctx context.Context, _ int) error {
			if err := undo.Lock(ctx); err != nil {
				return err
			}
			defer undo.Unlock()
			return sleep(ctx, time.Millisecond)
		},
		Culprit: func(ctx context.Context) error {
			t := moirai.From(ctx)
			// purge purges one batch of records, holding the log.
			var done int64
			purge := func() error {
				if err := undo.Lock(ctx); err != nil {
					return err
				}
				defer undo.Unlock()
				start := time.Now()
				for i := range min(batch, backlog-done) {
					if err := paceTo(ctx, start, int64(i), record); err != nil {
						return err
					}
					done++
					t.Progress(done, backlog)
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
		// The noisy client: purge threads, each request a batch of 4
		// records (20 ms) under the log.
		Noisy: func(ctx context.Context, _ int) error {
			if err := undo.Lock(ctx); err != nil {
				return err
			}
			defer undo.Unlock()
			return steps(ctx, noisySteps, record)
		},
	}, nil
}
