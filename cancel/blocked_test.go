package cancel

import (
	"testing"
	"time"

	"github.com/moirai-go/moirai/resource"
)

// TestAtroposNeverChoosesABlockedTask: a task that waits behind another
// (the first waiter of a row-lock queue holds the row's queue position
// while it waits for the row's holder) is no candidate, however much it
// holds; the holder it waits for is, and when that holder cannot be
// cancelled there is no decision at all.
func TestAtroposNeverChoosesABlockedTask(t *testing.T) {
	build := func(rootCancellable bool) *builder {
		b := newBuilder(0).res("row", resource.KindLock, 0, 0.8, 3)
		b.task(1, "holder", rootCancellable, 0, 0, 2*time.Second, use{res: 0, held: 1, hold: 100 * ms})
		b.task(2, "queued", true, 0, 0, time.Second, use{res: 0, held: 1, hold: time.Second, waiting: true})
		b.task(3, "queued", true, 0, 0, time.Second, use{res: 0, waiting: true})
		return b
	}
	b := build(true)
	s := b.build()
	s.Tasks[1].Blocked, s.Tasks[2].Blocked = true, true
	for _, v := range []Variant{MultiObjective, Greedy, CurrentUsage} {
		if got := decideOne(t, NewAtropos(v, WithConfirmation(0)), s); got != 1 {
			t.Errorf("%v cancelled task %d, want the holder 1, never the blocked 2", v, got)
		}
	}
	b = build(false)
	s = b.build()
	s.Tasks[1].Blocked, s.Tasks[2].Blocked = true, true
	for _, v := range []Variant{MultiObjective, Greedy, CurrentUsage} {
		if ds := NewAtropos(v, WithConfirmation(0)).Decide(s); ds != nil {
			t.Errorf("%v decided %+v; the only unblocked holder is not cancellable", v, ds)
		}
	}
}
