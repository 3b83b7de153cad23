package task_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moirai-go/moirai/internal/taskx"
	"github.com/moirai-go/moirai/task"
)

// Resource IDs as package resource hands them out when a name is resolved.
const (
	connPool task.ResourceID = 1 + iota
	bufferPool
)

func ExampleRegistry() {
	reg := task.NewRegistry(task.Options{})

	ctx, t := reg.Begin(context.Background(), task.Spec{Class: "GET /orders", Key: "tenant-7"})
	fmt.Println("live:", reg.Len(), "same task:", task.FromContext(ctx) == t)
	t.End(nil)
	fmt.Println("live:", reg.Len(), "ended:", taskx.Ended(t))
	// Output:
	// live: 1 same task: true
	// live: 0 ended: true
}

func ExampleRegistry_Begin() {
	var reports []error
	reg := task.NewRegistry(task.Options{Report: func(err error) { reports = append(reports, err) }})

	// Begin never fails: an invalid field is defaulted and reported.
	_, t := reg.Begin(context.Background(), task.Spec{Class: "purge", Kind: task.Background, Goal: -1})
	defer t.End(nil)
	fmt.Println(t.Spec().Kind, t.Spec().Goal)
	fmt.Println(len(reports), errors.Is(reports[0], task.ErrInvalidSpec))
	// Output:
	// background 0.5
	// 1 true
}

func ExampleTask_Progress() {
	reg := task.NewRegistry(task.Options{})
	_, t := reg.Begin(context.Background(), task.Spec{Class: "SELECT … FROM orders"})
	defer t.End(nil)

	t.Progress(250, 1000) // rows returned of rows expected
	fmt.Println(taskx.ProgressOf(t))
	t.Progress(1200, 1000) // clamped
	fmt.Println(taskx.ProgressOf(t))
	// Output:
	// 250 1000
	// 1000 1000
}

func ExampleTask_OnCancel() {
	reg := task.NewRegistry(task.Options{})
	ctx, t := reg.Begin(context.Background(), task.Spec{Class: "report", Cancellable: true})
	defer t.End(nil)

	stopped := make(chan struct{})
	t.OnCancel(func() {
		// The application's own cancel path: abort the query on the server.
		fmt.Println("hook: aborting the query")
		close(stopped)
	})

	// The controller, after its safety checks:
	if err := taskx.Cancel(t, "memory pressure"); err != nil {
		fmt.Println(err)
	}
	<-stopped // hooks run in their own goroutine
	<-ctx.Done()
	fmt.Println(context.Cause(ctx))
	fmt.Println(errors.Is(context.Cause(ctx), task.ErrCancelled), ctx.Err())
	fmt.Println(taskx.Cancel(t, "again"))
	// Output:
	// hook: aborting the query
	// moirai: task cancelled by the overload controller: memory pressure
	// true context canceled
	// task: 1 is already cancelled
}

func Example_cancelRefused() {
	reg := task.NewRegistry(task.Options{})
	_, t := reg.Begin(context.Background(), task.Spec{Class: "checkout"}) // not cancellable
	defer t.End(nil)

	fmt.Println(taskx.Cancel(t, "overload"))
	fmt.Println(t.Cancelled())
	// Output:
	// task: 1 is not cancellable
	// false
}

func ExampleUsage_events() {
	reg := task.NewRegistry(task.Options{})
	_, t := reg.Begin(context.Background(), task.Spec{})
	defer t.End(nil)

	// The instrumented primitives of package resource emit these events.
	taskx.WaitBegin(t, connPool)
	taskx.WaitEnd(t, connPool)
	taskx.Acquire(t, connPool, 1)
	taskx.Evicted(t, bufferPool, 3)

	u, ok := taskx.Usage(t, connPool)
	fmt.Println(ok, "held:", u.Held, "waits:", u.Waits)
	u, _ = taskx.Usage(t, bufferPool)
	fmt.Println("evicted:", u.Evictions)
	fmt.Println(taskx.Release(t, connPool, 2))
	// Output:
	// true held: 1 waits: 1
	// evicted: 3
	// task: release of more units than held
}

