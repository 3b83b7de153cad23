package main

import (
	"strconv"

	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/bench"
	"github.com/moirai-go/moirai/bench/serversuite"
)

// runServerBench runs a suite of a server patched for moirai (etcd,
// prometheus): the integration module's load program on the server as
// released and on its source patched for moirai, built and run as child
// processes (see package serversuite). size is the value of the suite's
// flag of the data it loads, which must be within [lo, hi].
func runServerBench(cmd *cobra.Command, g *globalFlags, f *benchFlags, s *serversuite.Suite, size, lo, hi int) error {
	cases, ctls, err := s.Select(f.cases, f.controllers)
	if err != nil {
		return usageError{err}
	}
	if f.rounds < 1 || f.rounds > 20 {
		return usageErrorf("--rounds %d: want 1 to 20", f.rounds)
	}
	if size < lo || size > hi {
		return usageErrorf("--%s %d: want %s to %s", s.Size, size, thousands(lo), thousands(hi))
	}
	o := serversuite.Options{Cases: cases, Controllers: ctls, Rounds: f.rounds, Seed: f.seed, Size: size,
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
	res, err := s.Execute(cmd.Context(), o)
	if err != nil && res == nil {
		return err
	}
	return finishRun(cmd, g, f, res, err, func(r bench.Row) bench.Row { return r }, false)
}

// thousands writes n ≥ 0 with a comma between groups of three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
