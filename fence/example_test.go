package fence_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moirai-go/moirai/fence"
)

func ExampleFence() {
	f, err := fence.New(8, []fence.Reservation{{Name: "inventory", Permits: 2}, {Name: "payments", Permits: 2}},
		fence.WithBacklog(1))
	if err != nil {
		panic(err)
	}
	inventory := f.Path("inventory") // resolve once
	ctx := context.Background()
	a, _ := f.Acquire(ctx, inventory)
	b, _ := f.Acquire(ctx, inventory)
	// inventory's two permits are held: a third request would wait in its
	// line; payments and local requests are not affected.
	p, _ := f.Acquire(ctx, f.Path("payments"))
	l, _ := f.Acquire(ctx, nil)
	fmt.Println("local permits:", f.Local().Permits(), "inventory in use:", inventory.InUse())
	for _, pm := range []fence.Permit{a, b, p, l} {
		pm.Release()
	}
	// Oversubscribed reservations are refused.
	_, err = fence.New(4, []fence.Reservation{{Name: "a", Permits: 3}, {Name: "b", Permits: 2}})
	fmt.Println(err)
	// Output:
	// local permits: 4 inventory in use: 2
	// fence: reservations of 5 permits in all exceed the pool of 4 workers
}

func ExampleFence_Acquire() {
	f, _ := fence.New(2, []fence.Reservation{{Name: "slow", Permits: 1}}, fence.WithBacklog(1))
	slow := f.Path("slow")
	held, _ := f.Acquire(context.Background(), slow)
	defer held.Release()
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_, err := f.Acquire(ctx, slow) // waits in slow's line until ctx ends
	fmt.Println(errors.Is(err, context.DeadlineExceeded), slow.Waiting())
	// Output: true 0
}

func ExampleSCT_Estimate() {
	// A downstream that serves 100 requests/s per concurrent request up
	// to 8: ten samples at each concurrency from 1 to 12.
	var samples []fence.Sample
	for c := 1; c <= 12; c++ {
		for range 10 {
			samples = append(samples, fence.Sample{Concurrency: float64(c), Throughput: 100 * float64(min(c, 8)), Saturated: true})
		}
	}
	e := fence.SCT{}.Estimate(samples, 12, 30)
	fmt.Printf("Q_lower %d at %.0f/s: %d permits\n", e.QLower, e.Peak, e.Permits)
	// Output: Q_lower 8 at 800/s: 9 permits
}

func ExampleClassifier() {
	f, _ := fence.New(16, []fence.Reservation{{Name: "d1", Permits: 4}, {Name: "d2", Permits: 4}})
	c := fence.NewClassifier(f)
	// What the server middleware does for a request of /api.Orders/Get...
	ctx := fence.WithCaller(context.Background(), c, "/api.Orders/Get")
	// ...and the client middleware for each call its handler makes.
	fence.ObserveCall(ctx, "d2", 3*time.Millisecond)
	fence.ObserveCall(ctx, "d1", 40*time.Millisecond)
	fmt.Println(c.PathOf("/api.Orders/Get").Name(), c.PathOf("/api.Health/Check").Name())
	// Output: d1 local
}

func ExampleTuner() {
	f, _ := fence.New(32, []fence.Reservation{{Name: "d1", Permits: 12}})
	t := fence.NewTuner(f, fence.OnChange(func(path string, from, to int, e fence.Estimate) {
		fmt.Printf("%s: %d → %d permits (%s)\n", path, from, to, e.Reason)
	}))
	// Samples as Run takes them every 50 ms: here scripted, a downstream
	// whose throughput stops growing at concurrency 8.
	for c := 6; c <= 12; c++ {
		for range 10 {
			t.Observe("d1", fence.Sample{Concurrency: float64(c), Throughput: 100 * float64(min(c, 8)), Saturated: true})
		}
	}
	t.Evaluate()
	// Output: d1: 12 → 9 permits (throughput levels off from concurrency 8 (800/s): reserve that plus 1)
}

// A Permit says which path's reservation it came from: a local request may
// borrow an idle path's permit when the local ones are taken.
func ExamplePermit() {
	f, _ := fence.New(2, []fence.Reservation{{Name: "search", Permits: 1}})
	ctx := context.Background()
	own, _ := f.Acquire(ctx, nil)      // the one local permit
	borrowed, _ := f.Acquire(ctx, nil) // search's, lent while it is idle
	fmt.Println(own.Borrowed(), borrowed.Borrowed(), borrowed.Path().Name())
	fmt.Println(borrowed.Release(), borrowed.Release() != nil) // a second release is refused
	own.Release()
	// Output:
	// false true local
	// <nil> true
}

