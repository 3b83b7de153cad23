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
	for _, a := range []admit.Admitter{admit.NewDAGOR()} {
		fmt.Println(a.Name(), serve(a, 0, time.Millisecond, 2*time.Millisecond))
	}
	// Output:
	// dagor served
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

// Option values tune the overload threshold, the window and the steps.
func ExampleOption() {
	d := admit.NewDAGOR(
		admit.WithThreshold(10*time.Millisecond), // mean queueing time that means overload
		admit.WithWindow(500*time.Millisecond, 1000),
		admit.WithSteps(0.05, 0.01),
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
