package bench

import (
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/bench/baseline"
)

// none is no control: moirai traces, nothing acts. Normal runs use it too.
var none = Controller{
	Name:     "none",
	Describe: "no control: moirai traces, nothing acts",
	Options: func(time.Duration) []moirai.Option {
		return append(harnessTicks(), moirai.WithTraceOnly())
	},
}

// The baselines a user would otherwise reach for, from package baseline.
func init() {
	RegisterController(none)
	RegisterController(Controller{
		Name:     "protego",
		Describe: "victim dropping: cancel a request whose lock and queue waits reach its latency budget (Protego, NSDI'23)",
		Options: func(slo time.Duration) []moirai.Option {
			return append(harnessTicks(),
				moirai.WithPolicy(baseline.NewProtego(slo)),
				// Protego drops every request over budget: no spacing.
				moirai.WithMinCancelInterval(0))
		},
	})
	RegisterController(Controller{
		Name:     "codel",
		Describe: "CoDel on the queueing delay of the worker slots, target 5 ms, interval 100 ms",
		Options:  func(time.Duration) []moirai.Option { return append(harnessTicks(), moirai.WithTraceOnly()) },
		Admitter: func(time.Duration) Admitter { return baseline.NewCoDel() },
	})
	RegisterController(Controller{
		Name:     "breakwater",
		Describe: "Breakwater-like credits sized by AIMD on queueing delay, target scaled to service time",
		Options:  func(time.Duration) []moirai.Option { return append(harnessTicks(), moirai.WithTraceOnly()) },
		Admitter: func(time.Duration) Admitter { return baseline.NewBreakwater() },
	})
}
