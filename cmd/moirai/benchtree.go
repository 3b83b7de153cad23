package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/bench"
	"github.com/moirai-go/moirai/bench/treesuite"
)

// serveTreeCommand is the hidden subcommand that runs one process of the
// tree suite.
const serveTreeCommand = "serve-tree"

// treeRow is a row of the tree suite as `bench run --suite tree -o json`
// prints it: the suite's own fields, zeros included.
type treeRow struct {
	rowKey
	NoCulprit           bool    `json:"no_culprit"`
	P99Norm             float64 `json:"p99_norm"`
	ThroughputNorm      float64 `json:"throughput_norm"`
	P99Ms               float64 `json:"p99_ms"`
	SLOAttainment       float64 `json:"slo_attainment"`
	CulpritHoldAfterMs  float64 `json:"culprit_hold_after_ms"`
	RetriesIntoOverload int     `json:"retries_into_overload"`
	VictimsCancelled    int     `json:"victims_cancelled"`
	CulpritsCancelled   int     `json:"culprits_cancelled"`
	DecidedAfterMs      float64 `json:"decided_after_ms"`
	Error               string  `json:"error,omitempty"`
}

// runTreeBench runs the tree suite: front, b1 and b2 of each run are this
// binary, re-executed with the hidden serve-tree subcommand.
func runTreeBench(cmd *cobra.Command, g *globalFlags, f *benchFlags) error {
	ctls, err := treesuite.SelectControllers(f.controllers)
	if err != nil {
		return usageError{err}
	}
	warmup, duration := f.warmup, f.duration
	if !f.warmupChanged {
		warmup = treesuite.DefaultWarmup
	}
	if !cmd.Flags().Changed("duration") {
		duration = treesuite.DefaultDuration
	}
	if duration < 500*time.Millisecond || warmup < 0 {
		return usageErrorf("--duration %v with --warmup %v: want a duration of at least 500ms", duration, warmup)
	}
	if f.rounds < 1 || f.rounds > 100 {
		return usageErrorf("--rounds %d: want 1 to 100", f.rounds)
	}
	exe, err := f.startProcesses()
	if err != nil {
		return err
	}
	res, err := treesuite.Execute(cmd.Context(), treesuite.Options{
		Controllers: ctls, Warmup: warmup, Duration: duration, Seed: f.seed, Rounds: f.rounds,
		Start: func(ctx context.Context, c treesuite.ServerConfig) (string, func() error, error) {
			return startConfigured(ctx, c.Role, c, exe, "bench", serveTreeCommand)
		},
		Progress: progressBar(cmd.ErrOrStderr()),
	})
	if err != nil && res == nil {
		return err
	}
	return finishRun(cmd, g, f, res, err, func(r bench.Row) treeRow {
		return treeRow{keyOf(r), r.NoCulprit, r.P99Norm, r.ThroughputNorm, r.P99Ms, r.SLOAttainment,
			r.CulpritHoldAfterMs, r.RetriesIntoOverload, r.VictimsCancelled, r.CulpritsCancelled, r.DecidedAfterMs, r.Error}
	}, false)
}
