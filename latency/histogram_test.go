package latency

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestBucketsCoverValues: every value falls in the bucket whose bounds
// contain it, and a bucket is at most 12.5 % of its lower bound wide.
func TestBucketsCoverValues(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(d time.Duration) {
		t.Helper()
		i := bucketOf(d)
		lo, hi := bounds(i)
		us := d.Truncate(time.Microsecond)
		if i < numBuckets-1 && (us < lo || us >= hi) {
			t.Fatalf("%v in bucket %d = [%v, %v)", d, i, lo, hi)
		}
		if lo >= linearMax*time.Microsecond && float64(hi-lo) > 0.125*float64(lo)+1 {
			t.Fatalf("bucket %d [%v, %v) wider than 12.5%%", i, lo, hi)
		}
	}
	for us := range 5000 {
		check(time.Duration(us) * time.Microsecond)
	}
	for range 100000 {
		check(time.Duration(r.Int64N(int64(10 * time.Hour))))
	}
	for i := range numBuckets - 1 {
		_, hi := bounds(i)
		lo, _ := bounds(i + 1)
		if hi != lo {
			t.Fatalf("gap between bucket %d and %d: %v vs %v", i, i+1, hi, lo)
		}
	}
}

func TestEdgeValues(t *testing.T) {
	if got := bucketOf(-time.Second); got != 0 {
		t.Errorf("negative → bucket %d, want 0", got)
	}
	if got := bucketOf(1000 * time.Hour); got != numBuckets-1 {
		t.Errorf("1000h → bucket %d, want the last", got)
	}
	var h Histogram
	if h.Quantile(0.99) != 0 || h.Mean() != 0 || h.Count() != 0 {
		t.Error("empty histogram not zero")
	}
}

func TestQuantileMeanMergeSub(t *testing.T) {
	var a, b Histogram
	for i := 1; i <= 100; i++ {
		a.Record(time.Duration(i) * time.Millisecond)
	}
	b.Record(time.Second)
	tests := []struct {
		q        float64
		lo, hi   time.Duration
		scenario string
	}{
		{0.5, 50 * time.Millisecond, 57 * time.Millisecond, "median"},
		{0.99, 99 * time.Millisecond, 112 * time.Millisecond, "p99"},
		{1, 100 * time.Millisecond, 113 * time.Millisecond, "max"},
		{-1, time.Millisecond, 1100 * time.Microsecond, "clamped low"},
	}
	for _, tt := range tests {
		if got := a.Quantile(tt.q); got < tt.lo || got > tt.hi {
			t.Errorf("%s: Quantile(%v) = %v, want in [%v, %v]", tt.scenario, tt.q, got, tt.lo, tt.hi)
		}
	}
	if m := a.Mean(); m != 50500*time.Microsecond {
		t.Errorf("mean = %v, want 50.5ms", m)
	}
	sum := a
	sum.Merge(&b)
	if sum.Count() != 101 || sum.Quantile(1) < time.Second {
		t.Errorf("merged: count %d, max %v", sum.Count(), sum.Quantile(1))
	}
	sum.Sub(&a)
	if sum.Count() != 1 || sum.Mean() != time.Second {
		t.Errorf("after Sub: count %d mean %v, want the one second", sum.Count(), sum.Mean())
	}
	sum.Sub(&a) // more than is there: clamps at zero
	if sum.Count() != 1 {
		t.Errorf("over-subtraction changed count to %d", sum.Count())
	}
	sum.Reset()
	if sum.Count() != 0 {
		t.Error("Reset left observations")
	}
}

func ExampleHistogram() {
	var h Histogram
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	fmt.Println(h.Count(), h.Mean(), h.Quantile(0.5), h.Quantile(0.99))
	// Output: 1000 500.5µs 512µs 1.024ms
}
