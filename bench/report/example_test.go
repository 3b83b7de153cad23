package report_test

import (
	"os"

	"github.com/moirai-go/moirai/bench"
	"github.com/moirai-go/moirai/bench/report"
)

func ExampleTable() {
	degraded := true
	rows := []bench.Row{
		{Suite: "inproc", Case: "table-lock", Controller: "none", ThroughputNorm: 0.41, P99Norm: 23.5,
			SLOAttainment: 0.62, VictimMeanNormalMs: 4.8, VictimMeanUncontrolledMs: 181, VictimMeanMs: 181, Degraded: &degraded},
		{Suite: "inproc", Case: "table-lock", Controller: "atropos", ThroughputNorm: 0.96, P99Norm: 1.7, DropRate: 0.0012,
			Cancelled: 1, CulpritsCancelled: 1, SLOAttainment: 0.97, VictimMeanNormalMs: 4.8, VictimMeanUncontrolledMs: 181, VictimMeanMs: 6.1},
		{Suite: "inproc", Case: "table-lock", Controller: "protego", Error: "controller panicked"},
	}
	if err := report.Table(os.Stdout, rows); err != nil {
		panic(err)
	}
	// Output:
	// CASE        CONTROLLER  TPUT_NORM  P99_NORM  DROP  CANCELLED(C/V)  REJECTED  SLO    VICTIM_MS(N/U/R)  R     STATUS
	// table-lock  none        0.41       23.50     0.0%  0 (0/0)         0         62.0%  4.80/181/181      0.00  degraded
	// table-lock  atropos     0.96       1.70      0.1%  1 (1/0)         0         97.0%  4.80/181/6.10     0.99  ok
	// table-lock  protego     -          -         -     -               -         -      -                 -     FAILED: controller panicked
}
