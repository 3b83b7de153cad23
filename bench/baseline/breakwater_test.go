package baseline_test

import (
	"testing"
	"time"

	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/bench/baseline"
)

func TestBreakwater(t *testing.T) {
	bw := func(opts ...baseline.BreakwaterOption) func() admit.Admitter {
		return func() admit.Admitter { return baseline.NewBreakwater(opts...) }
	}
	// A fixed 1 ms target, 10 credits, bounds [1, 100].
	fixed := []baseline.BreakwaterOption{
		baseline.WithBreakwaterTarget(time.Millisecond, 0),
		baseline.WithBreakwaterCredits(10, 1, 100),
	}
	runScripts(t, []scriptCase{
		{
			name: "defaults",
			new:  bw(),
			script: `
				credits -> 16
				target -> 1ms
				inflight -> 0`,
		},
		{
			name: "admit refuses past the pool and admits again when a credit returns",
			new:  bw(baseline.WithBreakwaterCredits(3, 1, 100)),
			script: `
				admit 0 -> true
				admit 0 -> true
				admit 0 -> true
				admit 1ms -> false
				inflight -> 3
				start 1ms 0 -> true
				done 2ms 1ms
				inflight -> 2
				admit 2ms -> true
				admit 2ms -> false`,
		},
		{
			name: "additive increase under low delay: 5% of the pool, at least 1",
			new:  bw(append(fixed, baseline.WithBreakwaterCredits(18, 1, 100))...),
			script: `
				# the first call starts the first 10 ms period
				admit 0 -> true
				start 0 0.5ms -> true
				admit 10ms -> true
				credits -> 19
				start 10ms 0.9ms -> true
				admit 20ms -> true
				credits -> 20
				start 20ms 0.1ms -> true
				admit 30ms -> true
				credits -> 21
				start 30ms 0.1ms -> true
				admit 40ms -> true
				credits -> 22
				start 40ms 0.1ms -> true
				admit 50ms -> true
				# 22.05 + 1.1025
				credits -> 23`,
		},
		{
			name: "multiplicative decrease grows with the overshoot, at most halving",
			new:  bw(append(fixed, baseline.WithBreakwaterCredits(100, 1, 1000))...),
			script: `
				start 0 1.5ms -> true
				# d = 1.5 t: 100 * (1 - 0.1 * 0.5) = 95
				start 10ms 3ms -> true
				credits -> 95
				# d = 3 t: 95 * (1 - 0.1 * 2) = 76
				start 20ms 100ms -> true
				credits -> 76
				# d = 100 t: capped at 1/2: 38
				start 30ms 1ms -> true
				credits -> 38
				# d = t exactly: factor 1
				admit 40ms -> true
				credits -> 38`,
		},
		{
			name: "the largest delay of the period decides",
			new:  bw(fixed...),
			script: `
				start 0 0.1ms -> true
				start 1ms 3ms -> true
				start 2ms 0.2ms -> true
				admit 10ms -> true
				# 10 * 0.8
				credits -> 8`,
		},
		{
			name: "a period with no started request changes nothing",
			new:  bw(fixed...),
			script: `
				admit 0 -> true
				admit 10ms -> true
				admit 20ms -> true
				admit 1s -> true
				credits -> 10`,
		},
		{
			name: "the pool stays within its bounds",
			new:  bw(baseline.WithBreakwaterTarget(time.Millisecond, 0), baseline.WithBreakwaterCredits(4, 3, 5)),
			script: `
				start 0 0 -> true
				start 10ms 0 -> true
				credits -> 5
				start 20ms 0 -> true
				credits -> 5
				# each update uses the delays of the period before it
				start 30ms 1s -> true
				credits -> 5
				start 40ms 1s -> true
				credits -> 3
				start 50ms 1s -> true
				credits -> 3`,
		},
		{
			name: "a minimum below one is raised to one",
			new:  bw(baseline.WithBreakwaterTarget(time.Millisecond, 0), baseline.WithBreakwaterCredits(0, -5, 0)),
			script: `
				credits -> 1
				start 0 1s -> true
				admit 10ms -> true
				credits -> 1
				admit 10ms -> false`,
		},
		{
			name: "the target scales to twice the mean service time",
			new:  bw(baseline.WithBreakwaterCredits(10, 1, 100)),
			script: `
				target -> 1ms
				admit 0 -> true
				start 0 0 -> true
				done 5ms 5ms
				admit 10ms -> true
				# the first period's mean seeds the average
				target -> 10ms
				start 10ms 8ms -> true
				done 11ms 15ms
				admit 20ms -> true
				# 0 < 10ms, then 8ms < 12ms: two increases;
				# mean 5 + 0.1 * (15 - 5) = 6ms
				credits -> 12
				target -> 12ms
				start 20ms 18ms -> true
				admit 30ms -> true
				# 12 * (1 - 0.1 * 6/12) = 11.4
				credits -> 11`,
		},
		{
			name: "the target never drops below its floor",
			new:  bw(baseline.WithBreakwaterTarget(3*time.Millisecond, 2)),
			script: `
				admit 0 -> true
				start 0 0 -> true
				done 0.1ms 0.1ms
				admit 10ms -> true
				target -> 3ms`,
		},
		{
			name: "increase and decrease options",
			new: bw(append(fixed,
				baseline.WithBreakwaterIncrease(0.5, 0),
				baseline.WithBreakwaterDecrease(1, 0.25))...),
			script: `
				start 0 0 -> true
				start 10ms 1.1ms -> true
				credits -> 15
				# 15 * max(1 - 1 * 0.1, 0.75) = 13.5
				start 20ms 3ms -> true
				credits -> 13
				# 13.5 * max(1 - 2, 0.75)
				admit 30ms -> true
				credits -> 10`,
		},
		{
			name: "period option",
			new:  bw(append(fixed, baseline.WithBreakwaterPeriod(100*time.Millisecond))...),
			script: `
				start 0 0 -> true
				admit 99ms -> true
				credits -> 10
				admit 100ms -> true
				credits -> 11`,
		},
		{
			name: "a Done without an admitted request creates no credit",
			new:  bw(baseline.WithBreakwaterCredits(1, 1, 1)),
			script: `
				done 0 1ms
				inflight -> 0
				admit 0 -> true
				admit 0 -> false`,
		},
	})
}
