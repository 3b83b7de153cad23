package main

import (
	"testing"
	"time"

	gclcore "github.com/platinummonkey/go-concurrency-limits/core"
	gcllimit "github.com/platinummonkey/go-concurrency-limits/limit"

	"github.com/moirai-go/moirai/bench/pathfencesuite"
)

// feed gives a limit the same round trips: a no-load one, then growing
// and shrinking queues at the limit's in-flight count, and returns the
// limit after each sample.
func feed(l *gcllimit.VegasLimit) []int {
	var out []int
	rtt := func(i int) int64 {
		// 10 ms with nothing queued; up to 4× that and back, in waves.
		q := i % 40
		if q > 20 {
			q = 40 - q
		}
		return int64(10*time.Millisecond) * int64(20+3*q) / 20
	}
	for i := range 400 {
		l.OnSample(int64(i)*int64(time.Millisecond), rtt(i), l.EstimatedLimit(), false)
		out = append(out, l.EstimatedLimit())
	}
	return out
}

// TestDefaultVegasIsTheLibrarys checks that static's setting, built with
// the queue thresholds as functions, is the library's Vegas at its
// defaults sample for sample, and that another setting is not.
func TestDefaultVegasIsTheLibrarys(t *testing.T) {
	lib := gcllimit.NewVegasLimitWithRegistry("lib", 32, nil, 32, -1,
		nil, nil, nil, nil, nil, gcllimit.ProbeDisabled, gcllimit.NoopLimitLogger{}, gclcore.EmptyMetricRegistryInstance)
	ours := newVegas(pathfencesuite.DefaultVegas, 32)
	// The probe's jitter is random: with ours probing at its default
	// multiplier, compare only up to its first possible probe (30 × ½ ×
	// the lowest limit so far, in samples); the library's is disabled
	// above.
	want, got := feed(lib), feed(ours)
	n, low := len(want), 32
	for i := range want {
		if low = min(low, want[i]); i+1 >= 15*low {
			n = i
			break
		}
		if want[i] != got[i] {
			t.Fatalf("sample %d: limit %d, the library's default %d", i, got[i], want[i])
		}
	}
	if n < 50 {
		t.Fatalf("compared %d samples only", n)
	}
	changed := false
	other := feed(newVegas(pathfencesuite.Vegas{Alpha: 1, Beta: 2, Smoothing: 0.2}, 32))
	for i := range min(n, len(want)) {
		changed = changed || other[i] != want[i]
	}
	if !changed {
		t.Error("static@1/2/0.2 moved its limit as the defaults do")
	}
}
