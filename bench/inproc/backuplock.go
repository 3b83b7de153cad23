package inproc

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/bench"
)

// backup-lock models A-c1, MySQL's FLUSH TABLES WITH READ LOCK: a global
// read lock in front of the table locks. Every writer takes the global
// lock in shared mode, then its table's lock. A long update holds one
// table's lock (and the global lock in shared mode); a backup then asks
// for the global lock in exclusive mode and queues behind the update; and
// every writer that arrives after the backup queues behind the backup,
// whatever table it writes. The global lock is a moirai RWMutex, whose
// arrival-order grants (a waiting writer holds back later readers) are
// exactly this queueing.
//
// The culprit request plays both sessions of the real incident: its
// handler is the long update, and shortly after taking its locks it starts
// the backup in a goroutine as a separate moirai task (class "backup",
// background, not cancellable: a backup is not what an operator wants
// killed, and it only waits, so cancelling it would not free anything the
// update holds). The backup is a task of its own so that its wait for the
// global lock is charged to it, not to the update; its context is detached
// from the update's (context.WithoutCancel), as the backup's session is
// independent of the update's. The handler returns once both are over, so
// no task or goroutine outlives the request. The harness sends a single
// culprit request, so this is the faithful way to have the backup arrive
// after the update and before the writers that queue behind it.
//
// Parameters: 8 tables; writers arrive at 200/s, spread round-robin over
// the tables, each holding the global lock (shared) and its table's lock
// for 1 ms of simulated work; 64 worker slots. A quarter into the run the
// culprit takes the global lock (shared) and table 0's lock and updates
// rows for half the run (rows of 5 ms, reporting progress and checking its
// context after each one; the rows are paced against the update's start,
// so timer overshoot does not lengthen the hold and runs repeat). 100 ms after the update took its locks the
// backup requests the global lock exclusively; once it has it, it copies
// for 20 ms and releases it. Its noisy client (--culprit stream) runs
// updates of 4 rows (20 ms) of table 0 from 4 connections, back to back,
// for half the run, the first of them starting the backup.
func init() {
	bench.Register(bench.Case{
		Suite: suite, Name: "backup-lock", Models: "A-c1",
		Resource: "global read lock + table locks (Lock)",
		Culprit:  "long update holds a table; a backup requests the global lock and queues behind it",
		Victims:  "every writer (queued behind the backup)",
		SLO:      50 * time.Millisecond,
		// The update's locks, held for half the run in one stretch: every
		// writer queues behind the backup that waits for them.
		LockExposure: 0.5,
		Build:        buildBackupLock,
	})
}

func buildBackupLock(env *bench.Env) (*bench.Service, error) {
	const (
		nTables     = 8
		row         = 5 * time.Millisecond
		backupDelay = 100 * time.Millisecond
		backupCopy  = 20 * time.Millisecond
	)
	global := env.Ctl.RWMutex("global-read-lock")
	var tables [nTables]*moirai.Mutex
	for i := range tables {
		tables[i] = env.Ctl.Mutex(fmt.Sprintf("table:t%d", i))
	}
	rows := int64(env.Duration / 2 / row)

	// write runs fn holding the global lock (shared) and table's lock, in
	// that order, as every writer does.
	write := func(ctx context.Context, table *moirai.Mutex, fn func() error) error {
		if err := global.RLock(ctx); err != nil {
			return err
		}
		defer global.RUnlock(ctx)
		if err := table.Lock(ctx); err != nil {
			return err
		}
		defer table.Unlock()
		return fn()
	}

	// backup is the backup session: it waits backupDelay, takes the
	// global lock exclusively, copies, and releases it.
	backup := func(parent context.Context) {
		ctx, t := env.Ctl.Begin(parent, moirai.Spec{Class: "backup", Kind: moirai.Background, Cancellable: false})
		var err error
		defer func() { t.End(err) }()
		if err = sleep(ctx, backupDelay); err != nil {
			return
		}
		if err = global.Lock(ctx); err != nil {
			return
		}
		defer global.Unlock()
		err = sleep(ctx, backupCopy)
	}

	// update updates n rows of table 0; withBackup starts the backup
	// once it holds its locks, and waits for it before returning.
	update := func(ctx context.Context, n int64, withBackup bool) error {
		var wg sync.WaitGroup
		defer wg.Wait()
		return write(ctx, tables[0], func() error {
			if withBackup {
				wg.Go(func() { backup(context.WithoutCancel(ctx)) })
			}
			return steps(ctx, n, row)
		})
	}

	return &bench.Service{
		Rate:    200,
		Workers: 64,
		Light: func(ctx context.Context, i int) error {
			return write(ctx, tables[i%nTables], func() error {
				return sleep(ctx, time.Millisecond)
			})
		},
		Culprit: func(ctx context.Context) error { return update(ctx, rows, true) },
		// The noisy client: updates of 4 rows (20 ms) of table 0; the
		// first one starts the backup.
		Noisy: func(ctx context.Context, i int) error { return update(ctx, noisySteps, i == 0) },
	}, nil
}
