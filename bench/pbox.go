package bench

import (
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/cancel"
	"github.com/moirai-go/moirai/detect"
	"github.com/moirai-go/moirai/estimate"
	"github.com/moirai-go/moirai/penalty"
	"github.com/moirai-go/moirai/trend"
)

// The pBox controllers: penalties alone, and the composed default of
// moirai.New (penalties and targeted cancellation with re-execution,
// admission off).
func init() {
	RegisterController(Controller{
		Name:     "pbox",
		Describe: "penalties (pBox, SOSP'23): delay the task that defers others beyond their isolation goal, at a safe point, adaptively",
		Options: func(slo time.Duration) []moirai.Option {
			return append(harnessTicks(), moirai.WithSLO(0.99, slo), moirai.WithPolicy(penalty.New()))
		},
	})
	RegisterController(Controller{
		Name:     "moirai",
		Describe: "the composed default: early action on a culprit in the making (trend), penalties under the isolation goal, targeted cancellation on resource overload; re-execution; admission off",
		Options: func(slo time.Duration) []moirai.Option {
			d := estimate.NewDurations(0)
			return append(harnessTicks(),
				moirai.WithSLO(0.99, slo),
				moirai.WithDurations(d),
				moirai.WithDetector(detect.NewSLO(0.99, slo, detect.WithPrediction(d)), detect.NewCollapse(0.5)),
				moirai.WithPolicy(
					trend.New(),
					cancel.NewAtropos(cancel.MultiObjective, cancel.WithDurations(d), cancel.WithMinGain(slo/2)),
					penalty.New()))
		},
		Reexecute: true,
	})
}
