package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/moirai-go/moirai/guard"
	_ "github.com/moirai-go/moirai/guard/mysql"    // mysql:// and mariadb://
	_ "github.com/moirai-go/moirai/guard/postgres" // postgres:// and postgresql://
)

func newGuardCommand(g *globalFlags) *cobra.Command {
	f := &guardFlags{}
	cmd := &cobra.Command{
		Use:   "guard",
		Short: "Cancel the statement that monopolizes a contended lock in PostgreSQL or MariaDB",
		Long: `guard polls a database server's own views for who holds and who waits for
which lock, runs moirai's Atropos policy on what it sees, and cancels the
statement of the transaction whose cancellation frees the most of the
contended locks, through the server's own cancel command, verified against
the statement's start so that it can never hit another one.

It acts only with --act: without it, it runs as --dry-run, deciding and
logging only, and says so at start. It blames a wait on the root of its
chain in the server's wait-for graph, never on a session that waits itself;
when that root cannot be acted on it acts on nobody in the chain and says
why. It acts only in the DSN's database unless --all-databases is given,
never terminates a connection unless --terminate-idle is given (for a
culprit idle in transaction), never acts on superusers, the server's own
sessions or protected users, applications and statements, and acts at most
--max-per-minute times a minute, --min-interval apart. Every decision goes
to the log and, with --audit, to a JSON-lines file (statements as
fingerprints unless --audit-raw-sql). See docs/GUARD.md.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGuard(cmd, g, f.config)
		},
	}
	f.register(cmd, true)
	cmd.Flags().StringVar(&f.config, "config", "", "read the flags from this YAML file (keys: the flags' names); the command line overrides it; SIGHUP reloads it")
	cmd.AddCommand(newGuardExplainCommand(g), newGuardReplayCommand(g))
	return cmd
}

// modeOf says whether the guard acts.
func modeOf(o guard.Options) string {
	if o.DryRun {
		return "DRY RUN: deciding and logging only; --act to act"
	}
	return "acting (--act)"
}

// scopeOf says where the guard acts.
func scopeOf(gd *guard.Guard) string {
	if db := gd.Scope(); db != "" {
		return fmt.Sprintf("in database %q only (--all-databases widens it)", guard.Escape(db))
	}
	return "in every database"
}

// twoSteps polls twice, interval apart (the policy confirms a choice over
// two polls), and returns the decisions of both.
func twoSteps(ctx context.Context, gd *guard.Guard, interval time.Duration) ([]guard.Decision, error) {
	var ds []guard.Decision
	for i := range 2 {
		if i > 0 {
			select {
			case <-time.After(interval):
			case <-ctx.Done():
				return ds, context.Cause(ctx)
			}
		}
		d, err := gd.Step(ctx)
		if err != nil {
			return ds, err
		}
		ds = append(ds, d...)
	}
	return ds, nil
}

func printDecisions(out io.Writer, g *globalFlags, ds []guard.Decision) error {
	if g.Output == outputJSON {
		enc := json.NewEncoder(out)
		for _, d := range ds {
			if err := enc.Encode(d); err != nil {
				return err
			}
		}
		return nil
	}
	return guard.WriteDecisions(out, ds)
}

func newGuardExplainCommand(g *globalFlags) *cobra.Command {
	f := &guardFlags{}
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Print who waits for whom on the server and what the guard would do now",
		Long: `explain polls the server twice, --interval apart, and prints the wait-for
graph (every waiting session, the root holder it waits for, soft waits
queued behind another waiter marked), the contention of each lock, and the
statement the guard would cancel now, with why. It never acts.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.maxPerMinute, f.minInterval = 10, time.Second // never acts: the limits do not matter
			opt, err := f.options(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			opt.DryRun = true
			opt.Logger = slog.New(slog.DiscardHandler)
			f.skipPrivileges = true // explaining needs no right to signal
			gd, closeSrc, err := f.openGuard(cmd.Context(), cmd.ErrOrStderr(), opt)
			if err != nil {
				return err
			}
			defer closeSrc()
			if _, err := twoSteps(cmd.Context(), gd, f.interval); err != nil {
				return escapedError(err)
			}
			x := gd.Explain()
			if g.Output == outputJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(x)
			}
			return x.WriteText(cmd.OutOrStdout())
		},
	}
	f.register(cmd, false)
	return cmd
}
