package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/bench"
	"github.com/moirai-go/moirai/bench/report"
)

// What the bench subcommands share: the checks before a run, the hidden
// subcommands the multi-process suites re-execute this program with, and
// the printing and saving of a run's rows.

// selectRun resolves --case and --controller with a suite's selectors; a
// name the suite does not have is a usage error.
func selectRun[Cs, Ks any](f *benchFlags, cases func(string) (Cs, error), ctls func(string) (Ks, error)) (Cs, Ks, error) {
	cs, err := cases(f.cases)
	if err != nil {
		var ks Ks
		return cs, ks, usageError{err}
	}
	ks, err := ctls(f.controllers)
	if err != nil {
		return cs, ks, usageError{err}
	}
	return cs, ks, nil
}

// checkOut fails before a run, not after it, when --out cannot be written.
func (f *benchFlags) checkOut() error {
	if f.out == "" {
		return nil
	}
	return checkWritable(f.out)
}

// startProcesses checks what a multi-process suite needs before its run
// (--out writable) and returns this program, which the suite re-executes
// for its servers and processes.
func (f *benchFlags) startProcesses() (string, error) {
	if err := f.checkOut(); err != nil {
		return "", err
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding this program to run the suite's processes: %w", err)
	}
	return exe, nil
}

// newProcessCommand returns a hidden subcommand that runs one process of
// a multi-process suite: it decodes the process's configuration from
// --config and runs it.
func newProcessCommand[C any](name, short string, run func(cmd *cobra.Command, c C) error) *cobra.Command {
	var config string
	cmd := &cobra.Command{
		Use:    name,
		Short:  short,
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var c C
			if err := json.Unmarshal([]byte(config), &c); err != nil {
				return usageErrorf("--config: %v", err)
			}
			return run(cmd, c)
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "the process's configuration, as JSON")
	return cmd
}

// newServeCommand returns a hidden subcommand that runs one server
// process of a multi-process suite: it serves until its parent closes its
// standard input (or dies) or signals it, and prints "listening ADDR"
// once it serves, which startProcess waits for.
func newServeCommand[C any](name, suite string, serve func(ctx context.Context, c C, ready func(addr string)) error) *cobra.Command {
	short := fmt.Sprintf("Run one server of a %s-suite run (used by bench run --suite %s)", suite, suite)
	return newProcessCommand(name, short, func(cmd *cobra.Command, c C) error {
		ctx, cancel := context.WithCancel(cmd.Context())
		defer cancel()
		go func() {
			_, _ = io.Copy(io.Discard, cmd.InOrStdin())
			cancel()
		}()
		out := cmd.OutOrStdout()
		return serve(ctx, c, func(addr string) { fmt.Fprintf(out, "listening %s\n", addr) })
	})
}

// finishRun prints a run's rows (printRows) and, with --out, saves them
// (saveRun); it returns the first error of either, else runErr, the run's
// own.
func finishRun[R any](cmd *cobra.Command, g *globalFlags, f *benchFlags, res *bench.Results, runErr error, row func(bench.Row) R, html bool, also ...string) error {
	if err := printRows(cmd.OutOrStdout(), g, res.Rows, row); err != nil {
		return err
	}
	if f.out != "" {
		if err := saveRun(cmd.ErrOrStderr(), f.out, res, html, also...); err != nil {
			return err
		}
	}
	return runErr
}

// rowKey is what every suite's row starts with in JSON.
type rowKey struct {
	Suite      string `json:"suite"`
	Case       string `json:"case"`
	Controller string `json:"controller"`
}

func keyOf(r bench.Row) rowKey { return rowKey{r.Suite, r.Case, r.Controller} }

// printRows prints a run's rows on out: the table, or with -o json one
// object a row, as row makes it (a suite's own fields).
func printRows[R any](out io.Writer, g *globalFlags, rows []bench.Row, row func(bench.Row) R) error {
	if g.Output != outputJSON {
		return report.Table(out, rows)
	}
	enc := json.NewEncoder(out)
	for _, r := range rows {
		if err := enc.Encode(row(r)); err != nil {
			return err
		}
	}
	return nil
}

// saveRun writes a run's results to dir: results.json and, with html,
// report.html; it says on log what it wrote, also files the run wrote
// there itself.
func saveRun(log io.Writer, dir string, res *bench.Results, html bool, also ...string) error {
	var err error
	wrote := []string{filepath.Join(dir, "results.json")}
	if html {
		err = writeResults(dir, res)
		wrote = append(wrote, filepath.Join(dir, "report.html"))
	} else {
		err = report.Save(wrote[0], res)
	}
	if err != nil {
		return err
	}
	for _, a := range also {
		wrote = append(wrote, filepath.Join(dir, a))
	}
	last := len(wrote) - 1
	if last == 0 {
		fmt.Fprintf(log, "wrote %s\n", wrote[0])
	} else {
		fmt.Fprintf(log, "wrote %s and %s\n", strings.Join(wrote[:last], ", "), wrote[last])
	}
	return nil
}
