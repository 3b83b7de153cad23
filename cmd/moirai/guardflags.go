package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/moirai-go/moirai/guard"
)

// guardFlags are the flags of `moirai guard` and `moirai guard explain`.
type guardFlags struct {
	dsn            string
	interval, slo  time.Duration
	alertInterval  time.Duration
	dryRun, once   bool
	act            bool
	allDatabases   bool
	auditRawSQL    bool
	protectUsers   []string
	protectApps    []string
	protectQuery   string
	allowSuper     bool
	allowMaint     bool
	terminateIdle  bool
	minInterval    time.Duration
	maxPerMinute   int
	audit          string
	metricsAddr    string
	skipPrivileges bool
	config         string
	record         string
	auditPolls     bool
	lease          string
	shutdown       time.Duration

	fs *pflag.FlagSet // the flags' values, for a reload's comparison
}

func (f *guardFlags) register(cmd *cobra.Command, all bool) { f.registerOn(cmd.Flags(), all) }

func (f *guardFlags) registerOn(fl *pflag.FlagSet, all bool) {
	f.fs = fl
	fl.StringVar(&f.dsn, "dsn", "", "server to guard: postgres://user@host:5432/db or mysql://user:pass@tcp(host:3306)/ (or $MOIRAI_GUARD_DSN)")
	fl.DurationVar(&f.interval, "interval", 250*time.Millisecond, "time between polls of the server's views")
	fl.DurationVar(&f.alertInterval, "alert-interval", 0, "time between polls while a session waits for a lock (default the smaller of --interval and 100ms)")
	fl.DurationVar(&f.slo, "slo", time.Second, "lock wait (actual or expected), or loss of throughput, tolerated before the guard looks for the culprit")
	fl.StringSliceVar(&f.protectUsers, "protect-user", nil, "never act on sessions of this user (repeatable)")
	fl.StringSliceVar(&f.protectApps, "protect-app", nil, "never act on sessions of this application_name (repeatable)")
	fl.StringVar(&f.protectQuery, "protect-query", "", "never act on statements matching this regular expression")
	fl.BoolVar(&f.allowSuper, "allow-superuser", false, "allow acting on superusers' sessions")
	fl.BoolVar(&f.allowMaint, "allow-maintenance", false, "allow acting on the server's own sessions (autovacuum, replication, …)")
	fl.BoolVar(&f.terminateIdle, "terminate-idle", false, "end the connection of a culprit idle in transaction (a statement cancel cannot reach it)")
	fl.BoolVar(&f.allDatabases, "all-databases", false, "act in every database of the server (default: only in the DSN's database)")
	if !all {
		return
	}
	fl.BoolVar(&f.act, "act", false, "act: cancel (and with --terminate-idle terminate) the culprits; without it the guard runs as --dry-run")
	fl.BoolVar(&f.dryRun, "dry-run", false, "decide and log, never act (the default without --act)")
	fl.BoolVar(&f.auditRawSQL, "audit-raw-sql", false, "store each statement's text in the audit file (default: its fingerprint, literals removed)")
	fl.BoolVar(&f.once, "once", false, "poll twice (the policy needs two polls), act, print the decisions and exit")
	fl.DurationVar(&f.minInterval, "min-interval", time.Second, "minimum time between two actions")
	fl.IntVar(&f.maxPerMinute, "max-per-minute", 10, "most actions in any minute")
	fl.StringVar(&f.audit, "audit", "", "append every decision as a JSON line to this file")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address (e.g. 127.0.0.1:9187)")
	fl.BoolVar(&f.skipPrivileges, "skip-privilege-check", false, "start even if the role lacks privileges (dry runs with a read-only role)")
	fl.StringVar(&f.record, "record", "", "append every poll (what the guard saw) as a JSON line to this file, for `moirai guard replay`")
	fl.BoolVar(&f.auditPolls, "audit-polls", false, "write every poll to the --audit file too, among the decisions (for `moirai guard replay`)")
	fl.StringVar(&f.lease, "lease", "", "name of the lease replicas share: only the holder acts (default moirai-guard:<database>)")
	fl.DurationVar(&f.shutdown, "shutdown-timeout", 10*time.Second, "on SIGTERM, how long the poll in progress may take to finish before it is aborted")
}

