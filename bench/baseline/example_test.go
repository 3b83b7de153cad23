package baseline_test

import (
	"fmt"
	"time"

	"github.com/moirai-go/moirai/bench/baseline"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// CoDel starts dropping once the queueing delay has stayed above 5 ms for
// 100 ms, then drops at intervals of 100 ms/√count until the delay falls.
func ExampleCoDel() {
	c := baseline.NewCoDel()
	for range 100 {
		c.Admit(0) // a standing backlog
	}
	for _, now := range []time.Duration{0, 50, 100, 101, 200, 201, 271, 272, 300} {
		delay := 20 * time.Millisecond
		if now == 300 {
			delay = time.Millisecond // the queue has drained
		}
		now *= time.Millisecond
		fmt.Printf("%v delay %v: served %v, dropping %v\n", now, delay, c.Started(now, delay), c.Dropping())
	}
	fmt.Println("drops:", c.Drops())
	// Output:
	// 0s delay 20ms: served true, dropping false
	// 50ms delay 20ms: served true, dropping false
	// 100ms delay 20ms: served false, dropping true
	// 101ms delay 20ms: served true, dropping true
	// 200ms delay 20ms: served false, dropping true
	// 201ms delay 20ms: served true, dropping true
	// 271ms delay 20ms: served false, dropping true
	// 272ms delay 20ms: served true, dropping true
	// 300ms delay 1ms: served true, dropping false
	// drops: 3
}

// The options change RFC 8289's target and interval.
func ExampleCoDelOption() {
	c := baseline.NewCoDel(
		baseline.WithCoDelTarget(time.Millisecond),
		baseline.WithCoDelInterval(10*time.Millisecond),
		baseline.WithCoDelBacklog(-1), // the caller does not report arrivals
	)
	fmt.Println(c.Started(0, 2*time.Millisecond))
	fmt.Println(c.Started(10*time.Millisecond, 2*time.Millisecond))
	// Output:
	// true
	// false
}

// Breakwater's credit pool grows while the queueing delay stays below the
// target and shrinks multiplicatively when it exceeds it; Admit refuses
// once every credit is in use.
func ExampleBreakwater() {
	b := baseline.NewBreakwater(baseline.WithBreakwaterCredits(4, 1, 100))
	fmt.Println("credits", b.Credits(), "target", b.Target())

	var now time.Duration
	period := func(delay time.Duration) {
		b.Started(now, delay)
		now += 10 * time.Millisecond
		b.Admit(now) // the first call of the next period updates the pool
		b.Done(now, 0)
		fmt.Printf("max delay %v: credits %d\n", delay, b.Credits())
	}
	b.Admit(now)
	b.Done(now, 0)
	period(100 * time.Microsecond)
	period(100 * time.Microsecond)
	period(2 * time.Millisecond)
	period(10 * time.Millisecond)

	for i := range 3 {
		fmt.Printf("request %d admitted: %v\n", i, b.Admit(now))
	}
	// Output:
	// credits 4 target 1ms
	// max delay 100µs: credits 5
	// max delay 100µs: credits 6
	// max delay 2ms: credits 5
	// max delay 10ms: credits 2
	// request 0 admitted: true
	// request 1 admitted: true
	// request 2 admitted: false
}

// The options set the control period, the target, the AIMD constants and
// the bounds of the pool.
func ExampleBreakwaterOption() {
	b := baseline.NewBreakwater(
		baseline.WithBreakwaterPeriod(time.Millisecond),
		baseline.WithBreakwaterTarget(500*time.Microsecond, 0), // a fixed target
		baseline.WithBreakwaterIncrease(0, 2),                  // +2 credits a period
		baseline.WithBreakwaterDecrease(0.1, 0.5),
		baseline.WithBreakwaterCredits(8, 2, 64),
	)
	b.Started(0, 100*time.Microsecond)
	b.Admit(time.Millisecond)
	fmt.Println(b.Credits(), b.Target())
	// Output:
	// 10 500µs
}

// Random rejects at the rate DAGOR's level would, blind to priority: the
// baseline of the dagor suite.
func ExampleRandom() {
	r := baseline.NewRandom(0, 0, 0)
	fmt.Println(r.Name(), r.Admit(0))
	// Output: random true
}

// SRE is the client-side adaptive throttle: a client rejects locally with
// probability max(0, (requests − K·accepts)/(requests + 1)).
func ExampleSRE() {
	s := baseline.NewSRE(2, 2*time.Minute)
	for i := range 100 {
		s.Record(0, i%4 == 0) // the backend accepted a quarter
	}
	fmt.Printf("%s %.2f\n", s.Name(), s.RejectProbability(0))
	// Output: sre 0.50
}

// Protego drops the request that has waited its whole budget on the table
// lock, not the long transaction that holds the lock.
func ExampleProtego() {
	s := &snapshot.Snapshot{
		Resources: []snapshot.Resource{
			{ID: 1, Name: "table:orders", Kind: resource.KindLock},
		},
		Tasks: []snapshot.Task{
			{ID: 1, Cancellable: true, First: 0, N: 1}, // holds the lock
			{ID: 2, Cancellable: true, First: 1, N: 1}, // waits 80 ms
			{ID: 3, Cancellable: true, First: 2, N: 1}, // waits 10 ms
		},
		Usage: []snapshot.Usage{
			{Task: 0, Res: 0, Usage: task.Usage{Resource: 1, Held: 1, Hold: 2 * time.Second}},
			{Task: 1, Res: 0, Usage: task.Usage{Resource: 1, Waiting: 1, Wait: 80 * time.Millisecond}},
			{Task: 2, Res: 0, Usage: task.Usage{Resource: 1, Waiting: 1, Wait: 10 * time.Millisecond}},
		},
	}
	p := baseline.NewProtego(50 * time.Millisecond)
	for _, d := range p.Decide(s) {
		fmt.Println(d.Policy, d.Action, d.Task)
		fmt.Println(d.Reason)
		for _, a := range d.Details {
			fmt.Println(" ", a)
		}
	}
	// Output:
	// protego cancel 2
	// waiting on table:orders for 80ms, at or above the 50ms delay budget
	//   wait=80ms
	//   lock_wait=80ms
	//   queue_wait=0s
	//   budget=50ms
	//   waiting_on=table:orders
}

// WithProtegoMaxDrops caps the number of drops one decision proposes.
func ExampleProtegoOption() {
	s := &snapshot.Snapshot{
		Resources: []snapshot.Resource{{ID: 1, Name: "workers", Kind: resource.KindQueue}},
	}
	for i := range 5 {
		s.Tasks = append(s.Tasks, snapshot.Task{ID: uint64(10 - i), Cancellable: true, First: int32(i), N: 1})
		s.Usage = append(s.Usage, snapshot.Usage{Task: int32(i), Res: 0,
			Usage: task.Usage{Resource: 1, Waiting: 1, Wait: time.Second}})
	}
	p := baseline.NewProtego(50*time.Millisecond, baseline.WithProtegoMaxDrops(2))
	for _, d := range p.Decide(s) {
		fmt.Println(d.Task)
	}
	// Output:
	// 6
	// 7
}
