package cancel_test

import (
	"fmt"
	"time"

	"github.com/moirai-go/moirai/cancel"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

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
	p := cancel.NewProtego(50 * time.Millisecond)
	for _, d := range p.Decide(s) {
		fmt.Println(d.Policy, d.Action, d.Task)
		fmt.Println(d.Reason)
		for _, a := range d.Details {
			fmt.Println(" ", a)
		}
	}
	// Output:
	// protego cancel 2
	// waiting on table:orders after 80ms of lock and queue wait, at or above the 50ms budget
	//   wait=80ms
	//   lock_wait=80ms
	//   queue_wait=0s
	//   budget=50ms
	//   waiting_on=table:orders
}

// WithMaxDrops caps the number of drops one decision proposes.
func ExampleProtegoOption() {
	s := &snapshot.Snapshot{
		Resources: []snapshot.Resource{{ID: 1, Name: "workers", Kind: resource.KindQueue}},
	}
	for i := range 5 {
		s.Tasks = append(s.Tasks, snapshot.Task{ID: uint64(10 - i), Cancellable: true, First: int32(i), N: 1})
		s.Usage = append(s.Usage, snapshot.Usage{Task: int32(i), Res: 0,
			Usage: task.Usage{Resource: 1, Waiting: 1, Wait: time.Second}})
	}
	p := cancel.NewProtego(50*time.Millisecond, cancel.WithMaxDrops(2))
	for _, d := range p.Decide(s) {
		fmt.Println(d.Task)
	}
	// Output:
	// 6
	// 7
}
