package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/bench/dagorsuite"
	"github.com/moirai-go/moirai/bench/report"
)

// serveDagorCommand is the hidden subcommand that runs one server process
// of the dagor suite.
const serveDagorCommand = "serve-dagor"

func newBenchServeDagorCommand() *cobra.Command {
	return newServeCommand(serveDagorCommand, "dagor", func(ctx context.Context, c dagorsuite.ServerConfig, ready func(string)) error {
		return dagorsuite.Serve(ctx, c, ready)
	})
}

// newServeCommand returns a hidden subcommand that runs one server
// process of a multi-process suite: it decodes the server's
// configuration from --config, serves until its parent closes its
// standard input (or dies) or signals it, and prints "listening ADDR"
// once it serves, which startProcess waits for.
func newServeCommand[C any](name, suite string, serve func(ctx context.Context, c C, ready func(addr string)) error) *cobra.Command {
	var config string
	cmd := &cobra.Command{
		Use:    name,
		Short:  fmt.Sprintf("Run one server of a %s-suite run (used by bench run --suite %s)", suite, suite),
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var c C
			if err := json.Unmarshal([]byte(config), &c); err != nil {
				return usageErrorf("--config: %v", err)
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			go func() {
				_, _ = io.Copy(io.Discard, cmd.InOrStdin())
				cancel()
			}()
			out := cmd.OutOrStdout()
			return serve(ctx, c, func(addr string) { fmt.Fprintf(out, "listening %s\n", addr) })
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "the server's configuration, as JSON")
	return cmd
}

// dagorRow is a row of the dagor suite as `bench run --suite dagor -o
// json` prints it: the suite's own fields, zeros included.
type dagorRow struct {
	Suite              string    `json:"suite"`
	Case               string    `json:"case"`
	Controller         string    `json:"controller"`
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
	cases, err := dagorsuite.SelectCases(f.cases)
	if err != nil {
		return usageError{err}
	}
	ctls, err := dagorsuite.SelectControllers(f.controllers)
	if err != nil {
		return usageError{err}
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
	if f.out != "" {
		if err := checkWritable(f.out); err != nil {
			return err
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program to run the servers: %w", err)
	}
	errOut := cmd.ErrOrStderr()
	res, err := dagorsuite.Execute(cmd.Context(), dagorsuite.Options{
		Cases: cases, Controllers: ctls, Feeds: feeds, Warmup: warmup, Duration: duration, Seed: f.seed,
		Workers: f.workers, Service: f.service, Window: f.window, WindowCount: f.windowCount, Threshold: f.threshold,
		Start: func(ctx context.Context, c dagorsuite.ServerConfig) (string, func() error, error) {
			return startServer(ctx, exe, c)
		},
		Progress: progressBar(errOut),
	})
	if err != nil && res == nil {
		return err
	}
	out := cmd.OutOrStdout()
	if g.Output == outputJSON {
		enc := json.NewEncoder(out)
		for _, r := range res.Rows {
			if err := enc.Encode(dagorRow{r.Suite, r.Case, r.Controller, r.FeedRatio, r.SuccessRate,
				r.OptimalSuccessRate, r.WastedWork, r.SuccessByCalls, r.Error}); err != nil {
				return err
			}
		}
	} else if err := report.Table(out, res.Rows); err != nil {
		return err
	}
	if f.out != "" {
		path := filepath.Join(f.out, "results.json")
		if err := report.Save(path, res); err != nil {
			return err
		}
		fmt.Fprintf(errOut, "wrote %s\n", path)
	}
	return err
}

// startServer runs one server process and waits for its address.
func startServer(ctx context.Context, exe string, c dagorsuite.ServerConfig) (string, func() error, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", nil, err
	}
	return startProcess(ctx, c.Role, exe, "bench", serveDagorCommand, "--config", string(b))
}

// startProcess runs a server process that prints "listening ADDR" on its
// standard output once it serves and lives until its standard input is
// closed, and waits for its address. role names it in errors.
func startProcess(ctx context.Context, role, exe string, args ...string) (string, func() error, error) {
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() error {
		stdin.Close()
		err := cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) && ctx.Err() != nil {
			return nil // killed because the invocation was cancelled
		}
		return err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		_ = stop()
		return "", nil, fmt.Errorf("server %s did not start (read %q: %v)", role, line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return addr, stop, nil
}
