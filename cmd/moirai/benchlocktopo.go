package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/moirai-go/moirai/bench/locktopo"
	"github.com/moirai-go/moirai/bench/report"
)

// locktopoFlags are the locktopo suite's flags of `moirai bench run`.
type locktopoFlags struct {
	scenarios int
	replay    string
	servers   string
}

func (f *locktopoFlags) register(fl *pflag.FlagSet) {
	fl.IntVar(&f.scenarios, "scenarios", 40, "suite locktopo: generated scenarios per server")
	fl.StringVar(&f.replay, "replay", "", "suite locktopo: run only these scenario seeds (SEED[,SEED…], as a failure prints them)")
	fl.StringVar(&f.servers, "servers", "postgres,mysql", "suite locktopo: the local servers to run on: postgres, mysql or both")
}

// runLocktopoBench runs generated lock topologies on the local servers
// under an acting guard, and checks each against its ground truth. It
// fails (after printing and writing the results) when the guard acted
// wrongly or missed a root.
func runLocktopoBench(cmd *cobra.Command, g *globalFlags, f *benchFlags) error {
	lf := &f.locktopo
	if lf.scenarios < 1 || lf.scenarios > 10_000 {
		return usageErrorf("--scenarios %d: want 1 to 10000", lf.scenarios)
	}
	opt := locktopo.Options{Scenarios: lf.scenarios, Seed: f.seed, Log: cmd.ErrOrStderr()}
	for _, s := range strings.Split(lf.servers, ",") {
		if s = strings.TrimSpace(s); s != locktopo.Postgres && s != locktopo.MySQL {
			return usageErrorf("--servers %q: want postgres, mysql or both", lf.servers)
		}
		opt.Servers = append(opt.Servers, strings.TrimSpace(s))
	}
	if lf.replay != "" {
		for _, s := range strings.Split(lf.replay, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
			if err != nil {
				return usageErrorf("--replay %q: want scenario seeds, comma-separated", lf.replay)
			}
			opt.Replay = append(opt.Replay, n)
		}
	}
	if f.out != "" {
		if err := checkWritable(f.out); err != nil {
			return err
		}
	}
	// The scenarios kill their own connections: the driver's "unexpected
	// EOF" lines would only hide the report.
	mysql.SetLogger(log.New(io.Discard, "", 0))
	bar := progressBar(cmd.ErrOrStderr())
	opt.Progress = func(r locktopo.Result, done, total int) { bar(done, total, r.Server+" "+r.Topology) }
	if len(opt.Servers) > 1 {
		opt.Progress = nil // two servers at once: one bar would jump between them
	}
	start := time.Now()
	rep, err := locktopo.Run(cmd.Context(), opt)
	if rep == nil {
		return err
	}
	res := locktopo.Results(rep, opt)
	out := cmd.OutOrStdout()
	if g.Output == outputJSON {
		enc := json.NewEncoder(out)
		for _, r := range res.Rows {
			if eerr := enc.Encode(r); eerr != nil {
				return eerr
			}
		}
	} else {
		if terr := report.Table(out, res.Rows); terr != nil {
			return terr
		}
		fmt.Fprintf(out, "\n%d scenarios in %v (seed %d)\n", len(rep.Results), time.Since(start).Round(time.Second), f.seed)
	}
	if f.out != "" {
		path := filepath.Join(f.out, "results.json")
		if serr := report.Save(path, res); serr != nil {
			return serr
		}
		scen := filepath.Join(f.out, "scenarios.jsonl")
		if werr := writeScenarios(scen, rep.Results); werr != nil {
			return werr
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s and %s\n", path, scen)
	}
	if err != nil {
		return err
	}
	for _, r := range res.Rows {
		if r.Case == "all" && (r.WrongActions > 0 || r.BuildFailed > 0 || (r.Actionable > 0 && float64(r.RootActed) < 0.99*float64(r.Actionable))) {
			return fmt.Errorf("locktopo: %s: %d wrong actions, roots acted on in %d of %d actionable scenarios, %d not built (seeds above)",
				r.Server, r.WrongActions, r.RootActed, r.Actionable, r.BuildFailed)
		}
	}
	return nil
}

// writeScenarios writes each scenario's result as a JSON line.
func writeScenarios(path string, rs []locktopo.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, r := range rs {
		if err := enc.Encode(r); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
