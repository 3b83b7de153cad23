package trend_test

import (
	"fmt"
	"time"

	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
	"github.com/moirai-go/moirai/trend"
)

// A scan floods a buffer pool of 2,000 pages at 8,000 pages a second; a
// quarter into it the point reads start to miss. The policy penalizes
// the scan at the first step where the misses are clearly risen, and
// cancels it at the next.
func Example() {
	p := trend.New()
	var waits int64
	for i := range 40 {
		at := time.Duration(i+1) * 5 * time.Millisecond
		scan := int64(0)
		missed := int64(0)
		if i >= 20 {
			scan = int64(i-19) * 40 // 40 pages per 5 ms
			if scan > 500 {         // past the pool's free pages
				missed = 1
			}
		}
		waits += missed
		s := &snapshot.Snapshot{At: at, Window: 5 * time.Millisecond,
			Tasks: []snapshot.Task{{ID: 7, Class: "dump", Cancellable: true, First: 0, N: 1}},
			Resources: []snapshot.Resource{{ID: 1, Name: "buffer-pool", Kind: resource.KindMemory,
				Capacity: 2000, Waits: waits, WindowWaits: missed}},
			Usage: []snapshot.Usage{{Task: 0, Res: 0, Usage: task.Usage{Resource: 1, Held: scan}}},
		}
		if scan == 0 {
			s.Tasks, s.Usage = nil, nil
		}
		p.Observe(s)
		for _, d := range p.Decide(s) {
			fmt.Printf("%v task %d at %v\n", d.Action, d.Task, at)
		}
	}
	// Output:
	// penalize task 7 at 180ms
	// cancel task 7 at 185ms
}