// A Path is resolved once by name and read for its state.
func ExamplePath() {
	f, _ := fence.New(4, []fence.Reservation{{Name: "payments", Permits: 2}})
	p := f.Path("payments")
	pm, _ := f.Acquire(context.Background(), p)
	fmt.Println(p.Name(), p.Permits(), p.InUse(), p.Running(), p.IsLocal(), f.Path("nope").IsLocal()) // an unknown name gets the fallback (local by default), counted
	pm.Release()
	fmt.Println(p.InUse(), p.Completed())
	// Output:
	// payments 2 1 1 false true
	// 0 1
}

// Reservations split a pool of workers between downstream paths; what is
// left is the local path's. Resize moves them online (the Tuner does).
func ExampleReservation() {
	f, _ := fence.New(10, []fence.Reservation{{Name: "inventory", Permits: 3}, {Name: "payments", Permits: 3}})
	fmt.Println(f.Local().Permits())
	for _, r := range []fence.Reservation{{Name: "payments", Permits: 2}, {Name: "inventory", Permits: 5}} {
		if err := f.Resize(r.Name, r.Permits); err != nil {
			fmt.Println(err)
		}
	}
	fmt.Println(f.Path("inventory").Permits(), f.Path("payments").Permits(), f.Local().Permits())
	// Output:
	// 4
	// 5 2 3
}

// Options: a bounded line per reservation, where requests for unknown
// paths go, and the moirai resource that charges waits to tasks.
func ExampleOption() {
	f, _ := fence.New(8, []fence.Reservation{{Name: "search", Permits: 2}, {Name: "other", Permits: 2}},
		fence.WithBacklog(16), fence.WithFallback("other"))
	fmt.Println(f.Path("unknown-path").Name())
	// Output: other
}

// Tuner options: the sampling period, the per-level window, the limits and
// the model.
func ExampleTunerOption() {
	f, _ := fence.New(32, []fence.Reservation{{Name: "d1", Permits: 8}})
	t := fence.NewTuner(f,
		fence.WithSampling(2*time.Millisecond, 50*time.Millisecond),
		fence.WithWindow(16, 600, 10),
		fence.WithLimits(4, 24),
		fence.WithModel(fence.SCT{MinSamples: 8}))
	_ = t // t.Run(ctx) samples and resizes until ctx ends
	fmt.Println(f.Path("d1").Permits())
	// Output: 8
}

// A Sample is one sampling interval of a path: its mean concurrency, its
// throughput, and whether requests were waiting (the reservation was the
// limit).
func ExampleSample() {
	s := fence.Sample{Concurrency: 7.5, Throughput: 740, Saturated: true}
	fmt.Println(s.Concurrency, s.Throughput, s.Saturated)
	// Output: 7.5 740 true
}

// An Estimate is the model's verdict for one path, with its reason.
func ExampleEstimate() {
	var samples []fence.Sample
	for c := 1; c <= 4; c++ {
		for range 10 {
			samples = append(samples, fence.Sample{Concurrency: float64(c), Throughput: 100 * float64(c), Saturated: true})
		}
	}
	e := fence.SCT{}.Estimate(samples, 4, 30)
	fmt.Println(e.Permits > 4, e.Reason != "")
	// Output: true true
}

// Stats and PathStats are the fence's counters, per path.
func ExampleStats() {
	f, _ := fence.New(4, []fence.Reservation{{Name: "search", Permits: 2}})
	pm, _ := f.Acquire(context.Background(), f.Path("search"))
	pm.Release()
	for _, p := range f.Stats().Paths {
		fmt.Println(p.Name, p.Permits, p.Completed)
	}
	// Output:
	// local 2 0
	// search 2 1
}

// PathStats is one path's line of Stats.
func ExamplePathStats() {
	f, _ := fence.New(4, []fence.Reservation{{Name: "search", Permits: 2}})
	var ps fence.PathStats = f.Stats().Paths[1]
	fmt.Println(ps.Name, ps.InUse, ps.Waiting, ps.Rejected)
	// Output: search 0 0 0
}
