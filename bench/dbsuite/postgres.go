package dbsuite

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/moirai-go/moirai/bench"
	"github.com/moirai-go/moirai/guard"
	"github.com/moirai-go/moirai/guard/postgres"
)

// SuitePostgres is the suite's name.
const SuitePostgres = "postgres"

// The table the suite creates (and drops): prefixed by the package.
const pgTable = "dbsuite_accounts"

// CulpritApp is the application_name of the culprit's sessions; the
// victims are pgbench's ("pgbench").
const CulpritApp = "dbsuite-culprit"

// Case is one culprit of the suite.
type Case struct {
	Name, Describe string
	// run starts the culprit's statements on its own sessions and returns
	// when they end (cancelled, failed or at ctx's end).
	run func(ctx context.Context, r *pgRun) error
}

// Controller is one competitor. The timeout and ptkill controllers take a
// setting (see SelectControllers): their values then override the
// Options' for their runs.
type Controller struct {
	Name, Describe string
	// StatementTimeout, LockTimeout (timeout) and BusyTime (ptkill): zero
	// takes the Options' value.
	StatementTimeout, LockTimeout, BusyTime time.Duration
}

// PostgresCases are the PostgreSQL cases of the catalogue (bench/CASES.md).
func PostgresCases() []Case {
	return []Case{
		{"pg-lock-table", "BEGIN; LOCK TABLE IN EXCLUSIVE MODE; a long statement; COMMIT", func(ctx context.Context, r *pgRun) error {
			return r.culpritTx(ctx, "LOCK TABLE "+pgTable+" IN EXCLUSIVE MODE", "UPDATE "+pgTable+" SET balance = balance WHERE id <= 10 AND pg_sleep(600) IS NOT NULL")
		}},
		{"pg-for-update", "a long transaction that ran SELECT … FOR UPDATE over the hot rows", func(ctx context.Context, r *pgRun) error {
			// pg_sleep in the target list of the aggregate runs after every
			// row is locked.
			return r.culpritTx(ctx, "", "SELECT count(*), pg_sleep(600) FROM (SELECT id FROM "+pgTable+" WHERE id <= "+strconv.Itoa(hotRows)+" FOR UPDATE) s")
		}},
		{"pg-ddl-queue", "a long read holds AccessShare; an ALTER TABLE queues for AccessExclusive; every later query queues behind it", func(ctx context.Context, r *pgRun) error {
			errc := make(chan error, 1)
			go func() { errc <- r.culpritTx(ctx, "", "SELECT count(*) FROM "+pgTable+", pg_sleep(600) WHERE id = 1") }()
			// The ALTER comes once the read runs.
			select {
			case <-time.After(300 * time.Millisecond):
			case err := <-errc:
				return err
			}
			alterErr := r.culpritTx(ctx, "", "ALTER TABLE "+pgTable+" ALTER COLUMN filler SET DEFAULT ''")
			return errors.Join(<-errc, alterErr)
		}},
		{"pg-vacuum-full", "VACUUM FULL on the hot table", func(ctx context.Context, r *pgRun) error {
			return r.culprits.repeat(ctx, func(ctx context.Context) error { return r.culpritTx(ctx, "", "VACUUM FULL "+pgTable) })
		}},
		{"pg-hot-row", "half the victims' updates hit one of " + strconv.Itoa(hotRowCount) + " hot rows; one transaction holds one of them: a queue of waiters on a row", func(ctx context.Context, r *pgRun) error {
			return r.culpritTx(ctx, "UPDATE "+pgTable+" SET balance = balance WHERE id = 1", "SELECT pg_sleep(600)")
		}},
	}
}

// PostgresControllers are the competitors.
func PostgresControllers() []Controller {
	return []Controller{
		{Name: "none", Describe: "no control"},
		{Name: "timeout", Describe: "statement_timeout and lock_timeout for every session, as operators set them"},
		{Name: "ptkill", Describe: "pt-kill's rule as a SQL loop: every second, cancel the oldest statement busy longer than --busy-time"},
		{Name: "guard", Describe: "moirai guard in-process with the guard/postgres source"},
	}
}

