package baseline_test

import (
	"testing"
	"time"

	"github.com/moirai-go/moirai/admit"
	"github.com/moirai-go/moirai/bench/baseline"
)

func TestCoDel(t *testing.T) {
	codel := func(opts ...baseline.CoDelOption) func() admit.Admitter {
		return func() admit.Admitter { return baseline.NewCoDel(opts...) }
	}
	runScripts(t, []scriptCase{
		{
			name: "below target never drops",
			new:  codel(),
			script: `
				admitn 0 1000
				start 0 4ms -> true
				start 100ms 4.9ms -> true
				start 200ms 4ms -> true
				start 1s 0 -> true
				dropping -> false
				drops -> 0`,
		},
		{
			name: "enters dropping after one interval above target, then drops at interval/sqrt(n)",
			new:  codel(),
			script: `
				admitn 0 1000
				# first above target: first_above_time = 100ms
				start 0 10ms -> true
				start 50ms 10ms -> true
				start 99ms 10ms -> true
				# one interval above: enter dropping, drop, drop_next = 100ms + 100ms
				start 100ms 10ms -> false
				dropping -> true
				# the request dequeued right after the entry drop is delivered
				start 100ms 10ms -> true
				start 199ms 10ms -> true
				start 200ms 10ms -> false
				# count 2: next drop 100ms/sqrt(2) = 70.71ms later, at 270.71ms
				start 201ms 10ms -> true
				start 270ms 10ms -> true
				start 271ms 10ms -> false
				# count 3: next at 270.71 + 57.74 = 328.45ms
				start 272ms 10ms -> true
				start 328ms 10ms -> true
				start 329ms 10ms -> false
				drops -> 4`,
		},
		{
			name: "leaves dropping when below target",
			new:  codel(),
			script: `
				admitn 0 1000
				start 0 10ms -> true
				start 100ms 10ms -> false
				start 101ms 10ms -> true
				start 150ms 1ms -> true
				dropping -> false
				# above again: needs a whole interval before dropping again
				start 160ms 10ms -> true
				start 259ms 10ms -> true
				start 260ms 10ms -> false
				dropping -> true`,
		},
		{
			name: "a dip below target restarts the interval",
			new:  codel(),
			script: `
				admitn 0 1000
				start 0 10ms -> true
				start 50ms 1ms -> true
				start 100ms 10ms -> true
				start 150ms 10ms -> true
				start 199ms 10ms -> true
				start 200ms 10ms -> false`,
		},
		{
			name: "a late dequeue catches up like the RFC's drop loop",
			new:  codel(),
			script: `
				admitn 0 1000
				start 0 10ms -> true
				start 100ms 10ms -> false
				start 100ms 10ms -> true
				start 200ms 10ms -> false
				# drop_next advances 70.71, 57.74, 50, 44.72ms: due at
				# 270.71, 328.45, 378.45, 423.17ms; at 400ms three are due
				start 400ms 10ms -> false
				start 400ms 10ms -> false
				start 400ms 10ms -> false
				start 400ms 10ms -> true
				drops -> 5`,
		},
		{
			name: "re-entering soon resumes the count",
			new:  codel(),
			script: `
				admitn 0 1000
				start 0 10ms -> true
				start 100ms 10ms -> false
				start 100ms 10ms -> true
				start 200ms 10ms -> false
				start 201ms 10ms -> true
				start 271ms 10ms -> false
				start 272ms 10ms -> true
				start 329ms 10ms -> false
				# count is 4; leave, then come back within 16 intervals
				start 330ms 1ms -> true
				dropping -> false
				start 340ms 10ms -> true
				start 440ms 10ms -> false
				# count resumes at 4 - 1 = 3: next drop 100ms/sqrt(3) = 57.74ms later
				start 441ms 10ms -> true
				start 497ms 10ms -> true
				start 498ms 10ms -> false`,
		},
		{
			name: "re-entering late starts the count over",
			new:  codel(),
			script: `
				admitn 0 1000
				start 0 10ms -> true
				start 100ms 10ms -> false
				start 100ms 10ms -> true
				start 200ms 10ms -> false
				start 201ms 10ms -> true
				start 271ms 10ms -> false
				start 272ms 1ms -> true
				start 5s 10ms -> true
				start 5.1s 10ms -> false
				# count 1: next drop a whole interval later
				start 5.101s 10ms -> true
				start 5.199s 10ms -> true
				start 5.2s 10ms -> false`,
		},
		{
			name: "a backlog of at most one request is never above target",
			new:  codel(),
			script: `
				admit 0 -> true
				start 0 50ms -> true
				admit 100ms -> true
				start 100ms 50ms -> true
				admitn 200ms 2
				start 200ms 50ms -> true
				start 300ms 50ms -> true
				drops -> 0`,
		},
		{
			name: "the backlog rule can be turned off",
			new:  codel(baseline.WithCoDelBacklog(-1)),
			script: `
				admit 0 -> true
				start 0 50ms -> true
				admit 100ms -> true
				start 100ms 50ms -> false`,
		},
		{
			name: "without Admit calls the backlog is unknown and the rule is off",
			new:  codel(),
			script: `
				start 0 50ms -> true
				start 100ms 50ms -> false`,
		},
		{
			name: "target and interval options",
			new:  codel(baseline.WithCoDelTarget(time.Millisecond), baseline.WithCoDelInterval(10*time.Millisecond)),
			script: `
				admitn 0 1000
				start 0 2ms -> true
				start 10ms 2ms -> false
				start 10ms 2ms -> true
				start 19ms 2ms -> true
				start 20ms 2ms -> false
				start 21ms 0.5ms -> true
				dropping -> false`,
		},
		{
			name: "invalid options leave the defaults",
			new:  codel(baseline.WithCoDelTarget(0), baseline.WithCoDelInterval(-time.Second)),
			script: `
				admitn 0 1000
				start 0 5ms -> true
				start 99ms 5ms -> true
				start 100ms 5ms -> false`,
		},
	})
}
