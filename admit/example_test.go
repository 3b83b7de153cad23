package admit_test

import (
	"fmt"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/admit"
)

// A server reports each request's arrival, dequeue and end; the Admitter
// tells it which requests to reject.
func ExampleAdmitter() {
	serve := func(a admit.Admitter, arrived, queued, service time.Duration) string {
		if !a.Admit(arrived) {
			return "rejected at arrival"
		}
		start := arrived + queued
		if !a.Started(start, queued) {
			return "dropped at dequeue"
		}
		a.Done(start+service, service)
		return "served"
	}
	for _, a := range []admit.Admitter{admit.NewCoDel(), admit.NewBreakwater()} {
		fmt.Println(a.Name(), serve(a, 0, time.Millisecond, 2*time.Millisecond))
	}
	// Output:
	// codel served
	// breakwater served
}

// CoDel starts dropping once the queueing delay has stayed above 5 ms for
// 100 ms, then drops at intervals of 100 ms/√count until the delay falls.
func ExampleCoDel() {
	c := admit.NewCoDel()
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
	c := admit.NewCoDel(
		admit.WithCoDelTarget(time.Millisecond),
		admit.WithCoDelInterval(10*time.Millisecond),
		admit.WithCoDelBacklog(-1), // the caller does not report arrivals
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
	b := admit.NewBreakwater(admit.WithBreakwaterCredits(4, 1, 100))
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
	b := admit.NewBreakwater(
		admit.WithBreakwaterPeriod(time.Millisecond),
		admit.WithBreakwaterTarget(500*time.Microsecond, 0), // a fixed target
		admit.WithBreakwaterIncrease(0, 2),                  // +2 credits a period
		admit.WithBreakwaterDecrease(0.1, 0.5),
		admit.WithBreakwaterCredits(8, 2, 64),
	)
	b.Started(0, 100*time.Microsecond)
	b.Admit(time.Millisecond)
	fmt.Println(b.Credits(), b.Target())
	// Output:
	// 10 500µs
}

// A DAGOR admitter admits everything while its windows are calm; the
// middleware (httpmw.WithAdmission, grpcmw.WithAdmission) calls
// AdmitPriority at arrival and Started when a worker takes the request.
func ExampleDAGOR() {
	d := admit.NewDAGOR()
	p := moirai.Priority{Business: 3, User: 40}
	fmt.Println(d.AdmitPriority(0, p), d.Level() == admit.AdmitAll, d.Overloaded())
	d.Started(time.Millisecond, time.Millisecond) // a millisecond in the queue: calm
	var rejected [admit.BusinessLevels]int64
	d.RejectedInto(&rejected)
	fmt.Println(rejected[3])
	// Output:
	// true true false
	// 0
}

// DAGOROption values tune the overload threshold, the window and the steps.
func ExampleDAGOROption() {
	d := admit.NewDAGOR(
		admit.WithDAGORThreshold(10*time.Millisecond), // mean queueing time that means overload
		admit.WithDAGORWindow(500*time.Millisecond, 1000),
		admit.WithDAGORSteps(0.05, 0.01),
	)
	fmt.Println(d.Name())
	// Output: dagor
}

// A level admits the priorities at or above it: business first, then user.
func ExampleLevel() {
	l := admit.Level{Business: 2, User: 10}
	for _, p := range []moirai.Priority{{Business: 1, User: 127}, {Business: 2, User: 10}, {Business: 2, User: 11}, {Business: 3}} {
		fmt.Println(admit.FormatPriority(p), l.Admits(p))
	}
	fmt.Println(admit.FormatLevel(l))
	// Output:
	// 1/127 true
	// 2/10 true
	// 2/11 false
	// 3/0 false
	// 2/10
}

// Actions is an entry service's table from action to business priority.
func ExampleActions() {
	a := admit.Actions{"POST /checkout": 0, "GET /search": 10}
	fmt.Println(a.Business("POST /checkout"), a.Business("GET /search"), a.Business("GET /unknown"))
	// Output: 0 10 63
}

// UserHasher gives a user the same user priority for a period, a new one
// the next.
func ExampleUserHasher() {
	h := admit.NewUserHasher(42, time.Hour)
	at := time.Date(2026, 1, 1, 10, 5, 0, 0, time.UTC)
	same := h.User("alice", at) == h.User("alice", at.Add(30*time.Minute))
	fmt.Println(same, h.User("alice", at) < admit.UserLevels)
	// Output: true true
}

// Random rejects at the rate DAGOR's level would, blind to priority: the
// baseline of the dagor suite.
func ExampleRandom() {
	r := admit.NewRandom()
	fmt.Println(r.Name(), r.Admit(0))
	// Output: random true
}

// SRE is the client-side adaptive throttle: a client rejects locally with
// probability max(0, (requests − K·accepts)/(requests + 1)).
func ExampleSRE() {
	s := admit.NewSRE(2, 2*time.Minute)
	for i := range 100 {
		s.Record(0, i%4 == 0) // the backend accepted a quarter
	}
	fmt.Printf("%s %.2f\n", s.Name(), s.RejectProbability(0))
	// Output: sre 0.50
}
