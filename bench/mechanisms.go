package bench

import (
	"time"

	"github.com/moirai-go/moirai"
	"github.com/moirai-go/moirai/cancel"
	"github.com/moirai-go/moirai/detect"
	"github.com/moirai-go/moirai/estimate"
)

// The mechanisms' controllers, registered after the baselines (file order):
// the Atropos controllers, targeted cancellation with re-execution, and
// its two ablations, each on the same detectors.
func init() {
	for _, v := range []struct {
		variant  cancel.Variant
		describe string
	}{
		{cancel.MultiObjective, "targeted cancellation (Atropos, SOSP'25): the non-dominated candidates' future gains, weighted by contention; re-execution"},
		{cancel.Greedy, "Atropos ablation: the largest future gain on the most contended resource only; re-execution"},
		{cancel.CurrentUsage, "Atropos ablation: multi-objective on current usage instead of future gain; re-execution"},
	} {
		RegisterController(Controller{
			Name:     v.variant.String(),
			Describe: v.describe,
			Options: func(slo time.Duration) []moirai.Option {
				d := estimate.NewDurations(0)
				return append(harnessTicks(),
					moirai.WithSLO(0.99, slo),
					moirai.WithDurations(d),
					moirai.WithDetector(detect.NewSLO(0.99, slo, detect.WithPrediction(d)), detect.NewCollapse(0.5)),
					moirai.WithPolicy(cancel.NewAtropos(v.variant, cancel.WithDurations(d), cancel.WithMinGain(slo/2))))
			},
			Reexecute: true,
		})
	}
}
