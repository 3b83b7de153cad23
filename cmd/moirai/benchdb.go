package main

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/bench"
	"github.com/moirai-go/moirai/bench/dbsuite"
)

// runDBBench runs a database suite: pgbench (suite postgres) or sysbench
// (suite mysql) against the server of --dsn, each case's culprit on its own
// sessions, each controller.
func runDBBench(cmd *cobra.Command, g *globalFlags, f *benchFlags) error {
	if !cmd.Flags().Changed("duration") {
		f.duration = 15 * time.Second
	}
	if f.duration < 4*time.Second {
		return usageErrorf("--duration %v: the %s suite wants at least 4s per run (default 15s)", f.duration, f.suite)
	}
	if f.suite == dbsuite.SuiteMySQL && !cmd.Flags().Changed("dsn") {
		f.dsn = dbsuite.DefaultMySQLDSN
	}
	if f.clients < 1 || f.clients > 500 || f.rate < 0 || f.rows < 1000 || f.rows > 100_000_000 {
		return usageErrorf("--clients %d --rate %v --rows %d: want 1 to 500 clients, a rate ≥ 0 and 1,000 to 100,000,000 rows", f.clients, f.rate, f.rows)
	}
	if err := f.checkOut(); err != nil {
		return err
	}
	if f.guardInterval < 0 || f.guardSLO <= 0 {
		return usageErrorf("--guard-interval %v --guard-slo %v: want a positive objective and an interval ≥ 0 (0: the suite's default)", f.guardInterval, f.guardSLO)
	}
	if f.suite == dbsuite.SuiteMySQL && f.guardInterval > 0 && f.guardInterval <= 100*time.Millisecond {
		return usageErrorf("--guard-interval %v: MariaDB refreshes its InnoDB lock views at most every 100ms; poll less often", f.guardInterval)
	}
	if f.rounds < 1 || f.rounds > 100 {
		return usageErrorf("--rounds %d: want 1 to 100", f.rounds)
	}
	opt := dbsuite.Options{DSN: f.dsn, Duration: f.duration, Clients: f.clients, Rate: f.rate, Rows: f.rows,
		Rounds: f.rounds, NoCulprit: f.noCulprit,
		GuardInterval: f.guardInterval, GuardSLO: f.guardSLO, Progress: progressBar(cmd.ErrOrStderr())}
	if f.out != "" {
		// What the guard decided in each run, and why.
		af, err := os.Create(filepath.Join(f.out, "guard-audit.jsonl"))
		if err != nil {
			return err
		}
		defer af.Close()
		opt.GuardAudit = af
	}
	if cmd.Flags().Changed("warmup") {
		opt.Warmup = f.warmup
	}
	if f.cases != "all" {
		opt.Cases = strings.Split(f.cases, ",")
	}
	if f.controllers != "all" {
		opt.Controllers = strings.Split(f.controllers, ",")
	}
	execute := dbsuite.Execute
	if f.suite == dbsuite.SuiteMySQL {
		execute = dbsuite.ExecuteMySQL
	}
	res, err := execute(cmd.Context(), opt)
	if err != nil && res == nil {
		return err
	}
	return finishRun(cmd, g, f, res, err, func(r bench.Row) bench.Row { return r }, false, "guard-audit.jsonl")
}