func ExampleTask_Freeze() {
	reg := task.NewRegistry(task.Options{})
	_, conn := reg.Begin(context.Background(), task.Spec{Class: "connection"})
	defer conn.End(nil)

	// A connection-scoped task freezes between the requests it serves.
	conn.Freeze()
	fmt.Println(taskx.Active(conn), taskx.Activities(conn))
	conn.Activate() // the next request
	fmt.Println(taskx.Active(conn), taskx.Activities(conn))
	// Output:
	// false 1
	// true 2
}

func ExampleSpec_Validate() {
	for _, s := range []task.Spec{
		{Class: "GET /"},
		{Goal: 0.2},
		{Goal: -1},
	} {
		fmt.Println(s.Validate())
	}
	// Output:
	// <nil>
	// <nil>
	// task: invalid spec: isolation goal -1 must be a positive finite number (or 0 for the default 0.5)
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

func ExampleUsage() {
	reg := task.NewRegistry(task.Options{})
	_, t := reg.Begin(context.Background(), task.Spec{})
	defer t.End(nil)
	taskx.Acquire(t, bufferPool, 4)
	taskx.Acquire(t, connPool, 1)

	// The controller reads every task's accounting at one clock value.
	for _, u := range taskx.AppendUsage(t, nil, reg.Now()) {
		fmt.Printf("resource %d: %d held, %d waiting\n", u.Resource, u.Held, u.Waiting)
	}
	// Output:
	// resource 2: 4 held, 0 waiting
	// resource 1: 1 held, 0 waiting
}

func ExampleResourceID() {
	reg := task.NewRegistry(task.Options{})
	_, t := reg.Begin(context.Background(), task.Spec{})
	defer t.End(nil)

	var pages task.ResourceID = 42 // resolved once from a name, then reused
	fmt.Println(taskx.Acquire(t, pages, task.MaxUnits+1))
	// Output:
	// task: too many units held of one resource
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
	defer a.End(nil)

	// One event loop serves many tasks: bind the right one to each piece
	// of work.
	loop := context.Background()
	work := task.NewContext(loop, a)
	fmt.Println(task.FromContext(work).Spec().Class)

	taskx.Cancel(a, "")
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
	_, t := reg.Begin(context.Background(), task.Spec{})
	taskx.Acquire(t, connPool, 2)
	t.End(nil) // still holding: a leak the totals show
	fmt.Println(held[connPool])
	// Output:
	// 2
}

func ExampleStats() {
	reg := task.NewRegistry(task.Options{})
	_, t := reg.Begin(context.Background(), task.Spec{})
	taskx.WaitEnd(t, connPool) // without WaitBegin
	t.End(nil)
	t.End(nil)
	taskx.Acquire(t, connPool, 1) // after End

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

func ExampleUnendedError() {
	reg := task.NewRegistry(task.Options{Report: func(err error) {
		var ue *task.UnendedError
		if errors.As(err, &ue) {
			fmt.Println("report:", ue)
		}
	}})
	req, cancel := context.WithCancel(context.Background())
	_, t := reg.Begin(req, task.Spec{Class: "GET /leak", Key: "conn-9"})
	cancel() // the request is over, but the handler forgot End

	// The controller checks every live task it visits.
	start := taskx.Started(t)
	fmt.Println(taskx.CheckUnended(reg, t, start+int64(time.Second), 5*time.Second))   // first seen
	fmt.Println(taskx.CheckUnended(reg, t, start+int64(6*time.Second), 5*time.Second)) // grace over
	fmt.Println(taskx.CheckUnended(reg, t, start+int64(7*time.Second), 5*time.Second)) // once
	t.End(nil)
	// Output:
	// false
	// report: task: task 1 (class "GET /leak", key "conn-9") was never ended; its context is done, age 6s
	// true
	// false
}