func (f *guardFlags) options(errOut io.Writer) (guard.Options, error) {
	if f.interval < 10*time.Millisecond || f.interval > time.Minute {
		return guard.Options{}, usageErrorf("--interval %v: want 10ms to 1m", f.interval)
	}
	if f.alertInterval != 0 && (f.alertInterval < 10*time.Millisecond || f.alertInterval > f.interval) {
		return guard.Options{}, usageErrorf("--alert-interval %v: want 10ms to --interval (%v)", f.alertInterval, f.interval)
	}
	if f.slo <= 0 {
		return guard.Options{}, usageErrorf("--slo %v: want a positive duration", f.slo)
	}
	if f.maxPerMinute < 1 || f.minInterval < 0 {
		return guard.Options{}, usageErrorf("--max-per-minute %d --min-interval %v: want at least 1 and a non-negative interval", f.maxPerMinute, f.minInterval)
	}
	if f.act && f.dryRun {
		return guard.Options{}, usageErrorf("--act and --dry-run together: choose one")
	}
	o := guard.Options{Interval: f.interval, AlertInterval: f.alertInterval, SLO: f.slo, DryRun: !f.act, TerminateIdle: f.terminateIdle,
		AllDatabases: f.allDatabases, AuditRawSQL: f.auditRawSQL, Lease: f.lease, AuditPolls: f.auditPolls,
		MinInterval: f.minInterval, MaxPerMinute: f.maxPerMinute,
		Protect: guard.Protection{Users: f.protectUsers, Applications: f.protectApps, AllowSuperuser: f.allowSuper, AllowMaintenance: f.allowMaint},
		Logger:  slog.New(slog.NewTextHandler(errOut, nil))}
	if f.protectQuery != "" {
		re, err := regexp.Compile(f.protectQuery)
		if err != nil {
			return guard.Options{}, usageErrorf("--protect-query: %v", err)
		}
		o.Protect.Queries = re
	}
	return o, nil
}

// openGuard opens the source of --dsn and a guard on it with opt; the
// caller closes the source with the function it returns, once done.
func (f *guardFlags) openGuard(ctx context.Context, errOut io.Writer, opt guard.Options) (*guard.Guard, func(), error) {
	src, err := f.openSource(ctx, errOut)
	if err != nil {
		return nil, nil, escapedError(err)
	}
	gd, err := guard.New(src, opt)
	if err != nil {
		src.Close()
		return nil, nil, escapedError(err)
	}
	return gd, func() { src.Close() }, nil
}

// openSource opens and checks the source of --dsn.
func (f *guardFlags) openSource(ctx context.Context, errOut io.Writer) (guard.Source, error) {
	if f.dsn == "" {
		f.dsn = os.Getenv("MOIRAI_GUARD_DSN")
	}
	if f.dsn == "" {
		return nil, usageErrorf("--dsn is required (or $MOIRAI_GUARD_DSN)")
	}
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	src, err := guard.Open(octx, f.dsn)
	if err != nil {
		if strings.Contains(err.Error(), "DSN must start with") {
			return nil, usageError{err}
		}
		return nil, err
	}
	info, err := src.Check(octx)
	var pe *guard.PrivilegeError
	switch {
	case errors.As(err, &pe) && f.skipPrivileges:
		fmt.Fprintf(errOut, "moirai guard: warning: %s; going on (--skip-privilege-check)\n", guard.Escape(err.Error()))
	case err != nil:
		src.Close()
		return nil, err
	}
	fmt.Fprintf(errOut, "moirai guard: %s (%s)\n", guard.Escape(info.Version), guard.Escape(strings.Join(info.Features, "; ")))
	if info.Superuser {
		fmt.Fprintln(errOut, "moirai guard: warning: the guard's role is a superuser; it needs only the privileges docs/GUARD.md lists")
	}
	return src, nil
}
