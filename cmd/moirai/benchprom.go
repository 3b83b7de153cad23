package main

import (
	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/bench"
	"github.com/moirai-go/moirai/bench/promsuite"
)

// runPromBench runs the prometheus suite: the integration module's load program
// on Prometheus's released module and on its source patched for moirai, built
// and run as child processes (see package promsuite).
func runPromBench(cmd *cobra.Command, g *globalFlags, f *benchFlags) error {
	cases, ctls, err := promsuite.Select(f.cases, f.controllers)
	if err != nil {
		return usageError{err}
	}
	if f.rounds < 1 || f.rounds > 20 {
		return usageErrorf("--rounds %d: want 1 to 20", f.rounds)
	}
	if f.series < 200 || f.series > 1_000_000 {
		return usageErrorf("--series %d: want 200 to 1,000,000", f.series)
	}
	o := promsuite.Options{Cases: cases, Controllers: ctls, Rounds: f.rounds, Seed: f.seed, Series: f.series,
		NoCulprit: f.noCulprit, Progress: progressBar(cmd.ErrOrStderr())}
	if cmd.Flags().Changed("duration") {
		o.Duration = f.duration
	}
	if f.warmupChanged {
		o.Warmup = f.warmup
	}
	if cmd.Flags().Changed("duration") && o.Duration < bench.MinDuration || f.warmupChanged && o.Warmup <= 0 {
		return usageErrorf("--duration %v --warmup %v: want at least %v and a positive warm-up", f.duration, f.warmup, bench.MinDuration)
	}
	if err := f.checkOut(); err != nil {
		return err
	}
	res, err := promsuite.Execute(cmd.Context(), o)
	if err != nil && res == nil {
		return err
	}
	return finishRun(cmd, g, f, res, err, func(r bench.Row) bench.Row { return r }, false)
}
