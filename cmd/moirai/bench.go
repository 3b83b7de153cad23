package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/moirai-go/moirai/bench"
	"github.com/moirai-go/moirai/bench/cpusuite"
	"github.com/moirai-go/moirai/bench/dagorsuite"
	"github.com/moirai-go/moirai/bench/dbsuite"
	"github.com/moirai-go/moirai/bench/etcdsuite"
	_ "github.com/moirai-go/moirai/bench/inproc" // the inproc suite
	"github.com/moirai-go/moirai/bench/locktopo"
	"github.com/moirai-go/moirai/bench/pathfencesuite"
	"github.com/moirai-go/moirai/bench/promsuite"
	"github.com/moirai-go/moirai/bench/report"
	"github.com/moirai-go/moirai/bench/treesuite"
)

// benchFlags are the flags of `moirai bench run`.
type benchFlags struct {
	suite       string
	cases       string
	controllers string
	duration    time.Duration
	seed        uint64
	out         string
	noCulprit   bool
	culprit     string
	noisy       int
	sloScale    float64
	metrics     bool
	hostLoad    int
	// The cpu suite's.
	warmup time.Duration
	rounds int
	fib    int
	load   float64
	// The dagor suite's.
	feeds         string
	guardInterval time.Duration
	threshold     time.Duration
	guardSLO      time.Duration
	warmupChanged bool
	workers       int
	service       time.Duration
	window        time.Duration
	windowCount   int
	// The postgres suite's.
	dsn     string
	clients int
	rate    float64
	rows    int
	keys    int
	series  int
	// The locktopo suite's.
	locktopo locktopoFlags
}

