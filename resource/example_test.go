package resource_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/task"
)

// exampleSetup returns a resource registry and a task registry wired as
// moirai.Controller wires them. Applications get both from the controller
// (moirai.New, Controller.Begin, Controller.Mutex and the like).
func exampleSetup() (*resource.Registry, *task.Registry) {
	res := resource.NewRegistry()
	return res, task.NewRegistry(task.Options{OnEnd: res.Fold, LiveHold: res.LiveHold})
}

func ExampleMutex() {
	res, tasks := exampleSetup()
	r, _ := res.Register("accounts", resource.KindLock, 0)
	mu := resource.NewMutex(r, tasks.Now)

	ctx, t := tasks.Begin(context.Background(), task.Spec{Class: "transfer"})
	defer t.End(nil)

	if err := mu.Lock(ctx); err != nil {
		fmt.Println("not locked:", err) // ctx done, or the task cancelled
		return
	}
	// The mutex names its holder to the controller (its snapshots do the
	// same for every resource).
	var h resource.LiveHolds
	r.LiveHolds(tasks.Now(), &h)
	fmt.Println("held while locked:", h.N == 1, "by task", h.Tag[0] == t.ID())
	mu.Unlock()
	r.LiveHolds(tasks.Now(), &h)
	fmt.Println("held after unlock:", h.N == 1)
	// Output:
	// held while locked: true by task true
	// held after unlock: false
}

func ExampleMutex_cancelled() {
	res, tasks := exampleSetup()
	r, _ := res.Register("accounts", resource.KindLock, 0)
	mu := resource.NewMutex(r, tasks.Now)

	// A context already done: the lock is not taken, and the error says
	// why (a task the controller cancelled fails the same way, with
	// task.ErrCancelled as the cause).
	parent, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("client went away"))
	ctx, t := tasks.Begin(parent, task.Spec{Cancellable: true})
	defer t.End(nil)
	_ = mu.Lock(context.Background()) // held by someone without a task

	err := mu.Lock(ctx)
	fmt.Println(err)
	// Output:
	// client went away
}

func ExampleRWMutex() {
	res, tasks := exampleSetup()
	r, _ := res.Register("catalog", resource.KindLock, 0)
	rw := resource.NewRWMutex(r)

	a, ta := tasks.Begin(context.Background(), task.Spec{})
	defer ta.End(nil)
	b, tb := tasks.Begin(context.Background(), task.Spec{})
	defer tb.End(nil)

	_ = rw.RLock(a)
	_ = rw.RLock(b)
	fmt.Println("readers:", rw.Readers())
	// RUnlock takes the reader's context, so each task is charged its own
	// hold.
	rw.RUnlock(a)
	rw.RUnlock(b)

	_ = rw.Lock(a)
	fmt.Println("readers under a writer:", rw.Readers())
	rw.Unlock()
	// Output:
	// readers: 2
	// readers under a writer: 0
}

