package guard

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestMinIntervalSeparatesActions: a new culprit every second (a new
// transaction of session 10), the per-minute maximum out of the way: the
// guard acts at most once per MinInterval (5 s), and still acts, so the
// interval is what limits it. TestRateLimits brings a culprit only every
// 2 s, under its 1 s interval, so it cannot see the interval's check go.
func TestMinIntervalSeparatesActions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fake{}
		f.obs = func(n int, at time.Time) *Observation {
			return lockTable(func(s *Session) { s.XactStart = s.XactStart.Add(time.Duration(n/4) * time.Millisecond) })(n, at)
		}
		const interval = 5 * time.Second
		g, err := New(f, Options{MinInterval: interval, MaxPerMinute: 1000, Logger: quiet, AllDatabases: true})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var at []time.Duration // when each cancel happened
		for range 4 * 60 {
			if _, err := g.Step(t.Context()); err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			for len(at) < len(f.cancels) {
				at = append(at, time.Since(start))
			}
			f.mu.Unlock()
			time.Sleep(250 * time.Millisecond)
		}
		if len(at) < 5 {
			t.Fatalf("%d cancels in a minute of a new culprit every second; want the interval, not the culprits, to limit them", len(at))
		}
		for i := 1; i < len(at); i++ {
			if gap := at[i] - at[i-1]; gap < interval {
				t.Fatalf("cancels %d and %d %v apart, want at least the minimum interval %v (all at %v)", i-1, i, gap, interval, at)
			}
		}
	})
}
