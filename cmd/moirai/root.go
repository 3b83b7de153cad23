package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes of the moirai command.
const (
	ExitSuccess     = 0   // the command did what was asked
	ExitError       = 1   // the command failed
	ExitBadArgs     = 2   // invalid flags or arguments: see --help
	ExitFindings    = 3   // moirai vet reported findings
	ExitInterrupted = 130 // stopped by SIGINT or SIGTERM (128 + SIGINT)
)

// Output formats of the -o flag.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// globalFlags are the flags every command takes.
type globalFlags struct {
	Output string // outputTable or outputJSON
}

// usageError is an error in the command line: a bad flag, argument or
// value. It exits with ExitBadArgs.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, a ...any) error {
	return usageError{fmt.Errorf(format, a...)}
}

// exitCode maps a command's error to the process's exit code.
func exitCode(err error) int {
	var ue usageError
	switch {
	case err == nil:
		return ExitSuccess
	case errors.As(err, &ue):
		return ExitBadArgs
	case errors.Is(err, errFindings):
		return ExitFindings
	case errors.Is(err, context.Canceled):
		return ExitInterrupted
	default:
		return ExitError
	}
}

// newRootCommand builds the command tree, writing to out and errOut. Each
// call returns a fresh tree with its own flags, so tests can run commands
// in-process.
func newRootCommand(out, errOut io.Writer) *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "moirai",
		Short: "Overload control inside services",
		Long: `moirai keeps a service's latency objective under overload by tracing which
tasks hold and wait for which resources, and acting on the one that
monopolizes a contended resource.

This version ships the core runtime, a demonstration of what it sees, the
evaluation harness (moirai bench), targeted cancellation (on by default), the
analyzers that find the resources worth instrumenting (moirai vet), the
CPU budget (moirai cpus), and targeted cancellation from outside a
PostgreSQL or MariaDB server (moirai guard).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			switch g.Output {
			case outputTable, outputJSON:
				return nil
			default:
				return usageErrorf("-o %q: want %q or %q", g.Output, outputTable, outputJSON)
			}
		},
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	root.SetOut(out)
	root.SetErr(errOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentFlags().StringVarP(&g.Output, "output", "o", outputTable, "output format: table or json")
	root.CompletionOptions.DisableDefaultCmd = true

	root.AddCommand(
		newVersionCommand(g),
		newDemoCommand(g),
		newBenchCommand(g),
		newVetCommand(g),
		newCPUsCommand(g),
		newGuardCommand(g),
	)
	return root
}

// noArgs refuses positional arguments, including unknown subcommands.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		if cmd.HasSubCommands() {
			return usageErrorf("unknown command %q for %q; see %s --help", args[0], cmd.CommandPath(), cmd.CommandPath())
		}
		return usageErrorf("%s takes no arguments, got %q", cmd.CommandPath(), args)
	}
	return nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
