package penalty_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/moirai-go/moirai/penalty"
	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// crowd is a snapshot of one queue with n holders of class "heavy" and n
// waiters of class "light", every waiter beyond its goal.
func crowd(n int) *snapshot.Snapshot {
	s := &snapshot.Snapshot{Resources: []snapshot.Resource{{ID: 1, Name: "slots", Kind: resource.KindQueue, Capacity: int64(n)}}}
	for i := range 2 * n {
		t := snapshot.Task{ID: uint64(i + 1), Class: "heavy", Goal: 0.5, Exec: time.Second, First: int32(i), N: 1}
		u := task.Usage{Resource: 1, Held: 1, Hold: time.Second + time.Duration(i)}
		if i >= n {
			t.Class, t.Exec = "light", 50*ms
			u = task.Usage{Resource: 1, Waiting: 1, Wait: 40 * ms}
		}
		s.Tasks = append(s.Tasks, t)
		s.Usage = append(s.Usage, snapshot.Usage{Usage: u, Task: int32(i), Res: 0})
	}
	return s
}

func BenchmarkDecideCrowd(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("holders=waiters=%d", n), func(b *testing.B) {
			s := crowd(n)
			p := penalty.New()
			for b.Loop() {
				p.Decide(s)
			}
		})
	}
}

// TestCrowdPenalizesLongestHolders: with more holders than a victim's
// examination covers, the longest holders are the ones penalized, each
// once, and a step's work stays bounded (BenchmarkDecideCrowd).
func TestCrowdPenalizesLongestHolders(t *testing.T) {
	const n = 100
	ds := penalty.New().Decide(crowd(n))
	if len(ds) == 0 || len(ds) > 32 {
		t.Fatalf("%d penalties, want 1 to 32", len(ds))
	}
	seen := map[uint64]bool{}
	for _, d := range ds {
		// crowd's holders are tasks 1..n, task i holding for 1 s + i ns:
		// the longest are the last.
		if d.Task <= n-32 || d.Task > n || seen[d.Task] {
			t.Errorf("penalized task %d: want one of the 32 longest holders, once", d.Task)
		}
		seen[d.Task] = true
	}
}
