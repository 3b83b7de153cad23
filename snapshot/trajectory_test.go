package snapshot_test

import (
	"math"
	"testing"
	"time"

	"github.com/moirai-go/moirai/resource"
	"github.com/moirai-go/moirai/snapshot"
	"github.com/moirai-go/moirai/task"
)

// pool is a snapshot of one Memory of 1000 units at the given time: a
// scan (task 1) holding scan units, a reader (task 2) holding one unit
// with cumulative waits readerWaits, and the window's waits of everyone
// (the ended readers' included).
func pool(at time.Duration, scan, readerWaits, windowWaits int64) *snapshot.Snapshot {
	return &snapshot.Snapshot{
		At: at, Window: 10 * time.Millisecond,
		Tasks: []snapshot.Task{{ID: 1, First: 0, N: 1}, {ID: 2, First: 1, N: 1}},
		Resources: []snapshot.Resource{
			{ID: 1, Name: "buffer-pool", Kind: resource.KindMemory, Capacity: 1000, WindowWaits: windowWaits},
			{ID: 2, Name: "lock", Kind: resource.KindLock, Capacity: 1},
		},
		Usage: []snapshot.Usage{
			{Task: 0, Res: 0, Usage: task.Usage{Resource: 1, Held: scan}},
			{Task: 1, Res: 0, Usage: task.Usage{Resource: 1, Held: 1, Waits: readerWaits}},
		},
	}
}

func TestTrajectory(t *testing.T) {
	tr := snapshot.NewTrajectory(30 * time.Millisecond)
	// The scan grows by 100 units (a tenth of the pool) every 10 ms; the
	// others' waits come at 2, then 4, then 6 per window.
	var readerWaits int64
	for i := range int64(6) {
		w := 2 * i
		readerWaits += w
		tr.Observe(pool(time.Duration(i+1)*10*time.Millisecond, 100*i, readerWaits, w))
	}
	sig := tr.Resource(0)
	if !sig.Bounded || tr.Resource(1).Bounded {
		t.Fatalf("bounded: memory %v lock %v, want true false", sig.Bounded, tr.Resource(1).Bounded)
	}
	if sig.Top.Task != 0 || sig.Top.Held != 500 || sig.Top.Share != 0.5 {
		t.Errorf("top %+v, want task 0 holding 500 units, share 0.5", sig.Top)
	}
	// Growth is 10 capacities per second, smoothed from 0: positive and
	// below it.
	if !(sig.Top.Growth > 1 && sig.Top.Growth < 10) {
		t.Errorf("growth %.2f/s, want in (1, 10)", sig.Top.Growth)
	}
	// The last three windows (30 ms) hold 6+8+10 waits, all the others'.
	if sig.OthersWaits != 24 || sig.Span != 30*time.Millisecond {
		t.Errorf("others' waits %d over %v, want 24 over 30ms", sig.OthersWaits, sig.Span)
	}
	if math.Abs(sig.OthersWaitRate-800) > 1e-9 || math.Abs(sig.WaitRate-800) > 1e-9 {
		t.Errorf("rates %.1f/%.1f, want 800/s", sig.WaitRate, sig.OthersWaitRate)
	}
	if n := len(tr.Shares()); n != 2 {
		t.Errorf("%d shares, want 2 (the scan and the reader)", n)
	}
	if tr.Resource(2) != nil || tr.Resource(-1) != nil {
		t.Error("Resource out of range is not nil")
	}
}

// TestTrajectoryTopWaits checks that the waits of the task holding the
// most are not counted as the others'.
func TestTrajectoryTopWaits(t *testing.T) {
	tr := snapshot.NewTrajectory(0)
	s := pool(10*time.Millisecond, 0, 0, 0)
	tr.Observe(s)
	s = pool(20*time.Millisecond, 0, 0, 5)
	// The scan holds the most and waited 3 times in the window.
	s.Usage[0].Held, s.Usage[0].Waits = 600, 3
	tr.Observe(s)
	if got := tr.Resource(0).OthersWaits; got != 2 {
		t.Errorf("others' waits %d, want 2 (5 in the window, 3 of them the top holder's)", got)
	}
}
