package taskx

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/moirai-go/moirai/internal/clock"
)

// TestEventRacingEndStaysInBlock plays, step by step, an Acquire on one
// goroutine of a task racing End on another: the Acquire finds its slot
// (slotFor checks that the task has not ended), End runs to completion
// (it zeroes the block and puts it in limbo), then the Acquire adds its
// units. The block then goes through limbo to the free list and to a new
// task, which must see none of the old task's accounting.
//
// The Acquire must see that its slot is no longer its own (the slot's res
// word, which carries a tag of the owning task, was cleared) and change
// nothing.
func TestEventRacingEndStaysInBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.New()
		r := newRegistry(clk, Options{})
		_, old := r.Begin(context.Background(), Spec{})
		old.acquire(1, 1)

		s, key := old.slotFor(2) // goroutine G: Acquire(2, 3) has found its slot
		old.End(nil)             // End on another goroutine
		if got := s.take(&s.hold, key, 3, clk.Now()); got != opStale {
			t.Fatalf("take after End = %d, want opStale", got)
		} // G: Acquire completes, and must change nothing

		blk := old.blk
		var next *Task
		var others []*Task
		// A task's shard is its memory's page's (pageShift): the old
		// block comes back once Begins land in its shard again.
		for range 1000 * len(r.shards) {
			time.Sleep(time.Millisecond)
			clk.Advance()
			_, tk := r.Begin(context.Background(), Spec{})
			if tk.blk == blk {
				next = tk
				break
			}
			others = append(others, tk)
		}
		defer func() {
			for _, tk := range others {
				tk.End(nil)
			}
		}()
		if next == nil {
			t.Fatal("the ended task's block was never reused")
		}
		defer next.End(nil)

		next.acquire(7, 1)
		next.acquire(8, 1)
		want := []Usage{{Resource: 7, Held: 1}, {Resource: 8, Held: 1}}
		got := next.appendUsage(nil, clk.Now())
		if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("a new task holding one unit each of 7 and 8 reads %+v, want %+v", got, want)
		}
	})
}
