package taskx_test

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

func ExampleCancel() {
	reg := task.NewRegistry(task.Options{})
	_, t := reg.Begin(context.Background(), task.Spec{Class: "checkout"}) // not cancellable
	defer t.End(nil)

	fmt.Println(taskx.Cancel(t, "overload"))
	fmt.Println(t.Cancelled())
	// Output:
	// task: 1 is not cancellable
	// false
}

func ExampleUsage() {
	reg := task.NewRegistry(task.Options{})
	_, t := reg.Begin(context.Background(), task.Spec{})
	defer t.End(nil)

	// The instrumented primitives of package resource emit these events.
	taskx.WaitBegin(t, connPool)
	taskx.WaitEnd(t, connPool)
	taskx.Acquire(t, connPool, 1)
	taskx.Evicted(t, bufferPool, 3)

	u, ok := taskx.UsageOf(t, connPool)
	fmt.Println(ok, "held:", u.Held, "waits:", u.Waits)
	u, _ = taskx.UsageOf(t, bufferPool)
	fmt.Println("evicted:", u.Evictions)
	fmt.Println(taskx.Release(t, connPool, 2))
	// Output:
	// true held: 1 waits: 1
	// evicted: 3
	// task: release of more units than held
}

func ExampleAppendUsage() {
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

func ExampleAcquire() {
	reg := task.NewRegistry(task.Options{})
	_, t := reg.Begin(context.Background(), task.Spec{})
	defer t.End(nil)

	var pages task.ResourceID = 42 // resolved once from a name, then reused
	fmt.Println(taskx.Acquire(t, pages, task.MaxUnits+1))
	// Output:
	// task: too many units held of one resource
}

func ExampleCheckUnended() {
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
