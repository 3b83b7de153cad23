package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/bench"
)

// errSoakFailed is returned when a soak's checks fail.
var errSoakFailed = errors.New("soak: a check failed")

func newBenchSoakCommand(g *globalFlags) *cobra.Command {
	var (
		cases, controller, out string
		duration, run, sample  time.Duration
		parallel               int
		load                   float64
		seed                   uint64
	)
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Run the in-process cases for a long time and check that nothing grows",
		Long: `soak runs the in-process suite's cases again and again, several at once
(a case whose resource is the whole process's, its CPU or heap, alone),
each with its culprit and at twice its normal load (--load), under one
controller, for --duration. Every second it samples the goroutines, the
live heap, the open descriptors and the live tasks; at the end it checks
that they stayed flat after the warm-up (a fifth of the duration), that no
run cancelled a victim, leaked a worker slot or left a task unended, and
that no case's median p99 drifted up over the runs. It exits non-zero when a check fails.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, err := bench.SelectCases("inproc", cases)
			if err != nil {
				return usageError{err}
			}
			ctls, err := bench.SelectControllers(controller)
			if err != nil || len(ctls) != 1 {
				return usageErrorf("--controller %q: want one controller (%v)", controller, err)
			}
			if duration < 10*time.Second || run < bench.MinDuration || parallel < 1 || parallel > 16 || !(load > 0 && load <= 10) || sample <= 0 {
				return usageErrorf("--duration %v --run %v --parallel %d --load %v --sample %v: want a duration of at least 10s, runs of at least %v, 1 to 16 at once, a load in (0, 10]",
					duration, run, parallel, load, sample, bench.MinDuration)
			}
			if out != "" {
				if err := checkWritable(out); err != nil {
					return err
				}
			}
			errOut := cmd.ErrOrStderr()
			progress := func(time.Duration, int) {}
			if isTerminal(errOut) {
				progress = func(el time.Duration, runs int) {
					fmt.Fprintf(errOut, "\r\033[K%s of %s, %d runs", el.Round(time.Second), duration, runs)
				}
			}
			res, err := bench.Soak(cmd.Context(), bench.SoakOptions{Cases: cs, Controller: ctls[0], Duration: duration, Run: run,
				Parallel: parallel, Load: load, Sample: sample, Seed: seed, Progress: progress})
			if isTerminal(errOut) {
				fmt.Fprintln(errOut)
			}
			if err != nil {
				return err
			}
			if out != "" {
				b, err := json.MarshalIndent(res, "", "  ")
				if err != nil {
					return err
				}
				path := filepath.Join(out, "soak.json")
				if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
					return err
				}
				fmt.Fprintf(errOut, "wrote %s\n", path)
			}
			w := cmd.OutOrStdout()
			if g.Output == outputJSON {
				if err := json.NewEncoder(w).Encode(struct {
					Controller string            `json:"controller"`
					Duration   string            `json:"duration"`
					Runs       int               `json:"runs"`
					Checks     []bench.SoakCheck `json:"checks"`
				}{res.Controller, res.Duration, len(res.Runs), res.Checks}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(w, "soak of %d cases under %s for %s: %d runs, %d samples\n", len(cs), res.Controller, res.Duration, len(res.Runs), len(res.Samples))
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "CHECK\tRESULT\tDETAIL")
				for _, c := range res.Checks {
					verdict := "ok"
					if !c.OK {
						verdict = "FAILED"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, verdict, c.Text)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			if !res.OK() {
				return errSoakFailed
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cases, "case", "all", "cases of the inproc suite to run: NAME[,NAME…] or all")
	fl.StringVar(&controller, "controller", "moirai", "the controller to run them under")
	fl.DurationVar(&duration, "duration", 10*time.Minute, "length of the soak")
	fl.DurationVar(&run, "run", 6*time.Second, "length of each case's run")
	fl.IntVar(&parallel, "parallel", 3, "cases run at once (process-wide cases run alone)")
	fl.Float64Var(&load, "load", 2, "multiplier of the cases' light request rates")
	fl.DurationVar(&sample, "sample", time.Second, "sampling period of the process's health")
	fl.Uint64Var(&seed, "seed", 1, "seed of the load's arrival schedules")
	fl.StringVar(&out, "out", "", "directory to write soak.json (samples, runs, checks) to")
	return cmd
}
