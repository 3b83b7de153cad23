package bench

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/bench/baseline"
)

// none is no control: moirai traces, nothing acts. Normal runs use it too.
var none = Controller{
	Name:     "none",
	Describe: "no control: moirai traces, nothing acts",
	Options: func(time.Duration) []moirai.Option {
		return append(harnessTicks(), moirai.WithoutMechanisms())
	},
}

// The baselines a user would otherwise reach for, from package baseline.
func init() {
	RegisterController(none)
	RegisterController(protego(1))
	RegisterController(codel(0, 0))
	RegisterController(breakwater(0))
}

// protego is the Protego baseline at a budget of scale × the case's
// objective (the paper's budget is the objective: scale 1). Tunable:
// protego@0.5x.
func protego(scale float64) Controller {
	c := Controller{
		Name:     "protego",
		Describe: "victim dropping: cancel a request whose wait at a lock or queue reaches its latency budget (Protego's delay budget per lock, NSDI'23)",
		Options: func(slo time.Duration) []moirai.Option {
			return append(harnessTicks(),
				moirai.WithPolicy(baseline.NewProtego(time.Duration(scale*float64(slo)))),
				// Protego drops every request over budget: no spacing.
				moirai.WithMinCancelInterval(0))
		},
		Sweep: []string{"0.5x", "2x"},
	}
	if scale != 1 {
		c.Describe += fmt.Sprintf("; budget %g × the objective", scale)
	}
	c.Tune = func(s string) (Controller, error) {
		x, err := strconv.ParseFloat(strings.TrimSuffix(s, "x"), 64)
		if err != nil || !strings.HasSuffix(s, "x") || !(x > 0) || x > 100 {
			return Controller{}, errors.New("want a budget as a multiple of the objective in (0, 100], e.g. protego@2x")
		}
		return protego(x), nil
	}
	return c
}

// codel is RFC 8289's CoDel at target and interval (zero: its defaults,
// 5 ms and 100 ms). Tunable: codel@10ms/200ms.
func codel(target, interval time.Duration) Controller {
	c := Controller{
		Name:     "codel",
		Describe: "CoDel on the queueing delay of the worker slots, target 5 ms, interval 100 ms",
		Options:  func(time.Duration) []moirai.Option { return append(harnessTicks(), moirai.WithoutMechanisms()) },
		Admitter: func(time.Duration) Admitter {
			return baseline.NewCoDel(baseline.WithCoDelTarget(target), baseline.WithCoDelInterval(interval))
		},
		Sweep: []string{"1ms/50ms", "10ms/100ms", "20ms/200ms"},
	}
	if target > 0 {
		c.Describe = fmt.Sprintf("CoDel on the queueing delay of the worker slots, target %v, interval %v", target, interval)
	}
	c.Tune = func(s string) (Controller, error) {
		ts, is, ok := strings.Cut(s, "/")
		t, err1 := time.ParseDuration(ts)
		i, err2 := time.ParseDuration(is)
		if !ok || err1 != nil || err2 != nil || t <= 0 || i <= 0 || t > 10*time.Second || i > 10*time.Second {
			return Controller{}, errors.New("want TARGET/INTERVAL, durations in (0, 10s], e.g. codel@10ms/200ms")
		}
		return codel(t, i), nil
	}
	return c
}

// breakwater is the Breakwater baseline with its target delay fixed at
// target, or (zero) scaled to the service time, its default. Tunable:
// breakwater@2ms.
func breakwater(target time.Duration) Controller {
	c := Controller{
		Name:     "breakwater",
		Describe: "Breakwater-like credits sized by AIMD on queueing delay, target scaled to service time",
		Options:  func(time.Duration) []moirai.Option { return append(harnessTicks(), moirai.WithoutMechanisms()) },
		Admitter: func(time.Duration) Admitter {
			if target > 0 {
				return baseline.NewBreakwater(baseline.WithBreakwaterTarget(target, 0))
			}
			return baseline.NewBreakwater()
		},
		Sweep: []string{"500µs", "5ms", "20ms"},
	}
	if target > 0 {
		c.Describe = fmt.Sprintf("Breakwater-like credits sized by AIMD on queueing delay, target fixed at %v", target)
	}
	c.Tune = func(s string) (Controller, error) {
		t, err := time.ParseDuration(s)
		if err != nil || t <= 0 || t > 10*time.Second {
			return Controller{}, errors.New("want a target delay in (0, 10s], e.g. breakwater@2ms")
		}
		return breakwater(t), nil
	}
	return c
}