func newBenchCommand(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure moirai and its baselines on the evaluation cases",
		Long: `bench runs the evaluation cases of bench/CASES.md: each case's service, served
over loopback HTTP under an open-loop load, first without its culprit, then
with it under each controller, and reports the results normalized by the
run without the culprit.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newBenchListCommand(g), newBenchRunCommand(g), newBenchReportCommand(g), newBenchTrimCommand(), newBenchWorkerCPUCommand(), newBenchSpinCommand(),
		newServeCommand(serveDagorCommand, "dagor", dagorsuite.Serve),
		newServeCommand(servePathfenceCommand, "pathfence", func(ctx context.Context, c pathfencesuite.ServerConfig, ready func(string)) error {
			return pathfencesuite.Serve(ctx, c, ready)
		}),
		newServeCommand(serveTreeCommand, "tree", treesuite.Serve),
		newBenchSoakCommand(g))
	return cmd
}

func newBenchRunCommand(g *globalFlags) *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run cases under controllers and report the results",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.warmupChanged = cmd.Flags().Changed("warmup")
			return runBench(cmd, g, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.suite, "suite", "inproc", "suite to run")
	fl.StringVar(&f.cases, "case", "all", "cases to run: NAME[,NAME…] or all")
	fl.StringVar(&f.controllers, "controller", "all", "controllers to run: NAME[,NAME…] or all")
	fl.DurationVar(&f.duration, "duration", 3*time.Second, "length of each run (suite dagor: 8s, its mixed workload three times as long; pathfence: 20s; tree and prometheus: 6s; etcd: 4s; unless set)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the load's arrival schedule")
	fl.StringVar(&f.out, "out", "", "directory to write results.json and report.html to")
	fl.BoolVar(&f.noCulprit, "no-culprit", false, "suites inproc, etcd, prometheus, postgres and mysql: measure the controllers' cost with nothing wrong: every run without its culprit, compared with a run under no control")
	fl.StringVar(&f.culprit, "culprit", "once", "suite inproc: how the culprit comes: once (one long request, the Atropos cases) or stream (the case's noisy client, shorter requests back to back from 4 connections for half the run, the pBox cases; cases without one send their culprit once)")
	fl.Float64Var(&f.sloScale, "slo-scale", 0, "suite inproc: tell the controllers an objective this many times each case's (the metrics keep the case's)")
	fl.IntVar(&f.noisy, "noisy-clients", 0, "suite inproc: with --culprit stream, the noisy client's connections in every case (default: the case's, 4 in most)")
	fl.IntVar(&f.hostLoad, "host-load", 0, fmt.Sprintf("suite inproc: make the host hostile: N processes (at most %d), each busy-looping on a CPU, started for each run and killed after it, outside the controller's view (the service's requests stretched by the scheduler, not by a culprit)", bench.MaxHostLoad))
	fl.BoolVar(&f.metrics, "metrics", false, "suite inproc: export each run's controller to Prometheus collectors, scraped every 100ms (what metrics cost)")
	fl.DurationVar(&f.warmup, "warmup", 500*time.Millisecond, "suites cpu, dagor, etcd, prometheus, pathfence, postgres, mysql and tree: unmeasured start of each run (dagor: 5s, pathfence: 6s, postgres and mysql: 3s, tree, etcd and prometheus: 1s unless set)")
	fl.IntVar(&f.rounds, "rounds", 1, "suites cpu, etcd, prometheus, tree, postgres and mysql: runs of every (case, controller) pair, interleaved (etcd, prometheus, tree, postgres and mysql: pooled into one row)")
	fl.IntVar(&f.keys, "keys", etcdsuite.DefaultKeys, "suite etcd: keys loaded before the runs; the large range reads half of them")
	fl.IntVar(&f.series, "series", promsuite.DefaultSeries, "suite prometheus: series loaded before the runs; the heavy queries read every one")
	fl.IntVar(&f.fib, "fib", cpusuite.DefaultFib, "suite cpu: size of a work item, fib(N)")
	fl.Float64Var(&f.load, "load", cpusuite.DefaultLoad, "suite cpu: offered load, as a fraction of the host's CPUs")
	fl.StringVar(&f.feeds, "feeds", "0.5,1,2,4", "suite dagor: feed rates, as ratios to the rate that saturates M")
	fl.IntVar(&f.workers, "workers", dagorsuite.DefaultWorkers, "suite dagor: M's worker slots")
	fl.DurationVar(&f.service, "service-time", dagorsuite.DefaultService, "suite dagor: M's time per call")
	fl.DurationVar(&f.window, "window", dagorsuite.DefaultWindow, "suite dagor: admission window (time)")
	fl.IntVar(&f.windowCount, "window-count", dagorsuite.DefaultWindowCount, "suite dagor: admission window (requests)")
	fl.DurationVar(&f.threshold, "threshold", dagorsuite.DefaultThreshold, "suite dagor: the mean queueing time above which a window is overloaded (also CoDel's target)")
	fl.StringVar(&f.dsn, "dsn", "postgres://postgres@127.0.0.1:5432/test", "suites postgres and mysql: the server (mysql: "+dbsuite.DefaultMySQLDSN+" unless set)")
	fl.IntVar(&f.clients, "clients", 8, "suites postgres and mysql: pgbench clients, sysbench threads")
	fl.IntVar(&f.rows, "rows", 1_500_000, "suites postgres and mysql: rows of the suite's table (pg-vacuum-full's length and my-dump's size grow with it)")
	fl.DurationVar(&f.guardInterval, "guard-interval", 0, "suites postgres and mysql: the guard's poll interval (default 100ms on postgres, 250ms on mysql)")
	fl.DurationVar(&f.guardSLO, "guard-slo", 200*time.Millisecond, "suites postgres and mysql: the guard's objective (--slo of moirai guard); twice the victims' objective by default")
	fl.Float64Var(&f.rate, "rate", 0, "suites postgres and mysql: open loop at this many transactions/s (pgbench -R, sysbench --rate); 0: closed loop")
	f.locktopo.register(fl)
	return cmd
}

func runBench(cmd *cobra.Command, g *globalFlags, f *benchFlags) error {
	if err := suiteFlags(cmd, f.suite); err != nil {
		return err
	}
	switch f.suite {
	case cpusuite.Suite:
		return runCPUBench(cmd, g, f)
	case dagorsuite.Suite:
		return runDagorBench(cmd, g, f)
	case dbsuite.SuitePostgres, dbsuite.SuiteMySQL:
		return runDBBench(cmd, g, f)
	case pathfencesuite.Suite:
		return runPathfenceBench(cmd, g, f)
	case treesuite.Suite:
		return runTreeBench(cmd, g, f)
	case locktopo.Suite:
		return runLocktopoBench(cmd, g, f)
	case etcdsuite.Suite:
		return runServerBench(cmd, g, f, etcdsuite.Spec, f.keys, 1000, 10_000_000)
	case promsuite.Suite:
		return runServerBench(cmd, g, f, promsuite.Spec, f.series, 200, 1_000_000)
	}
	cases, ctls, err := selectRun(f, func(list string) ([]bench.Case, error) { return bench.SelectCases(f.suite, list) }, bench.SelectControllers)
	if err != nil {
		return err
	}
	if f.duration < bench.MinDuration {
		return usageErrorf("--duration %v is too short to measure anything; the minimum is %v", f.duration, bench.MinDuration)
	}
	if f.culprit != "once" && f.culprit != "stream" {
		return usageErrorf("--culprit %q: want once or stream", f.culprit)
	}
	if cmd.Flags().Changed("slo-scale") && !(f.sloScale > 0 && f.sloScale <= 100) {
		return usageErrorf("--slo-scale %v: want a factor above 0 and at most 100", f.sloScale)
	}
	if cmd.Flags().Changed("noisy-clients") && (f.culprit != "stream" || f.noisy < 1 || f.noisy > 256) {
		return usageErrorf("--noisy-clients %d: want 1 to 256, with --culprit stream", f.noisy)
	}
	if f.hostLoad < 0 || f.hostLoad > bench.MaxHostLoad {
		return usageErrorf("--host-load %d: want 0 to %d processes", f.hostLoad, bench.MaxHostLoad)
	}
	if err := f.checkOut(); err != nil {
		return err
	}
	o := bench.Options{
		Suite: f.suite, Cases: cases, Controllers: ctls, Duration: f.duration, Seed: f.seed, NoCulprit: f.noCulprit, Stream: f.culprit == "stream", NoisyClients: f.noisy, SLOScale: f.sloScale, Metrics: f.metrics,
	}
	if f.hostLoad > 0 {
		if o.HostLoadCommand, err = hostLoadCommand(); err != nil {
			return err
		}
		o.HostLoad = f.hostLoad
	}
	errOut := cmd.ErrOrStderr()
	o.Progress = progressBar(errOut)
	res, err := bench.Execute(cmd.Context(), o)
	if err != nil && res == nil {
		return err
	}
	// With -o json, one object per row with the row's fields only; the
	// sanity check goes to the error stream, and to results.json.
	out := cmd.OutOrStdout()
	if err := printRows(out, g, res.Rows, func(r bench.Row) bench.Row { r.Degraded = nil; return r }); err != nil {
		return err
	}
	if g.Output == outputJSON {
		out = errOut
	}
	warnNotDegraded(out, res.Rows)
	if f.out != "" {
		if err := saveRun(errOut, f.out, res, true); err != nil {
			return err
		}
	}
	return err
}

// progressBar returns a progress callback that draws a bar on w when w is
// a terminal, and does nothing otherwise.
func progressBar(w io.Writer) func(done, total int, what string) {
	if !isTerminal(w) {
		return func(int, int, string) {}
	}
	return func(done, total int, what string) {
		const width = 30
		n := width * done / max(total, 1)
		fmt.Fprintf(w, "\r\033[K[%s%s] %d/%d %s", strings.Repeat("#", n), strings.Repeat(".", width-n), done, total, what)
		if done == total {
			fmt.Fprintln(w)
		}
	}
}

// warnNotDegraded says which cases did not show the overload they model.
func warnNotDegraded(w io.Writer, rows []bench.Row) {
	for _, r := range rows {
		if r.Degraded != nil && !*r.Degraded {
			fmt.Fprintf(w, "warning: case %s does not degrade without control (throughput_norm %.2f > 0.8 and p99_norm %.2f < 2): it is mis-sized\n",
				r.Case, r.ThroughputNorm, r.P99Norm)
		}
	}
}

// checkWritable creates dir if needed and proves a file can be written in
// it.
func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out %s: %w", dir, err)
	}
	probe, err := os.CreateTemp(dir, ".moirai-write-check-*")
	if err != nil {
		return fmt.Errorf("--out %s is not writable: %w", dir, err)
	}
	name := probe.Name()
	probe.Close()
	return os.Remove(name)
}

func writeResults(dir string, res *bench.Results) error {
	if err := report.Save(filepath.Join(dir, "results.json"), res); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "report.html"))
	if err != nil {
		return err
	}
	if err := report.HTML(f, res); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// flagSuites reads the suites a flag applies to from its usage ("suite
// cpu: …", "suites cpu, postgres and mysql: …"); nil: every suite.
var flagSuites = regexp.MustCompile(`^suites? ([a-z]+(?:, [a-z]+)*(?: and [a-z]+)?):`)

// suiteFlags rejects a flag set on the command line that the suite does
// not read: it would be silently ignored.
func suiteFlags(cmd *cobra.Command, suite string) error {
	var err error
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		m := flagSuites.FindStringSubmatch(fl.Usage)
		if m == nil || err != nil {
			return
		}
		names := strings.FieldsFunc(strings.ReplaceAll(m[1], " and ", ","), func(r rune) bool { return r == ',' || r == ' ' })
		if !slices.Contains(names, suite) {
			err = usageErrorf("--%s applies to %s only, not to suite %s", fl.Name, strings.TrimSuffix(m[0], ":"), suite)
		}
	})
	return err
}