// Options configure a run of the suite.
type Options struct {
	DSN         string   // the server (postgres: a postgres:// URL or key=value DSN; mysql: mysql://user@tcp(host:port)/db)
	Cases       []string // case names; empty: all
	Controllers []string // controller names; empty: all
	Duration    time.Duration
	Warmup      time.Duration // the culprit starts after it; not measured
	Clients     int           // pgbench clients, sysbench threads
	Rate        float64       // transactions/s (pgbench -R, sysbench --rate); 0: closed loop
	// Rounds runs every case's normal run and controllers this many times
	// over, interleaved, and pools each controller's rounds into one row
	// (default 1): a single run's throughput varies by a few percent from
	// one run to the next.
	Rounds int
	// NoCulprit runs every controller without the culprit: what the
	// controller costs when nothing goes wrong, and whether it cancels
	// anything then (every cancel counts as a victim's).
	NoCulprit bool
	Rows      int           // the table's rows
	Pgbench   string        // path of pgbench
	Sysbench  string        // path of sysbench (suite mysql)
	PtKill    string        // path of pt-kill (suite mysql)
	SLO       time.Duration // a victim transaction's latency objective
	// Timeout controller: statement_timeout and lock_timeout (mysql:
	// max_statement_time, and innodb_lock_wait_timeout and
	// lock_wait_timeout in whole seconds).
	StatementTimeout, LockTimeout time.Duration
	// ptkill controller: --busy-time (pt-kill's, in whole seconds).
	BusyTime time.Duration
	// guard controller: its poll interval (default 100 ms on PostgreSQL,
	// whose views are current at any rate; 250 ms on MariaDB, which
	// refreshes its InnoDB lock views at most every 100 ms) and its
	// objective (default 200 ms: twice the victims' objective, SLO).
	// The guard cannot act before a culprit of unknown progress has held
	// for half its objective, so the objective bounds how soon it acts.
	GuardInterval, GuardSLO time.Duration
	Progress                func(done, total int, what string)
	Logger                  *slog.Logger
	// GuardAudit, when set, receives the guard's audit log (JSON lines,
	// one per decision, as moirai guard --audit writes them) of every run
	// under the guard controller; each run starts with a line naming it.
	GuardAudit io.Writer
}

const hotRows = 1000

func (o *Options) defaults() {
	if o.Duration <= 0 {
		o.Duration = 15 * time.Second
	}
	if o.Warmup <= 0 || o.Warmup >= o.Duration/2 {
		o.Warmup = min(3*time.Second, o.Duration/4)
	}
	if o.Clients <= 0 {
		o.Clients = 8
	}
	if o.Rows < hotRows {
		o.Rows = 1_500_000
	}
	if o.Pgbench == "" {
		o.Pgbench = "pgbench"
	}
	if o.Sysbench == "" {
		o.Sysbench = "sysbench"
	}
	if o.PtKill == "" {
		o.PtKill = "pt-kill"
	}
	if o.SLO <= 0 {
		o.SLO = 100 * time.Millisecond
	}
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = 5 * time.Second
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = 2 * time.Second
	}
	if o.BusyTime <= 0 {
		o.BusyTime = 5 * time.Second
	}
	if o.Progress == nil {
		o.Progress = func(int, int, string) {}
	}
	if o.GuardSLO <= 0 {
		o.GuardSLO = 2 * o.SLO
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// pgRun is one (case, controller) run.
type pgRun struct {
	opt     *Options
	timeout bool // the timeout controller: set the timeouts on the culprit's sessions

	culprits culpritLog // its pids, and its statements ended by a cancel (SQLSTATE 57014/55P03/57P01)
}

// culpritTx runs, on a session of its own, BEGIN; pre; stmt; COMMIT. A
// cancel of stmt rolls the transaction back.
func (r *pgRun) culpritTx(ctx context.Context, pre, stmt string) error {
	cfg, err := pgx.ParseConfig(r.opt.DSN)
	if err != nil {
		return err
	}
	cfg.RuntimeParams["application_name"] = CulpritApp
	if r.timeout {
		cfg.RuntimeParams["statement_timeout"] = strconv.FormatInt(r.opt.StatementTimeout.Milliseconds(), 10)
		cfg.RuntimeParams["lock_timeout"] = strconv.FormatInt(r.opt.LockTimeout.Milliseconds(), 10)
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil // the run ended first
		}
		return err
	}
	defer c.Close(context.Background())
	r.culprits.session(int64(c.PgConn().PID()))
	tx := !strings.HasPrefix(stmt, "VACUUM")
	if tx {
		if _, err := c.Exec(ctx, "BEGIN"); err != nil {
			return err
		}
	}
	if pre != "" {
		if _, err := c.Exec(ctx, pre); err != nil {
			return r.ended(err)
		}
	}
	if _, err := c.Exec(ctx, stmt); err != nil {
		return r.ended(err)
	}
	if tx {
		_, err = c.Exec(ctx, "COMMIT")
	}
	return err
}

