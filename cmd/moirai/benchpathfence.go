package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/bench"
	"github.com/moirai-go/moirai/bench/pathfencesuite"
)

// servePathfenceCommand is the hidden subcommand that runs one server
// process of the pathfence suite.
const servePathfenceCommand = "serve-pathfence"

// pathfenceRow is a row of the pathfence suite as `bench run --suite
// pathfence -o json` prints it: the suite's own fields, zeros included.
type pathfenceRow struct {
	rowKey
	Path       string  `json:"path"`
	MeanMs     float64 `json:"mean_ms"`
	P99Ms      float64 `json:"p99_ms"`
	Dropped    int     `json:"dropped"`
	Sent       int     `json:"sent"`
	Throughput float64 `json:"throughput"`
	Permits    int     `json:"permits,omitempty"`
	Error      string  `json:"error,omitempty"`
}

// runPathfenceBench runs the pathfence suite: D1, D2 and U of each run
// are this binary, re-executed with the hidden serve-pathfence command,
// except U under the static controller, which is the benchmark module's
// (bench/peers), built on first use, since the library never imports the
// peers.
func runPathfenceBench(cmd *cobra.Command, g *globalFlags, f *benchFlags) error {
	cases, ctls, err := selectRun(f, pathfencesuite.SelectCases, pathfencesuite.SelectControllers)
	if err != nil {
		return err
	}
	duration, warmup := pathfencesuite.DefaultDuration, pathfencesuite.DefaultWarmup
	if cmd.Flags().Changed("duration") {
		duration = f.duration
	}
	if f.warmupChanged {
		warmup = f.warmup
	}
	if duration < 1e9 || warmup < 0 {
		return usageErrorf("--duration %v with --warmup %v: want a duration of at least 1s", duration, warmup)
	}
	exe, err := f.startProcesses()
	if err != nil {
		return err
	}
	errOut := cmd.ErrOrStderr()
	peers := &peersBinary{}
	defer peers.remove()
	res, err := pathfencesuite.Execute(cmd.Context(), pathfencesuite.Options{
		Cases: cases, Controllers: ctls, Warmup: warmup, Duration: duration, Seed: f.seed,
		Start: func(ctx context.Context, c pathfencesuite.ServerConfig) (string, func() error, error) {
			if _, static := pathfencesuite.StaticVegas(c.Controller); c.Role == pathfencesuite.RoleU && static {
				bin, err := peers.path(ctx, errOut)
				if err != nil {
					return "", nil, err
				}
				return startConfigured(ctx, "U (static)", c, bin)
			}
			return startConfigured(ctx, c.Role, c, exe, "bench", servePathfenceCommand)
		},
		Progress: progressBar(errOut),
	})
	if err != nil && res == nil {
		return err
	}
	return finishRun(cmd, g, f, res, err, func(r bench.Row) pathfenceRow {
		return pathfenceRow{keyOf(r), r.Path, r.MeanMs, r.P99Ms, r.Dropped, r.Sent, r.Throughput, r.Permits, r.Error}
	}, true)
}
