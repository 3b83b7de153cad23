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

// TestModeAndCoarseValue: advancing in precise mode keeps the mode,
// switching the mode keeps the coarse value, and neither lowers it under
// concurrent advances.
func TestModeAndCoarseValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New()
		c.SetPrecise(true)
		time.Sleep(3 * time.Millisecond)
		at := c.Advance()
		if !c.IsPrecise() {
			t.Fatal("Advance in precise mode left precise mode")
		}
		if got := c.Coarse(); got != at {
			t.Errorf("coarse value %d in precise mode, want %d", got, at)
		}
		time.Sleep(time.Millisecond)
		if got := c.Now(); got != at+int64(time.Millisecond) {
			t.Errorf("precise Now %d, want %d", got, at+int64(time.Millisecond))
		}
		c.SetPrecise(false)
		if c.IsPrecise() || c.Now() != at+int64(time.Millisecond) {
			t.Errorf("after precise mode: precise %v, Now %d, want coarse at %d", c.IsPrecise(), c.Now(), at+int64(time.Millisecond))
		}
	})
	c := New()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10000 {
			c.SetPrecise(i%2 == 0)
			c.Advance()
		}
	}()
	last := c.Coarse()
	for range 10000 {
		n := c.Coarse()
		if n < last || n <= 0 {
			t.Fatalf("coarse value went from %d to %d", last, n)
		}
		last = n
	}
	<-done
}
