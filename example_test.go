package moirai_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moirai-go/moirai"
)

// A request handler instrumented with moirai: the task is begun per
// request, the table lock is moirai's, and progress is reported at safe
// points where the handler also checks for cancellation.
func Example() {
	ctl := moirai.New(moirai.WithSLO(0.99, 50*time.Millisecond))
	defer ctl.Close()
	orders := ctl.Mutex("table:orders")

	handle := func(ctx context.Context, rows int) error {
		ctx, t := ctl.Begin(ctx, moirai.Spec{Class: "update-orders", Cancellable: true})
		var err error
		defer func() { t.End(err) }()
		if err = orders.Lock(ctx); err != nil {
			return err
		}
		defer orders.Unlock()
		for i := range rows {
			if err = ctx.Err(); err != nil { // a safe point
				return context.Cause(ctx)
			}
			moirai.From(ctx).Progress(int64(i+1), int64(rows))
		}
		return nil
	}
	fmt.Println(handle(context.Background(), 100))
	// Output: <nil>
}

func ExampleNew() {
	ctl := moirai.New(
		moirai.WithSLO(0.99, 20*time.Millisecond),
		moirai.WithTick(100*time.Millisecond, 10*time.Millisecond),
		moirai.WithMinCancelInterval(250*time.Millisecond),
	)
	defer ctl.Close()
	fmt.Println(ctl.Stats().Live)
	// Output: 0
}

// Cancel acts through the same safety checks as a policy: the task's
// context is cancelled with moirai.ErrCancelled and its OnCancel hook, the
// application's own cancel path, runs.
func ExampleController_Cancel() {
	ctl := moirai.New()
	defer ctl.Close()
	ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "report", Cancellable: true})
	defer t.End(nil)
	aborted := make(chan string, 1)
	t.OnCancel(func() { aborted <- "hook: abort the query" }) // runs in its own goroutine

	err := ctl.Cancel(t.ID(), "holds table:orders")
	fmt.Println(err)
	fmt.Println(<-aborted)
	fmt.Println(errors.Is(context.Cause(ctx), moirai.ErrCancelled))
	fmt.Println(ctl.Cancel(t.ID(), "again"))
	// Output:
	// <nil>
	// hook: abort the query
	// true
	// moirai: task 1 not cancelled: task was already cancelled
}

func ExampleController_Snapshot() {
	ctl := moirai.New()
	defer ctl.Close()
	pool := ctl.Memory("buffer-pool", 1024)
	ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "dump"})
	defer t.End(nil)
	_ = pool.Use(ctx, 300)
	pool.Evict(ctx, 120)

	s := ctl.Snapshot()
	r := s.Resources[s.ResourceByName("buffer-pool")]
	fmt.Println(r.Kind, r.Holders, r.Held, r.Evictions)
	for _, u := range s.UsageOf(0) {
		fmt.Println(s.Tasks[u.Task].Class, u.Held, u.Evictions)
	}
	// Output:
	// memory 1 300 120
	// dump 300 120
}

func ExampleController_Decisions() {
	ctl := moirai.New()
	defer ctl.Close()
	_, t := ctl.Begin(context.Background(), moirai.Spec{Class: "scan"}) // not cancellable
	defer t.End(nil)
	_ = ctl.Cancel(t.ID(), "operator")
	for _, d := range ctl.Decisions() {
		fmt.Println(d.Policy, d.Action, d.Outcome, d.Note)
	}
	// Output: manual cancel skipped task is not cancellable
}

func ExampleFrom() {
	ctl := moirai.New()
	defer ctl.Close()
	ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "export"})
	defer t.End(nil)
	moirai.From(ctx).Progress(40, 100)
	s := ctl.Snapshot() // the runtime's view of its tasks
	st := s.Tasks[s.TaskByID(t.ID())]
	fmt.Println(st.Done, st.Total)
	moirai.From(context.Background()).Progress(1, 2) // no task: a no-op
	// Output: 40 100
}

// One goroutine serving many tasks charges each piece of work to its own
// task by binding the task to the context it passes on.
func ExampleWithTask() {
	ctl := moirai.New()
	defer ctl.Close()
	log := ctl.Mutex("wal")
	_, conn := ctl.Begin(context.Background(), moirai.Spec{Class: "connection", Key: "conn-7"})
	defer conn.End(nil)

	ctx := moirai.WithTask(context.Background(), conn)
	_ = log.Lock(ctx)
	s := ctl.Snapshot()
	fmt.Println(s.UsageOf(s.TaskByID(conn.ID()))[0].Held) // charged to conn
	log.Unlock()
	// Output: 1
}

// Retry runs work as a task and, if the controller cancels it, runs it once
// more when the resources it used are free again (here nothing cancels it,
// so it runs once).
func ExampleRetry() {
	ctl := moirai.New()
	defer ctl.Close()
	runs := 0
	err := moirai.Retry(context.Background(), ctl, moirai.Spec{Class: "nightly-report", Cancellable: true, Kind: moirai.Background},
		func(ctx context.Context) error {
			runs++
			return nil
		})
	fmt.Println(err, runs, ctl.RetryStats().Cancelled)
	// Output: <nil> 1 0
}

// RetryOption values bound re-execution: how long the resources must stay
// free first, how long to wait at most, and the time the work must still
// be able to finish in.
func ExampleRetryOption() {
	ctl := moirai.New()
	defer ctl.Close()
	err := moirai.Retry(context.Background(), ctl, moirai.Spec{Class: "GET /export", Cancellable: true},
		func(ctx context.Context) error { return nil },
		moirai.RetryQuiet(50*time.Millisecond),
		moirai.RetryMaxWait(2*time.Second),
		moirai.RetryWithin(time.Second),
		moirai.RetryNotify(func(since time.Duration) { fmt.Println("re-executing after", since) }))
	fmt.Println(err)
	// Output: <nil>
}

// RetryStats counts what Retry did with cancelled work.
func ExampleRetryStats() {
	ctl := moirai.New()
	defer ctl.Close()
	st := ctl.RetryStats()
	fmt.Printf("cancelled %d, re-executed %d, dropped %d, interrupted %d\n", st.Cancelled, st.Reexecuted, st.Dropped, st.Interrupted)
	// Output: cancelled 0, re-executed 0, dropped 0, interrupted 0
}
