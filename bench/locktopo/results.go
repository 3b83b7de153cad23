package locktopo

import (
	"fmt"
	"strings"
	"time"

	"github.com/moirai-go/moirai/bench"
)

// Suite is the suite's name in `moirai bench run --suite`.
const Suite = "locktopo"

// Results turns a run into the bench's results: one row per (server,
// topology) and one per server over all topologies ("all"), with the
// run's parameters.
func Results(rep *Report, opt Options) *bench.Results {
	opt.defaults()
	res := &bench.Results{Suite: Suite, Started: rep.Started.UTC(), Seed: opt.Seed,
		Duration: "one scenario: until its roots are acted on, at most the objective + two polls + 1.5 s (+ 1 s and a poll per further root)",
		Machine:  bench.CurrentMachine(),
		Params: map[string]string{
			"servers":             strings.Join(opt.Servers, ","),
			"scenarios":           fmt.Sprint(opt.Scenarios),
			"guard objective":     opt.SLO.String(),
			"guard poll postgres": opt.PostgresInterval.String(),
			"guard poll mysql":    opt.MySQLInterval.String(),
			"guard replicas":      fmt.Sprint(opt.Replicas),
		},
		Runs: []bench.Run{},
	}
	if len(opt.Replay) > 0 {
		res.Params["replay"] = fmt.Sprint(opt.Replay)
	}
	for s, d := range rep.Took {
		res.Params["took "+s] = d.Round(time.Second).String()
	}
	for _, c := range Counts(rep.Results) {
		res.Rows = append(res.Rows, bench.Row{Suite: Suite, Case: c.Topology, Controller: "guard", Server: c.Server,
			Scenarios: c.Scenarios, Actionable: c.Actionable, RootActed: c.RootActed, RootLate: c.RootLate,
			WrongActions: c.WrongActions, WrongScenarios: c.WrongScenarios, BuildFailed: c.BuildFailed, Disturbed: c.Disturbed, Skipped: c.Skipped,
			Note: c.SkipReason, MaxMs: float64(c.MaxRootLatency) / float64(time.Millisecond)})
	}
	return res
}
