package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/bench"
)

// errSoakFailed is returned when a soak's checks fail.
var errSoakFailed = errors.New("soak: a check failed")

// soakFlags are bench soak's flags.
type soakFlags struct {
	cases, controller, out string
	duration, run, sample  time.Duration
	parallel               int
	load                   float64
	seed                   uint64
}

func newBenchSoakCommand(g *globalFlags) *cobra.Command {
	var f soakFlags
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
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchSoak(cmd, g, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.cases, "case", "all", "cases of the inproc suite to run: NAME[,NAME…] or all")
	fl.StringVar(&f.controller, "controller", "moirai", "the controller to run them under")
	fl.DurationVar(&f.duration, "duration", 10*time.Minute, "length of the soak")
	fl.DurationVar(&f.run, "run", 6*time.Second, "length of each case's run")
	fl.IntVar(&f.parallel, "parallel", 3, "cases run at once (process-wide cases run alone)")
	fl.Float64Var(&f.load, "load", 2, "multiplier of the cases' light request rates")
	fl.DurationVar(&f.sample, "sample", time.Second, "sampling period of the process's health")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the load's arrival schedules")
	fl.StringVar(&f.out, "out", "", "directory to write soak.json (samples, runs, checks) to")
	return cmd
}

// runBenchSoak is bench soak: it runs the soak the flags describe, saves
// it under --out if set, prints its checks, and returns errSoakFailed if
// one failed.
func runBenchSoak(cmd *cobra.Command, g *globalFlags, f *soakFlags) error {
	opts, err := f.options()
	if err != nil {
		return err
	}
	if f.out != "" {
		if err := checkWritable(f.out); err != nil {
			return err
		}
	}
	errOut := cmd.ErrOrStderr()
	opts.Progress = func(time.Duration, int) {}
	if isTerminal(errOut) {
		opts.Progress = func(el time.Duration, runs int) {
			fmt.Fprintf(errOut, "\r\033[K%s of %s, %d runs", el.Round(time.Second), f.duration, runs)
		}
	}
	res, err := bench.Soak(cmd.Context(), opts)
	if isTerminal(errOut) {
		fmt.Fprintln(errOut)
	}
	if err != nil {
		return err
	}
	if f.out != "" {
		if err := saveSoak(f.out, res, errOut); err != nil {
			return err
		}
	}
	if err := printSoak(cmd.OutOrStdout(), g, res, len(opts.Cases)); err != nil {
		return err
	}
	if !res.OK() {
		return errSoakFailed
	}
	return nil
}

// options returns the soak the flags describe, or a usage error naming
// the flags that are off.
func (f *soakFlags) options() (bench.SoakOptions, error) {
	cs, err := bench.SelectCases("inproc", f.cases)
	if err != nil {
		return bench.SoakOptions{}, usageError{err}
	}
	ctls, err := bench.SelectControllers(f.controller)
	if err != nil || len(ctls) != 1 {
		return bench.SoakOptions{}, usageErrorf("--controller %q: want one controller (%v)", f.controller, err)
	}
	if f.duration < 10*time.Second || f.run < bench.MinDuration || f.parallel < 1 || f.parallel > 16 || !(f.load > 0 && f.load <= 10) || f.sample <= 0 {
		return bench.SoakOptions{}, usageErrorf("--duration %v --run %v --parallel %d --load %v --sample %v: want a duration of at least 10s, runs of at least %v, 1 to 16 at once, a load in (0, 10]",
			f.duration, f.run, f.parallel, f.load, f.sample, bench.MinDuration)
	}
	return bench.SoakOptions{Cases: cs, Controller: ctls[0], Duration: f.duration, Run: f.run,
		Parallel: f.parallel, Load: f.load, Sample: f.sample, Seed: f.seed}, nil
}

// saveSoak writes the soak's samples, runs and checks to soak.json in
// dir, and says so on errOut.
func saveSoak(dir string, res *bench.SoakResult, errOut io.Writer) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "soak.json")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(errOut, "wrote %s\n", path)
	return nil
}

// printSoak prints the soak's checks of ncases cases to w, as a table or
// as JSON (-o).
func printSoak(w io.Writer, g *globalFlags, res *bench.SoakResult, ncases int) error {
	if g.Output == outputJSON {
		return json.NewEncoder(w).Encode(struct {
			Controller string            `json:"controller"`
			Duration   string            `json:"duration"`
			Runs       int               `json:"runs"`
			Checks     []bench.SoakCheck `json:"checks"`
		}{res.Controller, res.Duration, len(res.Runs), res.Checks})
	}
	fmt.Fprintf(w, "soak of %d cases under %s for %s: %d runs, %d samples\n", ncases, res.Controller, res.Duration, len(res.Runs), len(res.Samples))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT\tDETAIL")
	for _, c := range res.Checks {
		verdict := "ok"
		if !c.OK {
			verdict = "FAILED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, verdict, c.Text)
	}
	return tw.Flush()
}
