package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/analysis/vet"
)

// errFindings is returned when moirai vet found something: exit code
// ExitFindings, as go vet's analyzers exit.
var errFindings = errors.New("moirai vet: findings reported")

func newVetCommand(g *globalFlags) *cobra.Command {
	var opt vet.Options
	cmd := &cobra.Command{
		Use:   "vet [packages]",
		Short: "Find the resources worth instrumenting with moirai",
		Long: `moirai vet loads the packages (./... by default) and runs moirai's analyzers:
shared locks held across slow work on request paths (sharedlock), hand-made
wait loops (waitloop), counting semaphores and worker pools (semaphore),
caches (cache), and request loops and sleeps that ignore their context
(uncancellable). Each finding names the resource, why it was flagged and the
moirai primitive to use; see docs/VET.md.

It rewrites nothing unless --fix is given, which applies the suggested
fixes (only mechanical ones are offered). A package that does not
type-check is reported and skipped. The same analyzers run as a vet tool:
go vet -vettool=$(which moirai-vet) ./...

Exit status: 0 nothing found, 3 findings reported, 1 an error.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"./..."}
			}
			rep, err := vet.Run(cmd.Context(), args, opt)
			if err != nil {
				return err
			}
			if err := printVet(cmd.OutOrStdout(), cmd.ErrOrStderr(), g.Output, rep); err != nil {
				return err
			}
			if len(rep.Errors) > 0 {
				return fmt.Errorf("moirai vet: %d package error(s)", len(rep.Errors))
			}
			if len(rep.Findings) > 0 && !opt.Fix {
				return errFindings
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&opt.Fix, "fix", false, "apply the suggested fixes to the files")
	cmd.Flags().BoolVar(&opt.Tests, "tests", false, "also load test packages (test files are never reported on)")
	return cmd
}

// printVet writes the report: one line per finding (and its related
// positions) in a table, the whole report in JSON.
func printVet(out, errOut io.Writer, format string, rep *vet.Report) error {
	if format == outputJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	for _, e := range rep.Errors {
		fmt.Fprintf(errOut, "error: %s\n", e)
	}
	for _, f := range rep.Findings {
		fmt.Fprintf(out, "%s: %s: %s\n", f.Pos, f.Analyzer, f.Message)
		for _, r := range f.Related {
			fmt.Fprintf(out, "\t%s: %s\n", r.Pos, r.Message)
		}
	}
	for _, name := range rep.Fixed {
		fmt.Fprintf(errOut, "fixed %s\n", name)
	}
	fmt.Fprintf(errOut, "%d finding(s) in %d package(s)\n", len(rep.Findings), rep.Packages)
	return nil
}
