package inproc

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/bench"
)

// wal-group models A-c7 / P-c10: a write-ahead log's writer lock (as
// PostgreSQL's WALWriteLock). A commit inserts its record into the log's
// buffers, then takes the log writer and flushes the log up to its record
// with one fsync, unless a flush since has already done so (group commit:
// the flush writes every record inserted so far, so commits that queued
// for the writer behind it find theirs written and only pass through). A
// big group insert takes the writer and writes its many records group
// after group, fsyncing as it goes, while every small commit waits for
// the writer.
//
// Parameters: small commits arrive at 200/s; a commit that has to flush
// holds the log writer for a 1 ms simulated fsync; 64 worker slots. A
// quarter into the run the culprit takes the log writer and writes its
// records for half the run, in groups: a 4 ms simulated write of a group's
// 100 records, then a 1 ms fsync (paced against the insert's start, so
// timer overshoot does not lengthen the hold), reporting progress and
// checking its context after each group. Its noisy client (--culprit
// stream) runs group inserts of 4 groups (20 ms) from 4 connections, back
// to back, for half the run.
func init() {
	bench.Register(bench.Case{
		Suite: suite, Name: "wal-group", Models: "A-c7, P-c10",
		Resource: "write-ahead log (Lock)",
		Culprit:  "big group insert holding the log writer",
		Victims:  "small commits",
		SLO:      50 * time.Millisecond,
		// The log writer, held for half the run in one stretch.
		LockExposure: 0.5,
		Build:        buildWALGroup,
	})
}

func buildWALGroup(env *bench.Env) (*bench.Service, error) {
	const (
		write       = 4 * time.Millisecond
		fsync       = time.Millisecond
		groupRecord = 100
	)
	wal := env.Ctl.Mutex("wal-writer")
	// inserted is the log's insert position (the last record in its
	// buffers); flushed, guarded by wal, the last record on disk.
	var inserted atomic.Int64
	var flushed int64
	groups := int64(env.Duration / 2 / (write + fsync))
	// groupInsert takes the log writer and writes n groups of records,
	// fsyncing after each.
	groupInsert := func(ctx context.Context, n int64) error {
		if err := wal.Lock(ctx); err != nil {
			return err
		}
		defer wal.Unlock()
		t, start := moirai.From(ctx), time.Now()
		for i := range n {
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
			t.Progress(i+1, n)
		}
		return nil
	}
	return &bench.Service{
		Rate:    200,
		Workers: 64,
		Light: func(ctx context.Context, _ int) error {
			lsn := inserted.Add(1) // the commit record
			if err := wal.Lock(ctx); err != nil {
				return err
			}
			defer wal.Unlock()
			if flushed >= lsn {
				return nil // a group flush wrote it
			}
			upto := inserted.Load()
			if err := sleep(ctx, fsync); err != nil {
				return err
			}
			flushed = upto
			return nil
		},
		Culprit: func(ctx context.Context) error { return groupInsert(ctx, groups) },
		// The noisy client: group inserts of 4 groups (20 ms) each.
		Noisy: func(ctx context.Context, _ int) error { return groupInsert(ctx, noisySteps) },
	}, nil
}