// ended classifies the error that ended a culprit's statement: a cancel
// (by a controller) is counted and is no error of the run.
func (r *pgRun) ended(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil // the run's end
	}
	if code := sqlState(err); code == "57014" || code == "55P03" || code == "57P01" {
		r.culprits.cancelled()
		return nil
	}
	return err
}

func sqlState(err error) string {
	var e interface{ SQLState() string }
	if errors.As(err, &e) {
		return e.SQLState()
	}
	return ""
}

// Execute runs the suite: for every case, a normal run (no culprit, no
// control) and one run per controller, and returns their rows normalized by
// the normal run.
func Execute(ctx context.Context, opt Options) (*bench.Results, error) {
	if opt.GuardInterval <= 0 {
		opt.GuardInterval = 100 * time.Millisecond
	}
	opt.defaults()
	cases, err := selectByName(PostgresCases(), opt.Cases, func(c Case) string { return c.Name })
	if err != nil {
		return nil, err
	}
	ctls, err := SelectControllers(PostgresControllers(), opt.Controllers)
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath(opt.Pgbench); err != nil {
		return nil, fmt.Errorf("dbsuite: pgbench not found (scripts/install-db-tools.sh): %w", err)
	}
	if err := setupPG(ctx, opt.DSN, opt.Rows); err != nil {
		return nil, err
	}
	defer teardownPG(opt.DSN)
	dir, err := os.MkdirTemp("", "moirai-dbsuite-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "victim.sql")
	if err := os.WriteFile(script, []byte(victimScript), 0o644); err != nil {
		return nil, err
	}
	hotScript := filepath.Join(dir, "victim-hot.sql")
	if err := os.WriteFile(hotScript, []byte(hotVictimScript), 0o644); err != nil {
		return nil, err
	}
	scriptOf := func(c *Case) string {
		if hotRowCases[c.Name] {
			return hotScript
		}
		return script
	}

	params := map[string]string{
		"load":               fmt.Sprintf("pgbench, %d clients, %s; an UPDATE and a SELECT of one of %d hot rows", opt.Clients, opt.loop("pgbench -R"), hotRows),
		"table":              fmt.Sprintf("%d rows", opt.Rows),
		"warm-up":            opt.Warmup.String() + "; the culprit starts after it",
		"timeout":            fmt.Sprintf("statement_timeout %v, lock_timeout %v", opt.StatementTimeout, opt.LockTimeout),
		"ptkill":             fmt.Sprintf("pt-kill's rule as SQL: --busy-time %v --victims oldest --kill-query, in the suite's database", opt.BusyTime),
		"victims' objective": opt.SLO.String(),
		"guard":              fmt.Sprintf("interval %v (%v while a session waits), SLO %v", opt.GuardInterval, min(opt.GuardInterval, 100*time.Millisecond), opt.GuardSLO),
	}
	for _, c := range cases {
		if hotRowCases[c.Name] {
			params["load"] += fmt.Sprintf("; in %s, half the UPDATEs hit one of the first %d rows", c.Name, hotRowCount)
		}
	}
	names := make([]string, len(cases))
	for i, c := range cases {
		names[i] = c.Name
	}
	return opt.execute(SuitePostgres, params, names, ctls, func(i int, ctl *Controller) (*measure, error) {
		if ctl == nil {
			return runPG(ctx, &opt, dir, scriptOf(&cases[i]), nil, Controller{Name: "none"})
		}
		return runPG(ctx, &opt, dir, scriptOf(&cases[i]), &cases[i], *ctl)
	}, func() error { return vacuumPG(ctx, opt.DSN) })
}

// matrix runs, for every case, its normal run (no culprit, no control:
// run with a nil controller) and one run per controller, Rounds times
// over, interleaved, and appends the controllers' rows, normalized by the
// normal runs and by the uncontrolled ones, to res: each row pools a
// controller's rounds as one long run (transactions and latencies, and
// cancels, summed). after runs after each round of a case (nil:
// nothing).
func (o *Options) matrix(res *bench.Results, cases []string, ctls []Controller, run func(i int, ctl *Controller) (*measure, error), after func() error) error {
	rounds := max(1, o.Rounds)
	total, done := len(cases)*(len(ctls)+1)*rounds, 0
	for i, name := range cases {
		var normal measure
		pooled := make([]measure, len(ctls))
		for round := range rounds {
			at := name
			if rounds > 1 {
				at = fmt.Sprintf("%s (round %d/%d)", name, round+1, rounds)
			}
			o.Progress(done, total, at+"/normal")
			m, err := run(i, nil)
			done++
			if err != nil {
				return fmt.Errorf("%s normal run: %w", at, err)
			}
			normal.pool(m)
			for j, ctl := range ctls {
				o.Progress(done, total, at+"/"+ctl.Name)
				m, err := run(i, &ctl)
				done++
				if err != nil {
					return fmt.Errorf("%s/%s: %w", at, ctl.Name, err)
				}
				pooled[j].pool(m)
			}
			if after != nil {
				if err := after(); err != nil {
					return err
				}
			}
		}
		var unc *measure
		for j, ctl := range ctls {
			m := &pooled[j]
			if ctl.Name == "none" {
				unc = m
			}
			row := m.row(res.Suite, name, ctl.Name, &normal, unc)
			row.SLOAttainment = m.sloAttainment(o.SLO)
			if o.NoCulprit {
				row.NoCulprit, row.Degraded = true, nil
			}
			res.Rows = append(res.Rows, row)
		}
	}
	o.Progress(total, total, "done")
	return nil
}

// describeRounds records Rounds and NoCulprit in a results' parameters.
func (o *Options) describeRounds(params map[string]string) {
	if o.Rounds > 1 {
		params["rounds"] = fmt.Sprintf("%d, interleaved; each row pools its rounds (transactions, latencies and cancels summed)", o.Rounds)
	}
	if o.NoCulprit {
		params["no culprit"] = "every run without its culprit: what each controller costs when nothing goes wrong (any cancel is a victim's)"
	}
}

// pool adds the run n to m, as if the two were one run of both windows.
func (m *measure) pool(n *measure) {
	m.window += n.window
	m.completed += n.completed
	m.lat = append(m.lat, n.lat...)
	m.failed += n.failed
	m.victimCancels += n.victimCancels
	m.culpritCancels += n.culpritCancels
	m.cancels += n.cancels
	if n.err != "" {
		if m.err != "" {
			m.err += "; "
		}
		m.err += n.err
	}
}

const victimScript = `\set id random(1, ` + "1000" + `)
UPDATE ` + pgTable + ` SET balance = balance + 1 WHERE id = :id;
SELECT balance FROM ` + pgTable + ` WHERE id = :id;
`

// hotRowCount is how many rows of the hot-row cases take half the
// victims' updates.
const hotRowCount = 4

// hotRowCases are the cases whose victims (in every run of the case, its
// normal run included) send half their transactions to one of the first
// hotRowCount rows.
var hotRowCases = map[string]bool{"pg-hot-row": true, "my-hot-row": true}

// hotVictimScript is the victims' script of the hot-row case: half the
// transactions update one of the first hotRowCount rows.
var hotVictimScript = `\set id random(1, ` + "1000" + `)
\set coin random(0, 1)
\if :coin = 0
\set id random(1, ` + strconv.Itoa(hotRowCount) + `)
\endif
UPDATE ` + pgTable + ` SET balance = balance + 1 WHERE id = :id;
SELECT balance FROM ` + pgTable + ` WHERE id = :id;
`

func selectByName[T any](all []T, names []string, name func(T) string) ([]T, error) {
	if len(names) == 0 || (len(names) == 1 && (names[0] == "all" || names[0] == "")) {
		return all, nil
	}
	var out []T
	for _, n := range names {
		i := slices.IndexFunc(all, func(t T) bool { return name(t) == n })
		if i < 0 {
			var known []string
			for _, t := range all {
				known = append(known, name(t))
			}
			return nil, fmt.Errorf("dbsuite: unknown %q (known: %s)", n, strings.Join(known, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

func setupPG(ctx context.Context, dsn string, rows int) error {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("dbsuite: connecting to PostgreSQL: %w", err)
	}
	defer c.Close(context.Background())
	for _, q := range []string{
		"DROP TABLE IF EXISTS " + pgTable,
		"CREATE TABLE " + pgTable + " (id int PRIMARY KEY, balance bigint NOT NULL, filler text)",
		fmt.Sprintf("INSERT INTO %s SELECT g, 0, repeat('x', 200) FROM generate_series(1, %d) g", pgTable, rows),
		"VACUUM ANALYZE " + pgTable,
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			return fmt.Errorf("dbsuite: setting up %s: %w", pgTable, err)
		}
	}
	return nil
}

func vacuumPG(ctx context.Context, dsn string) error {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, "VACUUM "+pgTable)
	return err
}

func teardownPG(dsn string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := pgx.Connect(ctx, dsn); err == nil {
		c.Exec(ctx, "DROP TABLE IF EXISTS "+pgTable)
		c.Close(ctx)
	}
}

// measure is what one run measured.
type measure struct {
	window         time.Duration
	completed      int       // the victims' transactions that completed in the window
	lat            []float64 // ms of the victims' transactions that began in the window (and completed)
	failed         int       // the victims' transactions that failed, and the clients that aborted
	victimCancels  int
	culpritCancels int
	cancels        int
	err            string
}

func (m *measure) throughput() float64 { return float64(m.completed) / m.window.Seconds() }

func (m *measure) p99() float64 {
	if len(m.lat) == 0 {
		return math.Inf(1)
	}
	s := slices.Clone(m.lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(0.99*float64(len(s))))-1)]
}

func (m *measure) mean() float64 {
	if len(m.lat) == 0 {
		return 0
	}
	var t float64
	for _, v := range m.lat {
		t += v
	}
	return t / float64(len(m.lat))
}

func (m *measure) row(suite, cs, ctl string, normal, unc *measure) bench.Row {
	r := bench.Row{Suite: suite, Case: cs, Controller: ctl,
		Cancelled: m.cancels, CulpritsCancelled: m.culpritCancels, VictimsCancelled: m.victimCancels,
		VictimMeanNormalMs: normal.mean(), VictimMeanMs: m.mean(), Error: m.err}
	if unc != nil {
		r.VictimMeanUncontrolledMs = unc.mean()
		if d := unc.mean() - normal.mean(); d > 0 {
			v := (unc.mean() - m.mean()) / d
			r.InterferenceReduction = &v
		}
	}
	if t := normal.throughput(); t > 0 {
		r.ThroughputNorm = m.throughput() / t
	}
	if p := normal.p99(); p > 0 && !math.IsInf(p, 1) {
		r.P99Norm = m.p99() / p
	}
	if n := len(m.lat) + m.failed; n > 0 {
		r.DropRate = float64(m.failed) / float64(n)
	}
	if ctl == "none" && m.err == "" {
		// The case's sanity check, as the inproc suite's: does the
		// culprit degrade the service?
		d := r.ThroughputNorm <= 0.8 || r.P99Norm >= 2
		r.Degraded = &d
	}
	return r
}

// sloAttainment is the fraction of the victims' transactions (failed ones
// included) that completed within slo.
func (m *measure) sloAttainment(slo time.Duration) float64 {
	n := len(m.lat) + m.failed
	if n == 0 {
		return 0
	}
	within := 0
	for _, v := range m.lat {
		if v <= float64(slo)/float64(time.Millisecond) {
			within++
		}
	}
	return float64(within) / float64(n)
}

// runPG runs pgbench for Duration, the culprit (if any) after Warmup, and
// the controller.
func runPG(ctx context.Context, opt *Options, dir, script string, c *Case, ctl Controller) (*measure, error) {
	opt = ctl.apply(opt)
	r := &pgRun{opt: opt, timeout: ctl.Base() == "timeout"}
	prefix := filepath.Join(dir, fmt.Sprintf("log-%d", time.Now().UnixNano()))
	secs := int(math.Ceil(opt.Duration.Seconds()))
	args := []string{"-n", "-f", script, "-c", strconv.Itoa(opt.Clients), "-j", "1", "-T", strconv.Itoa(secs),
		"-l", "--log-prefix", prefix}
	if opt.Rate > 0 {
		args = append(args, "-R", strconv.FormatFloat(opt.Rate, 'f', -1, 64))
	}
	args = append(args, pgbenchConn(opt.DSN)...)
	cmd := exec.CommandContext(ctx, opt.Pgbench, args...)
	cmd.Env = append(os.Environ(), "PGAPPNAME=pgbench")
	if r.timeout {
		cmd.Env = append(cmd.Env, fmt.Sprintf("PGOPTIONS=-c statement_timeout=%d -c lock_timeout=%d",
			opt.StatementTimeout.Milliseconds(), opt.LockTimeout.Milliseconds()))
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.Stdout = io.Discard
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	runCtx, stop := context.WithDeadline(ctx, start.Add(opt.Duration+2*time.Second))
	defer stop()

	var culprit func(context.Context) error
	if c != nil && !opt.NoCulprit {
		culprit = func(ctx context.Context) error { return c.run(ctx, r) }
	}
	b := startBeside(runCtx, opt.Warmup, culprit, func() (func() (int, int, error), error) {
		switch ctl.Base() {
		case "guard":
			return startGuard(runCtx, opt, c.Name, r)
		case "ptkill":
			return startPtkill(runCtx, opt, r), nil
		}
		return nil, nil
	})
	werr := cmd.Wait()
	// pgbench ends early when every client aborted (timeout): the culprit
	// and the controller still get the whole run.
	select {
	case <-time.After(time.Until(start.Add(opt.Duration))):
	case <-ctx.Done():
	}
	stop()
	b.stopController()
	b.wg.Wait()
	if werr != nil {
		var ee *exec.ExitError
		// pgbench exits 2 when clients aborted (their errors are counted).
		if !errors.As(werr, &ee) || ee.ExitCode() != 2 {
			return nil, fmt.Errorf("pgbench: %v: %s", werr, lastLines(stderr.String(), 5))
		}
	}
	m, err := readPgbenchLogs(prefix, start.Add(opt.Warmup), start.Add(opt.Duration))
	if err != nil {
		return nil, err
	}
	m.window = opt.Duration - opt.Warmup
	aborted := strings.Count(stderr.String(), "aborted in command")
	m.failed += aborted
	b.account(m, ctl.Base(), r.culprits.count(), aborted)
	return m, nil
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(ls[max(0, len(ls)-n):], "\n")
}

// pgbenchConn turns a DSN into pgbench's connection arguments.
func pgbenchConn(dsn string) []string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return []string{dsn}
	}
	return []string{"-h", cfg.Host, "-p", strconv.Itoa(int(cfg.Port)), "-U", cfg.User, cfg.Database}
}

