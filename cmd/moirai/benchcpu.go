package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"time"

	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/bench"
	"github.com/moirai-go/moirai/bench/cpusuite"
)

// workerCPUCommand is the hidden subcommand the cpu suite runs in each of
// its processes.
const workerCPUCommand = "worker-cpu"

func newBenchWorkerCPUCommand() *cobra.Command {
	return newProcessCommand(workerCPUCommand, "Run one process of a cpu-suite run (used by bench run --suite cpu)",
		func(cmd *cobra.Command, c cpusuite.WorkerConfig) error {
			r, err := cpusuite.Worker(cmd.Context(), c)
			if err != nil {
				return err
			}
			return json.NewEncoder(cmd.OutOrStdout()).Encode(r)
		})
}

// runCPUBench runs the cpu suite: each run's processes are this binary,
// re-executed with the hidden worker-cpu subcommand.
func runCPUBench(cmd *cobra.Command, g *globalFlags, f *benchFlags) error {
	cases, ctls, err := selectRun(f, cpusuite.SelectCases, cpusuite.SelectControllers)
	if err != nil {
		return err
	}
	if f.duration < bench.MinDuration || f.warmup < 0 || f.warmup >= f.duration/2 {
		return usageErrorf("--duration %v with --warmup %v: want a duration of at least %v and a warm-up under half of it", f.duration, f.warmup, bench.MinDuration)
	}
	if f.rounds < 1 || f.rounds > 100 {
		return usageErrorf("--rounds %d: want 1 to 100", f.rounds)
	}
	if f.fib < 1 || f.fib > 45 || !(f.load > 0) || f.load > 4 {
		return usageErrorf("--fib %d --load %v: want a fib of 1 to 45 and a load in (0, 4]", f.fib, f.load)
	}
	exe, err := f.startProcesses()
	if err != nil {
		return err
	}
	errOut := cmd.ErrOrStderr()
	res, err := cpusuite.Execute(cmd.Context(), cpusuite.Options{
		Cases: cases, Controllers: ctls, Duration: f.duration, Warmup: f.warmup, Rounds: f.rounds, Seed: f.seed,
		Fib: f.fib, Load: f.load,
		Command: func(ctx context.Context, c cpusuite.WorkerConfig) *exec.Cmd {
			b, _ := json.Marshal(c)
			cmd := exec.CommandContext(ctx, exe, "bench", workerCPUCommand, "--config", string(b))
			cmd.WaitDelay = 5 * time.Second
			return cmd
		},
		Progress: progressBar(errOut),
	})
	if err != nil && res == nil {
		return err
	}
	err = finishRun(cmd, g, f, res, err, func(r bench.Row) cpuRow {
		return cpuRow{keyOf(r), r.P99Ms, r.MaxMs, r.QueueP99Ms,
			r.Throughput, r.Offered, r.ActiveMean, r.Background, r.Error}
	}, false)
	if g.Output != outputJSON {
		// The targets round by round, below the table of medians.
		for _, c := range cpusuite.Checks(res) {
			fmt.Fprintln(cmd.OutOrStdout(), c)
		}
	}
	return err
}

// cpuRow is a row of the cpu suite as `bench run --suite cpu -o json`
// prints it: the suite's own fields only.
type cpuRow struct {
	rowKey
	P99Ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
	QueueP99Ms float64 `json:"queue_p99_ms"`
	Throughput float64 `json:"throughput"`
	Offered    float64 `json:"offered"`
	ActiveMean float64 `json:"active_mean"`
	Background float64 `json:"background_cpus"`
	Error      string  `json:"error,omitempty"`
}
