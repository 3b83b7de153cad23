package bench

import (
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/cancel"
	"github.com/moirai-go/moirai/detect"
	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/penalty"
	"github.com/moirai-go/moirai/policy"
	"github.com/moirai-go/moirai/trend"
)

// The pBox controllers: penalties alone, and the composed default of
// moirai.New (early action, targeted cancellation with re-execution and
// penalties; admission off), with and without early action.
func init() {
	RegisterController(Controller{
		Name:     "pbox",
		Describe: "penalties (pBox, SOSP'23): delay the task that defers others beyond their isolation goal, at a safe point, adaptively",
		Options: func(slo time.Duration) []moirai.Option {
			return append(harnessTicks(), moirai.WithSLO(0.99, slo), moirai.WithPolicy(penalty.New()))
		},
	})
	// composed is the library's default composition, with early action
	// (package trend) in front of it, as moirai.New has it, or not
	// (moirai.WithEarlyAction(false)).
	composed := func(early bool) func(time.Duration) []moirai.Option {
		return func(slo time.Duration) []moirai.Option {
			d := estimate.NewDurations(0)
			var ps []policy.Policy
			if early {
				ps = append(ps, trend.New())
			}
			ps = append(ps, cancel.NewAtropos(cancel.MultiObjective, cancel.WithDurations(d), cancel.WithMinGain(slo/2)), penalty.New())
			return append(harnessTicks(),
				moirai.WithSLO(0.99, slo),
				moirai.WithDurations(d),
				moirai.WithDetector(detect.NewSLO(0.99, slo, detect.WithPrediction(d)), detect.NewCollapse(0.5)),
				moirai.WithPolicy(ps...))
		}
	}
	RegisterController(Controller{
		Name:      "moirai",
		Describe:  "the composed default: early action on a capacity-bounded resource whose culprit's share grows while the others suffer, targeted cancellation on resource overload, penalties under the isolation goal; re-execution; admission off",
		Options:   composed(true),
		Reexecute: true,
	})
	RegisterController(Controller{
		Name:     "moirai-noreexec",
		Describe: "the composed default without re-execution: a cancelled request is dropped; beside moirai, what re-execution changes",
		Options:  composed(true),
	})
	RegisterController(Controller{
		Name:      "moirai-trend",
		Describe:  "the composed default, early action (package trend) included: the name of moirai in the results saved before early action was part of the default",
		Options:   composed(true),
		Reexecute: true,
	})
	RegisterController(Controller{
		Name:      "moirai-notrend",
		Describe:  "the composed default without early action (moirai.WithEarlyAction(false)): beside moirai, what early action changes",
		Options:   composed(false),
		Reexecute: true,
	})
}