// readPgbenchLogs reads pgbench's per-transaction logs (-l): "client_id
// transaction_no time script_no time_epoch time_us [schedule_lag]", time in
// µs or "failed"/"skipped". Throughput counts the transactions that ended
// in [from, to); latency those that began in it, so a victim blocked past
// the window's end (released when the culprit ends) counts its whole wait.
func readPgbenchLogs(prefix string, from, to time.Time) (*measure, error) {
	files, err := filepath.Glob(prefix + ".*")
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("dbsuite: no pgbench log at %s.*", prefix)
	}
	m := &measure{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			lat, failed, at, ok := ParsePgbenchLine(sc.Text())
			if !ok {
				continue
			}
			began := at.Add(-time.Duration(lat * float64(time.Millisecond)))
			if failed {
				if !at.Before(from) && at.Before(to) {
					m.failed++
				}
				continue
			}
			if !at.Before(from) && at.Before(to) {
				m.completed++
			}
			if !began.Before(from) && began.Before(to) {
				m.lat = append(m.lat, lat)
			}
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ParsePgbenchLine parses one line of pgbench's transaction log: the
// latency in ms, whether the transaction failed or was skipped, and when it
// ended. ok is false for a malformed line.
func ParsePgbenchLine(line string) (latMs float64, failed bool, at time.Time, ok bool) {
	f := strings.Fields(line)
	if len(f) < 6 {
		return 0, false, time.Time{}, false
	}
	sec, err1 := strconv.ParseInt(f[4], 10, 64)
	usec, err2 := strconv.ParseInt(f[5], 10, 64)
	if err1 != nil || err2 != nil || sec < 0 || usec < 0 || usec >= 1e6 {
		return 0, false, time.Time{}, false
	}
	at = time.Unix(sec, usec*1000)
	switch f[2] {
	case "failed", "skipped":
		return 0, true, at, true
	}
	us, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || us < 0 {
		return 0, false, time.Time{}, false
	}
	return float64(us) / 1000, false, at, true
}

// startGuard runs the guard in-process; the returned function stops it and
// counts its acted cancels on the culprit's and on other sessions.
func startGuard(ctx context.Context, opt *Options, run string, r *pgRun) (func() (int, int, error), error) {
	src, err := postgres.Open(ctx, opt.DSN)
	if err != nil {
		return func() (int, int, error) { return 0, 0, nil }, err
	}
	return runGuard(ctx, opt, SuitePostgres+"/"+run, src, func(d guard.Decision) bool { return d.App == CulpritApp })
}

// runGuard runs a guard of src in-process, as the suites configure it;
// the returned function stops it, closes src, and counts its acted cancels
// on the culprit's sessions (isCulprit) and on others.
func runGuard(ctx context.Context, opt *Options, run string, src guard.Source, isCulprit func(guard.Decision) bool) (func() (int, int, error), error) {
	if opt.GuardAudit != nil {
		line, _ := json.Marshal(map[string]any{"time": time.Now(), "run": run, "no_culprit": opt.NoCulprit})
		opt.GuardAudit.Write(append(line, '\n'))
	}
	g, err := guard.New(src, guard.Options{Interval: opt.GuardInterval, SLO: opt.GuardSLO,
		Protect: guard.Protection{AllowSuperuser: true}, Logger: opt.Logger, Audit: opt.GuardAudit})
	if err != nil {
		src.Close()
		return func() (int, int, error) { return 0, 0, nil }, err
	}
	gctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- g.Run(gctx) }()
	return func() (int, int, error) {
		cancel()
		err := <-done
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			err = nil
		}
		src.Close()
		culprits, victims := 0, 0
		for _, d := range g.Decisions() {
			if d.Outcome != guard.OutcomeActed {
				continue
			}
			if isCulprit(d) {
				culprits++
			} else {
				victims++
			}
		}
		return culprits, victims, err
	}, nil
}

// startPtkill runs pt-kill's rule (--busy-time B --victims oldest
// --kill-query --interval 1) as a SQL loop: every second, the oldest client
// statement active longer than B is cancelled.
func startPtkill(ctx context.Context, opt *Options, r *pgRun) func() (int, int, error) {
	var culprits, victims int
	var loopErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := pgx.Connect(ctx, opt.DSN)
		if err != nil {
			loopErr = err
			return
		}
		defer c.Close(context.Background())
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			var app string
			var ok bool
			err := c.QueryRow(ctx, `SELECT application_name, pg_cancel_backend(pid) FROM pg_stat_activity
				WHERE state = 'active' AND backend_type = 'client backend' AND pid <> pg_backend_pid()
				AND datname = current_database() -- the suite's database only: the server may be shared
				AND clock_timestamp() - query_start > $1::interval
				ORDER BY query_start LIMIT 1`, fmt.Sprintf("%d milliseconds", opt.BusyTime.Milliseconds())).Scan(&app, &ok)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				if ctx.Err() == nil {
					loopErr = err
				}
				return
			case ok && app == CulpritApp:
				culprits++
			case ok:
				victims++
			}
		}
	}()
	return func() (int, int, error) { <-done; return culprits, victims, loopErr }
}
