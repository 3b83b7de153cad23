package cancel_test

import (
	"fmt"
	"time"

	"github.com/moirai-go/moirai/cancel"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// lockTable is one snapshot of a table lock held by a long scan (task 1,
// 10 % done, holding it for 2 s) while three inserts wait for it: in
// the 100 ms window they waited 300 ms of the 400 ms the four ran, a
// contention of 0.75.
func lockTable() *snapshot.Snapshot {
	s := &snapshot.Snapshot{
		Window:    100 * time.Millisecond,
		Resources: []snapshot.Resource{{ID: 1, Name: "table:orders", Kind: resource.KindLock, WindowWait: 300 * time.Millisecond, Waiters: 3}},
		Tasks:     []snapshot.Task{{ID: 1, Class: "scan", Cancellable: true, Exec: 2 * time.Second, Done: 1, Total: 10, First: 0, N: 1}},
		Usage:     []snapshot.Usage{{Task: 0, Res: 0, Usage: task.Usage{Resource: 1, Held: 1, Hold: 2 * time.Second}}},
	}
	for i := range 3 {
		s.Tasks = append(s.Tasks, snapshot.Task{ID: uint64(2 + i), Class: "insert", Cancellable: true, Exec: 100 * time.Millisecond, First: int32(1 + i), N: 1})
		s.Usage = append(s.Usage, snapshot.Usage{Task: int32(1 + i), Res: 0, Usage: task.Usage{Resource: 1, Waiting: 1, Wait: 100 * time.Millisecond}})
	}
	return s
}

// Atropos cancels the task whose cancellation frees the most of the
// contended resources: the scan, not the inserts that wait for it.
func ExampleAtropos() {
	a := cancel.NewAtropos(cancel.MultiObjective, cancel.WithConfirmation(0))
	s := lockTable()
	a.Observe(s)
	for _, d := range a.Decide(s) {
		fmt.Println(d.Action, d.Task)
		fmt.Println(d.Reason)
	}
	// Output:
	// cancel 1
	// class "scan" frees 100% of table:orders (contention 0.75) of the future use (from progress), loses 2.000 resource-s after 0s, progress 0.10 (reported); least loss among those that free enough, of 1 non-dominated of 1 candidate(s)
}

// Evaluate returns the reasoning without deciding: the resources'
// contention, the candidates with their shares and scores, and why the
// other tasks were left out.
func ExampleEvaluation() {
	a := cancel.NewAtropos(cancel.MultiObjective, cancel.WithConfirmation(0))
	s := lockTable()
	a.Observe(s)
	ev := a.Evaluate(s)
	for _, l := range ev.Levels {
		fmt.Printf("%s contention %.2f contended %v\n", l.Resource, l.Level, l.Contended)
	}
	for _, c := range ev.Candidates {
		fmt.Printf("task %d share %.2f score %.2f\n", c.Task, c.Share[0], c.Score)
	}
	fmt.Println("left out, no gain:", ev.NoGain, "chosen:", ev.Candidates[ev.Chosen].Task)
	// Output:
	// table:orders contention 0.75 contended true
	// task 1 share 1.00 score 0.75
	// left out, no gain: 3 chosen: 1
}

// The variants are the paper's ablations: Greedy weighs only the most
// contended resource, CurrentUsage ranks by use so far instead of the
// future use estimated from progress.
func ExampleVariant() {
	for _, v := range []cancel.Variant{cancel.MultiObjective, cancel.Greedy, cancel.CurrentUsage} {
		fmt.Println(cancel.NewAtropos(v).Name())
	}
	// Output:
	// atropos
	// atropos-greedy
	// atropos-current
}

// Options tune when a resource counts as contended and which tasks are
// candidates.
func ExampleAtroposOption() {
	a := cancel.NewAtropos(cancel.MultiObjective,
		cancel.WithMinContention(0.2),                 // a resource is contended from this level
		cancel.WithContentionWindow(time.Second),      // measured over this window
		cancel.WithConfirmation(200*time.Millisecond), // and for this long before acting
		cancel.WithMinGain(25*time.Millisecond),       // the least future use worth a cancellation
		cancel.WithCandidatesLogged(3))
	fmt.Println(a.Name())
	// Output: atropos
}

// A Candidate is a task with its estimated gains on the contended
// resources; a Level is one resource's contention.
func ExampleCandidate() {
	a := cancel.NewAtropos(cancel.MultiObjective, cancel.WithConfirmation(0))
	s := lockTable()
	a.Observe(s)
	ev := a.Evaluate(s)
	var c cancel.Candidate = ev.Candidates[0]
	fmt.Printf("task %d (%s) progress %.2f from %s, dominated %v\n", c.Task, c.Class, c.Progress, c.Source, c.Dominated)
	// Output: task 1 (scan) progress 0.10 from reported, dominated false
}

// Level is one resource's contention in an evaluation.
func ExampleLevel() {
	a := cancel.NewAtropos(cancel.MultiObjective, cancel.WithConfirmation(0))
	s := lockTable()
	a.Observe(s)
	var l cancel.Level = a.Evaluate(s).Levels[0]
	fmt.Printf("%s %s %.2f waiters %d contended %v\n", l.Resource, l.Kind, l.Level, l.Waiters, l.Contended)
	// Output: table:orders lock 0.75 waiters 3 contended true
}
