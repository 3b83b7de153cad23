package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/guard"
)

func newGuardReplayCommand(g *globalFlags) *cobra.Command {
	f := &guardFlags{}
	var config string
	cmd := &cobra.Command{
		Use:   "replay FILE",
		Short: "Run the guard's decision logic on recorded polls and print what it would have done",
		Long: `replay reads the polls recorded in FILE (by --record FILE, or by --audit
FILE --audit-polls) and runs the guard's decision logic on them, as a dry
run on the recording's own clock, with the options given here (or in
--config): it prints what the guard would have done, so that a rule
(--slo, --protect-user, --protect-query, ...) can be tried on a saved
incident before it is deployed. It never connects to a server.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			nf, err := loadGuardFlags(cmd.Flags(), config)
			if err != nil {
				return usageError{err}
			}
			opt, err := nf.options(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			file, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer file.Close()
			rec, err := guard.ReadPolls(file)
			if err != nil {
				return err
			}
			opt.Logger = nil
			ds, err := guard.Replay(rec, opt)
			if err != nil {
				return escapedError(err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "moirai guard replay: %d polls of %s, scope %q: %d decisions\n",
				len(rec.Polls), guard.Escape(rec.Source), guard.Escape(rec.Scope), len(ds))
			return printDecisions(cmd.OutOrStdout(), g, ds)
		},
	}
	f.register(cmd, false)
	fl := cmd.Flags()
	fl.DurationVar(&f.minInterval, "min-interval", 0, "minimum time between two actions (default 1s)")
	fl.IntVar(&f.maxPerMinute, "max-per-minute", 0, "most actions in any minute (default 10)")
	fl.StringVar(&config, "config", "", "read the options from this YAML file, as `moirai guard --config` does")
	return cmd
}
