package task_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/task"
)

func ExampleRegistry() {
	reg := task.NewRegistry(task.Options{})

	ctx, t := reg.Begin(context.Background(), task.Spec{Class: "GET /orders", Key: "tenant-7"})
	fmt.Println("live:", reg.Len(), "same task:", task.FromContext(ctx) == t)
	t.End(nil)
	fmt.Println("live:", reg.Len(), "context:", ctx.Err())
	// Output:
	// live: 1 same task: true
	// live: 0 context: context canceled
}

func ExampleRegistry_Begin() {
	var reports []error
	reg := task.NewRegistry(task.Options{Report: func(err error) { reports = append(reports, err) }})

	// Begin never fails: an invalid field is defaulted and reported.
	_, t := reg.Begin(context.Background(), task.Spec{Class: "purge", Kind: task.Background, MaxDeferral: -1})
	defer t.End(nil)
	fmt.Println(t.Spec().Kind, t.Spec().MaxDeferral)
	fmt.Println(len(reports), errors.Is(reports[0], task.ErrInvalidSpec))
	// Output:
	// background 0.5
	// 1 true
}

func ExampleTask_Progress() {
	ctl := moirai.New()
	defer ctl.Close()
	_, t := ctl.Begin(context.Background(), task.Spec{Class: "SELECT … FROM orders"})
	defer t.End(nil)

	// The controller's snapshots show what the task reported.
	progress := func() (int64, int64) {
		s := ctl.Snapshot()
		st := s.Tasks[s.TaskByID(t.ID())]
		return st.Done, st.Total
	}
	t.Progress(250, 1000) // rows returned of rows expected
	fmt.Println(progress())
	t.Progress(1200, 1000) // clamped
	fmt.Println(progress())
	// Output:
	// 250 1000
	// 1000 1000
}

func ExampleTask_OnCancel() {
	ctl := moirai.New()
	defer ctl.Close()
	ctx, t := ctl.Begin(context.Background(), task.Spec{Class: "report", Cancellable: true})
	defer t.End(nil)

	stopped := make(chan struct{})
	t.OnCancel(func() {
		// The application's own cancel path: abort the query on the server.
		fmt.Println("hook: aborting the query")
		close(stopped)
	})

	// The controller, after its safety checks (here an operator's):
	if err := ctl.Cancel(t.ID(), "memory pressure"); err != nil {
		fmt.Println(err)
	}
	<-stopped // hooks run in their own goroutine
	<-ctx.Done()
	fmt.Println(context.Cause(ctx))
	fmt.Println(errors.Is(context.Cause(ctx), task.ErrCancelled), ctx.Err())
	fmt.Println(t.Cancelled())
	// Output:
	// hook: aborting the query
	// moirai: task cancelled by the overload controller: memory pressure
	// true context canceled
	// true
}

func ExampleTask_Freeze() {
	ctl := moirai.New()
	defer ctl.Close()
	_, conn := ctl.Begin(context.Background(), task.Spec{Class: "connection"})
	defer conn.End(nil)
	state := func() (bool, int64) {
		s := ctl.Snapshot()
		st := s.Tasks[s.TaskByID(conn.ID())]
		return st.Active, st.Activities
	}

	// A connection-scoped task freezes between the requests it serves.
	conn.Freeze()
	fmt.Println(state())
	conn.Activate() // the next request
	fmt.Println(state())
	// Output:
	// false 1
	// true 2
}

func ExampleSpec_Validate() {
	for _, s := range []task.Spec{
		{Class: "GET /"},
		{MaxDeferral: 0.2},
		{MaxDeferral: -1},
	} {
		fmt.Println(s.Validate())
	}
	// Output:
	// <nil>
	// <nil>
	// task: invalid spec: max deferral -1 must be a positive finite number (or 0 for the default 0.5)
}

func ExampleKind() {
	k, err := task.ParseKind("Background")
	fmt.Println(k, err)
	_, err = task.ParseKind("batch")
	fmt.Println(err)
	// Output:
	// background <nil>
	// task: unknown kind "batch" (want request or background)
}

func ExamplePriority() {
	checkout := task.Priority{Business: 0, User: 5}
	browse := task.Priority{Business: 2, User: 0}
	fmt.Println(checkout, browse, checkout.Less(browse))
	// Output:
	// 0/5 2/0 true
}

func ExampleFromContext() {
	reg := task.NewRegistry(task.Options{})
	ctx, t := reg.Begin(context.Background(), task.Spec{Class: "GET /a"})
	defer t.End(nil)

	// Deep in the handler, on a derived context:
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	fmt.Println(task.FromContext(ctx).Spec().Class)

	// Methods on a nil *Task do nothing, so code need not check.
	task.FromContext(context.Background()).Progress(1, 2)
	fmt.Println(task.FromContext(context.Background()) == nil)
	// Output:
	// GET /a
	// true
}

func ExampleNewContext() {
	reg := task.NewRegistry(task.Options{})
	_, a := reg.Begin(context.Background(), task.Spec{Class: "a", Cancellable: true})

	// One event loop serves many tasks: bind the right one to each piece
	// of work.
	loop := context.Background()
	work := task.NewContext(loop, a)
	fmt.Println(task.FromContext(work).Spec().Class)

	a.End(nil)
	fmt.Println(work.Err(), a.Context().Err()) // follows loop, not the task
	// Output:
	// a
	// <nil> context canceled
}

func ExampleOptions() {
	held := make(map[task.ResourceID]int64)
	reg := task.NewRegistry(task.Options{
		// Fold each ended task's accounting into per-resource totals.
		OnEnd: func(t *task.Task, now int64, usage []task.Usage) {
			for _, u := range usage {
				held[u.Resource] += u.Held
			}
		},
		HookTimeout: 100 * time.Millisecond,
	})
	pool, _ := resource.NewRegistry().Register("conn-pool", resource.KindQueue, 10)
	ctx, t := reg.Begin(context.Background(), task.Spec{})
	_ = pool.Acquire(ctx, 2)
	t.End(nil) // still holding: a leak the totals show
	fmt.Println(held[pool.ID()])
	// Output:
	// 2
}

func ExampleStats() {
	reg := task.NewRegistry(task.Options{})
	pool, _ := resource.NewRegistry().Register("conn-pool", resource.KindQueue, 10)
	ctx, t := reg.Begin(context.Background(), task.Spec{})
	pool.WaitEnd(ctx) // without WaitBegin
	t.End(nil)
	t.End(nil)
	_ = pool.Acquire(ctx, 1) // after End

	st := reg.Stats()
	fmt.Printf("live %d, ended twice %d, late %d, bad %d\n", st.Live, st.EndedTwice, st.LateEvents, st.BadEvents)
	// Output:
	// live 0, ended twice 1, late 1, bad 1
}

func ExampleTotals() {
	reg := task.NewRegistry(task.Options{})
	for i := range 5 {
		_, t := reg.Begin(context.Background(), task.Spec{})
		if i == 4 {
			continue // still running
		}
		var err error
		if i == 3 {
			err = errors.New("upstream timeout")
		}
		t.End(err)
	}

	var tot task.Totals
	reg.TotalsInto(&tot)
	fmt.Printf("begun %d, ended %d, failed %d, latencies %d\n", tot.Begun, tot.Ended, tot.Failed, tot.Latency.Count())
	// Output:
	// begun 5, ended 4, failed 1, latencies 4
}