func ExampleSemaphore() {
	res, tasks := exampleSetup()
	r, _ := res.Register("decoders", resource.KindQueue, 4)
	sem := resource.NewSemaphore(r, 4)

	ctx, t := tasks.Begin(context.Background(), task.Spec{})
	defer t.End(nil)

	p, err := sem.Acquire(ctx, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("in use:", sem.InUse(), "of", sem.Size())
	if _, ok := sem.TryAcquire(ctx, 2); !ok {
		fmt.Println("2 more do not fit")
	}
	_ = p.Release()
	fmt.Println("in use:", sem.InUse())
	// Output:
	// in use: 3 of 4
	// 2 more do not fit
	// in use: 0
}

func ExamplePermit() {
	res, tasks := exampleSetup()
	r, _ := res.Register("connections", resource.KindQueue, 2)
	sem := resource.NewSemaphore(r, 2)

	ctx, t := tasks.Begin(context.Background(), task.Spec{})
	defer t.End(nil)

	p, _ := sem.Acquire(ctx, 2)
	fmt.Println("units:", p.Units())
	fmt.Println("release:", p.Release())
	// A permit is released once; a second release is refused and counted.
	fmt.Println("again:", p.Release() != nil, "misuse:", r.Misuse())

	var zero resource.Permit
	fmt.Println(zero.Release())
	// Output:
	// units: 2
	// release: <nil>
	// again: true misuse: 1
	// resource: release of a zero Permit
}

func ExampleQueue() {
	res, tasks := exampleSetup()
	r, _ := res.Register("workers", resource.KindQueue, 1)
	q := resource.NewQueue(r, 1, 1) // one slot, one place in line

	ctx, t := tasks.Begin(context.Background(), task.Spec{})
	defer t.End(nil)

	err := q.Do(ctx, func(ctx context.Context) error {
		fmt.Println("running:", q.Running(), "of", q.Slots())
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// running: 1 of 1
	// done: <nil>
}

func ExampleMemory() {
	res, tasks := exampleSetup()
	r, _ := res.Register("buffer-pool", resource.KindMemory, 1024)
	pool := resource.NewMemory(r)

	ctx, t := tasks.Begin(context.Background(), task.Spec{Class: "scan"})

	_ = pool.Use(ctx, 100) // pages pinned
	pool.Evict(ctx, 40)    // the scan pushed out 40 pages others used
	_ = pool.Free(ctx, 60)
	fmt.Println("in use:", pool.InUse())
	if err := pool.Free(ctx, 50); err != nil {
		fmt.Println("free of 50: refused")
	}

	// The end of the task gives back what it still used.
	t.End(nil)
	fmt.Println("in use after the end:", pool.InUse())
	fmt.Println("evictions of ended tasks:", r.EndedTotals().Evictions)
	// Output:
	// in use: 40
	// free of 50: refused
	// in use after the end: 0
	// evictions of ended tasks: 40
}

func ExampleResource() {
	res, tasks := exampleSetup()
	// A resource moirai has no primitive for: a remote lock service.
	r, _ := res.Register("zk-lock", resource.KindLock, 0)

	ctx, t := tasks.Begin(context.Background(), task.Spec{})
	defer t.End(nil)

	r.WaitBegin(ctx)
	// ... ask the lock service and wait for the lock ...
	r.WaitEnd(ctx)
	_ = r.Acquire(ctx, 1)
	// ... work under the lock ...
	_ = r.Release(ctx, 1)

	fmt.Println(r.Release(ctx, 1) != nil, r.Misuse()) // released twice: refused

	// Events from a context without a task are only counted.
	r.WaitBegin(context.Background())
	fmt.Println("untracked:", r.Untracked())
	// Output:
	// true 1
	// untracked: 1
}

func ExampleRegistry() {
	g := resource.NewRegistry()
	for _, name := range []string{"accounts", "workers"} {
		if _, err := g.Register(name, resource.KindLock, 0); err != nil {
			fmt.Println(err)
		}
	}
	_, err := g.Register("accounts", resource.KindQueue, 8)
	fmt.Println(errors.Is(err, resource.ErrExists))

	r, _ := g.Lookup("workers")
	fmt.Println(r.Name(), r.Kind(), g.ByID(r.ID()) == r)

	_, err = g.Lookup("cache")
	fmt.Println(err)

	for _, r := range g.All() {
		fmt.Println(r.ID(), r.Name())
	}
	// Output:
	// true
	// workers lock true
	// resource: unknown resource "cache" (known: accounts, workers)
	// 1 accounts
	// 2 workers
}

func ExampleKind() {
	for _, s := range []string{"lock", "Memory", " io ", "disk"} {
		k, err := resource.ParseKind(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%q is %v\n", s, k)
	}
	// Output:
	// "lock" is lock
	// "Memory" is memory
	// " io " is io
	// resource: unknown kind "disk" (want lock, queue, memory, cpu or io)
}

func ExampleTotals() {
	res, tasks := exampleSetup()
	r, _ := res.Register("wal", resource.KindLock, 0)
	ctx, t := tasks.Begin(context.Background(), task.Spec{})
	r.WaitBegin(ctx)
	r.WaitEnd(ctx)
	t.End(nil) // the task's accounting is folded into the resource's totals
	fmt.Println(r.EndedTotals().Waits)
	// Output: 1
}
