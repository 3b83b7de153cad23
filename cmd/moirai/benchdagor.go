package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/bench"
	"github.com/moirai-go/moirai/bench/dagorsuite"
)

// serveDagorCommand is the hidden subcommand that runs one server process
// of the dagor suite.
const serveDagorCommand = "serve-dagor"

// dagorRow is a row of the dagor suite as `bench run --suite dagor -o
// json` prints it: the suite's own fields, zeros included.
type dagorRow struct {
	rowKey
	FeedRatio          float64   `json:"feed_ratio"`
	SuccessRate        float64   `json:"success_rate"`
	OptimalSuccessRate float64   `json:"optimal_success_rate"`
	WastedWork         float64   `json:"wasted_work"`
	SuccessByCalls     []float64 `json:"success_by_calls,omitempty"`
	Error              string    `json:"error,omitempty"`
}

// runDagorBench runs the dagor suite: A and M of each run are this
// binary, re-executed with the hidden serve-dagor subcommand.
func runDagorBench(cmd *cobra.Command, g *globalFlags, f *benchFlags) error {
	cases, ctls, err := selectRun(f, dagorsuite.SelectCases, dagorsuite.SelectControllers)
	if err != nil {
		return err
	}
	feeds, err := dagorsuite.ParseFeeds(f.feeds)
	if err != nil {
		return usageErrorf("--feeds: %v", err)
	}
	warmup, duration := f.warmup, f.duration
	if !f.warmupChanged {
		warmup = dagorsuite.DefaultWarmup
	}
	if !cmd.Flags().Changed("duration") {
		duration = dagorsuite.DefaultDuration
	}
	if f.workers < 1 || f.workers > 10000 || f.service <= 0 || f.window <= 0 || f.windowCount < 1 || f.threshold <= 0 {
		return usageErrorf("--workers %d --service-time %v --window %v --window-count %d --threshold %v: want positive values (at most 10000 workers)", f.workers, f.service, f.window, f.windowCount, f.threshold)
	}
	if duration < 100*time.Millisecond || warmup < 0 {
		return usageErrorf("--duration %v with --warmup %v: want a duration of at least 100ms", duration, warmup)
	}
	exe, err := f.startProcesses()
	if err != nil {
		return err
	}
	errOut := cmd.ErrOrStderr()
	res, err := dagorsuite.Execute(cmd.Context(), dagorsuite.Options{
		Cases: cases, Controllers: ctls, Feeds: feeds, Warmup: warmup, Duration: duration, Seed: f.seed,
		Workers: f.workers, Service: f.service, Window: f.window, WindowCount: f.windowCount, Threshold: f.threshold,
		Start: func(ctx context.Context, c dagorsuite.ServerConfig) (string, func() error, error) {
			return startConfigured(ctx, c.Role, c, exe, "bench", serveDagorCommand)
		},
		Progress: progressBar(errOut),
	})
	if err != nil && res == nil {
		return err
	}
	return finishRun(cmd, g, f, res, err, func(r bench.Row) dagorRow {
		return dagorRow{keyOf(r), r.FeedRatio, r.SuccessRate,
			r.OptimalSuccessRate, r.WastedWork, r.SuccessByCalls, r.Error}
	}, false)
}
