package moirai_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/moirai-go/moirai"
)

// The examples below show each primitive as a service uses it through the
// controller; package resource documents them in full.

func ExampleMutex() {
	ctl := moirai.New()
	defer ctl.Close()
	orders := ctl.Mutex("table:orders")
	ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "insert"})
	defer t.End(nil)

	if err := orders.Lock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	s := ctl.Snapshot()
	fmt.Println("held:", s.UsageOf(s.TaskByID(t.ID()))[0].Held)
	orders.Unlock()
	// Output: held: 1
}

func ExampleRWMutex() {
	ctl := moirai.New()
	defer ctl.Close()
	index := ctl.RWMutex("kv:index")
	ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "range-read"})
	defer t.End(nil)
	_ = index.RLock(ctx)
	fmt.Println("readers:", index.Readers())
	index.RUnlock(ctx)
	// Output: readers: 1
}

func ExampleSemaphore() {
	ctl := moirai.New()
	defer ctl.Close()
	conns := ctl.Semaphore("db-conns", 10)
	ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "query"})
	defer t.End(nil)
	p, err := conns.Acquire(ctx, 2)
	fmt.Println(err, conns.InUse())
	_ = p.Release()
	fmt.Println(conns.InUse())
	// Output:
	// <nil> 2
	// 0
}

func ExamplePermit() {
	ctl := moirai.New()
	defer ctl.Close()
	workers := ctl.Queue("workers", 4, 0)
	ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "job"})
	defer t.End(nil)
	p, _ := workers.Enter(ctx)
	fmt.Println(p.Units(), p.Release(), p.Release() != nil)
	// Output: 1 <nil> true
}

func ExampleQueue() {
	ctl := moirai.New()
	defer ctl.Close()
	workers := ctl.Queue("worker-slots", 2, 100)
	ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "render"})
	defer t.End(nil)
	err := workers.Do(ctx, func(ctx context.Context) error {
		fmt.Println("running in one of", workers.Slots(), "slots")
		return nil
	})
	fmt.Println(err)
	// Output:
	// running in one of 2 slots
	// <nil>
}

func ExampleMemory() {
	ctl := moirai.New()
	defer ctl.Close()
	pool := ctl.Memory("buffer-pool", 4096) // pages
	ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "dump"})
	defer t.End(nil)
	_ = pool.Use(ctx, 1000) // pages the dump brought in
	pool.Evict(ctx, 800)    // pages of others it pushed out
	pool.MissBegin(ctx)     // waiting for a page it needs back
	pool.MissEnd(ctx)
	fmt.Println(pool.InUse())
	// Output: 1000
}

func ExampleResource() {
	ctl := moirai.New()
	defer ctl.Close()
	wal, err := ctl.Register("wal-writer", moirai.KindLock, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "group-commit"})
	defer t.End(nil)
	wal.WaitBegin(ctx) // custom code: about to wait for the log writer
	wal.WaitEnd(ctx)
	_ = wal.Acquire(ctx, 1)
	fmt.Println(wal.Release(ctx, 1), wal.Release(ctx, 1) != nil)
	// Output: <nil> true
}

func ExampleTask() {
	ctl := moirai.New()
	defer ctl.Close()
	ctx, t := ctl.Begin(context.Background(), moirai.Spec{Class: "export", Cancellable: true})
	t.Progress(10, 40)
	s := ctl.Snapshot()
	st := s.Tasks[s.TaskByID(t.ID())]
	fmt.Println(st.Done, st.Total)
	t.End(errors.New("client went away"))
	t.End(nil) // a second End is counted, not obeyed
	fmt.Println(ctx.Err(), ctl.Stats().EndedTwice)
	// Output:
	// 10 40
	// context canceled 1
}

func ExampleSpec() {
	spec := moirai.Spec{
		Key:         "conn-42",    // grouping: the connection
		Class:       "SELECT ...", // the kind of work, for learned durations
		Kind:        moirai.Request,
		Cancellable: true,
		Priority:    moirai.Priority{Business: 1, User: 17},
		Path:        "inventory",
		MaxDeferral: 0.5, // deferred by others at most half as long as it runs
	}
	fmt.Println(spec.Validate())
	spec.MaxDeferral = -1
	fmt.Println(spec.Validate())
	// Output:
	// <nil>
	// task: invalid spec: max deferral -1 must be a positive finite number (or 0 for the default 0.5)
}

func ExamplePriority() {
	checkout := moirai.Priority{Business: 0, User: 90}
	browse := moirai.Priority{Business: 3, User: 5}
	fmt.Println(checkout, browse, checkout.Less(browse))
	// Output: 0/90 3/5 true
}

func ExampleOption() {
	opts := []moirai.Option{
		moirai.WithSLO(0.99, 50e6), // 50 ms
		moirai.WithDryRun(true),
		moirai.WithDecisionLog(1024),
	}
	ctl := moirai.New(opts...)
	defer ctl.Close()
	fmt.Println(len(ctl.Decisions()))
	// Output: 0
}
