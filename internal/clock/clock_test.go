package clock

import (
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCoarseAndPrecise(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New()
		start := c.Now()
		if start < 1 {
			t.Fatalf("first reading %d, want ≥ 1", start)
		}
		time.Sleep(5 * time.Millisecond)
		if got := c.Now(); got != start {
			t.Errorf("coarse clock moved without Advance: %d → %d", start, got)
		}
		c.Advance()
		if got := c.Now() - start; got != int64(5*time.Millisecond) {
			t.Errorf("after Advance: +%v, want +5ms", time.Duration(got))
		}
		c.SetPrecise(true)
		if !c.IsPrecise() {
			t.Error("not precise")
		}
		time.Sleep(time.Millisecond)
		if got := c.Now() - start; got != int64(6*time.Millisecond) {
			t.Errorf("precise: +%v, want +6ms", time.Duration(got))
		}
		c.SetPrecise(false)
		time.Sleep(time.Millisecond)
		if got := c.Now() - start; got != int64(6*time.Millisecond) {
			t.Errorf("coarse again: +%v, want +6ms (advanced when precise mode ended)", time.Duration(got))
		}
		if got := c.Time(c.Now()).Sub(c.Epoch()); got != time.Duration(c.Now()) {
			t.Errorf("Time/Epoch disagree: %v", got)
		}
		c.SetResolution(0)
		if c.Resolution() != int64(time.Microsecond) {
			t.Errorf("resolution %d, want the 1µs floor", c.Resolution())
		}
	})
}

// TestNeverBackwards: concurrent advances never lower the coarse value.
func TestNeverBackwards(t *testing.T) {
	c := New()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 10000 {
			c.Advance()
		}
	}()
	last := c.Now()
	for range 10000 {
		n := c.Now()
		if n < last {
			t.Fatalf("clock went back: %d → %d", last, n)
		}
		last = n
	}
	<-done
}
