package dbsuite

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/moirai-go/moirai/bench"
	"github.com/moirai-go/moirai/guard"
	guardmysql "github.com/moirai-go/moirai/guard/mysql"
)

// SuiteMySQL is the MariaDB suite's name.
const SuiteMySQL = "mysql"

// DefaultMySQLDSN is the local MariaDB of the machine the suite runs on.
const DefaultMySQLDSN = "mysql://root@tcp(127.0.0.1:3306)/test"

// MySQLCase is one culprit of the MariaDB suite.
type MySQLCase struct {
	Name, Describe string
	run            func(ctx context.Context, r *myRun) error
}

// MySQLCases are the MariaDB cases of the catalogue (bench/CASES.md), the
// DDL queue among them (PostgreSQL's pg-ddl-queue on MariaDB's metadata
// locks).
func MySQLCases() []MySQLCase {
	return []MySQLCase{
		{"my-ftwrl", "a long UPDATE, then FLUSH TABLES WITH READ LOCK from a backup session: every later write queues behind the FTWRL", func(ctx context.Context, r *myRun) error {
			errc := make(chan error, 1)
			go func() {
				errc <- r.culprit(ctx, false, "UPDATE "+pgTable+" SET balance = balance WHERE id <= 10 AND SLEEP(600) = 0")
			}()
			select {
			case <-time.After(300 * time.Millisecond):
			case err := <-errc:
				return err
			}
			// The backup: take the global read lock, note the position,
			// release it.
			backup := r.culprit(ctx, false, "FLUSH TABLES WITH READ LOCK", "DO SLEEP(0.2)", "UNLOCK TABLES")
			return errors.Join(<-errc, backup)
		}},
		{"my-for-update", "a long transaction holding SELECT … FOR UPDATE row locks on the hot rows", func(ctx context.Context, r *myRun) error {
			return r.culprit(ctx, true, "SELECT id FROM "+pgTable+" WHERE id <= "+strconv.Itoa(hotRows)+" FOR UPDATE", "SELECT SLEEP(600)")
		}},
		{"my-ddl-queue", "a long read holds a shared metadata lock; an ALTER TABLE queues for the exclusive one; every later statement queues behind it", func(ctx context.Context, r *myRun) error {
			errc := make(chan error, 1)
			go func() {
				errc <- r.culprit(ctx, false, "SELECT balance, SLEEP(600) FROM "+pgTable+" WHERE id = 1")
			}()
			select {
			case <-time.After(300 * time.Millisecond):
			case err := <-errc:
				return err
			}
			alter := r.culprit(ctx, false, "ALTER TABLE "+pgTable+" ALTER COLUMN filler SET DEFAULT ''")
			return errors.Join(<-errc, alter)
		}},
		{"my-hot-row", "half the victims' updates hit one of " + strconv.Itoa(hotRowCount) + " hot rows; one transaction holds one of them: a queue of waiters on a row", func(ctx context.Context, r *myRun) error {
			return r.culprit(ctx, true, "UPDATE "+pgTable+" SET balance = balance WHERE id = 1", "SELECT SLEEP(600)")
		}},
		{"my-dump", "full-table dumps (SELECT * read to the end, as mysqldump does) of a table larger than the buffer pool", func(ctx context.Context, r *myRun) error {
			return r.culprits.repeat(ctx, r.dump)
		}},
	}
}

// MySQLControllers are the MariaDB suite's competitors.
func MySQLControllers() []Controller {
	return []Controller{
		{Name: "none", Describe: "no control"},
		{Name: "timeout", Describe: "max_statement_time, innodb_lock_wait_timeout and lock_wait_timeout for every session, as operators set them"},
		{Name: "ptkill", Describe: "the real pt-kill: --busy-time --victims oldest --kill-query --interval 1"},
		{Name: "guard", Describe: "moirai guard in-process with the guard/mysql source"},
	}
}

// myRun is one (case, controller) run of the MariaDB suite.
type myRun struct {
	opt     *Options
	db      *sql.DB // the culprit's sessions
	timeout bool    // the timeout controller: the culprit's sessions get the timeouts too

	culprits culpritLog // its connection ids and cancels
}

// session opens one of the culprit's sessions, with the timeouts under the
// timeout controller.
func (r *myRun) session(ctx context.Context) (*sql.Conn, error) {
	c, err := r.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	var id int64
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		c.Close()
		return nil, err
	}
	r.culprits.session(id)
	if r.timeout {
		if _, err := c.ExecContext(ctx, r.opt.mysqlTimeouts()); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// culprit runs stmts on a session of its own, in one transaction when tx.
// A statement that ends in an error (a cancel) ends the run of stmts; the
// transaction is rolled back, as the application would.
func (r *myRun) culprit(ctx context.Context, tx bool, stmts ...string) error {
	c, err := r.session(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil // the run ended first
		}
		return err
	}
	// The session is discarded, not returned to the pool: the run kills
	// it at its end.
	defer func() { c.Raw(func(any) error { return driverBad }); c.Close() }()
	if tx {
		if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
			return r.ended(ctx, err)
		}
	}
	for _, q := range stmts {
		if _, err := c.ExecContext(ctx, q); err != nil {
			if tx {
				rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				c.ExecContext(rctx, "ROLLBACK")
				cancel()
			}
			return r.ended(ctx, err)
		}
	}
	if tx {
		_, err = c.ExecContext(ctx, "COMMIT")
		return r.ended(ctx, err)
	}
	return nil
}

// driverBad makes database/sql discard a connection instead of pooling it.
var driverBad = driver.ErrBadConn

// dump reads the whole table on a session of its own.
func (r *myRun) dump(ctx context.Context) error {
	c, err := r.session(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer func() { c.Raw(func(any) error { return driverBad }); c.Close() }()
	rows, err := c.QueryContext(ctx, "SELECT /*!40001 SQL_NO_CACHE */ * FROM "+pgTable)
	if err != nil {
		return r.ended(ctx, err)
	}
	var id, bal int64
	var filler sql.NullString
	for rows.Next() {
		if err := rows.Scan(&id, &bal, &filler); err != nil {
			// The run's end or a kill closes the rows under Scan.
			rows.Close()
			return r.ended(ctx, err)
		}
	}
	err = rows.Err()
	rows.Close()
	return r.ended(ctx, err)
}

// ended classifies the error that ended a culprit's statement: a cancel
// (by a controller) is counted and is no error of the run.
func (r *myRun) ended(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return nil // done, or the run's end (which kills the sessions)
	}
	if IsMySQLCancel(err) {
		r.culprits.cancelled()
		return nil
	}
	return err
}

// IsMySQLCancel reports whether err ended a statement by a cancel or a
// timeout: KILL QUERY (1317), KILL CONNECTION (1927, or the connection
// gone), max_statement_time (1969), a lock wait timeout (1205).
func IsMySQLCancel(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1317, 1927, 1969, 1205:
			return true
		}
		return false
	}
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, sql.ErrConnDone)
}

func (o *Options) mysqlTimeouts() string {
	return fmt.Sprintf("SET SESSION max_statement_time = %g, innodb_lock_wait_timeout = %d, lock_wait_timeout = %d",
		o.StatementTimeout.Seconds(), max(1, int(o.LockTimeout.Seconds())), max(1, int(o.LockTimeout.Seconds())))
}

// victimLua is sysbench's script of the victims: an UPDATE and a SELECT of
// one of the hot rows, each in its own autocommit transaction. init runs
// once per connection.
func victimLua(init string, hot bool) string {
	s := `-- moirai dbsuite: the victims (generated)
function thread_init()
  drv = sysbench.sql.driver()
  con = drv:connect()
`
	if init != "" {
		s += "  con:query(\"" + init + "\")\n"
	}
	return s + `end
function thread_done()
  con:disconnect()
end
function event()
  local id = sysbench.rand.uniform(1, ` + strconv.Itoa(hotRows) + `)
` + hotLua(hot) + `  con:query("UPDATE ` + pgTable + ` SET balance = balance + 1 WHERE id = " .. id)
  con:query("SELECT balance FROM ` + pgTable + ` WHERE id = " .. id)
end
`
}

// hotLua sends half the victims' transactions to one of the first
// hotRowCount rows (when hot).
func hotLua(hot bool) string {
	if !hot {
		return ""
	}
	return "  if sysbench.rand.uniform(0, 1) == 0 then id = sysbench.rand.uniform(1, " + strconv.Itoa(hotRowCount) + ") end\n"
}

// ExecuteMySQL runs the MariaDB suite: for every case, a normal run (no
// culprit, no control) and one run per controller, with sysbench as the
// victims, and returns their rows normalized by the normal run.
func ExecuteMySQL(ctx context.Context, opt Options) (*bench.Results, error) {
	if opt.DSN == "" {
		opt.DSN = DefaultMySQLDSN
	}
	if opt.GuardInterval <= 0 {
		opt.GuardInterval = 250 * time.Millisecond
	}
	opt.defaults()
	cases, err := selectByName(MySQLCases(), opt.Cases, func(c MySQLCase) string { return c.Name })
	if err != nil {
		return nil, err
	}
	ctls, err := SelectControllers(MySQLControllers(), opt.Controllers)
	if err != nil {
		return nil, err
	}
	for _, tool := range []string{opt.Sysbench, opt.PtKill} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("dbsuite: %s not found (scripts/install-db-tools.sh): %w", tool, err)
		}
	}
	cfg, err := guardmysql.ParseDSN(opt.DSN)
	if err != nil {
		return nil, err
	}
	if cfg.DBName == "" {
		return nil, fmt.Errorf("dbsuite: the DSN %q names no database", opt.DSN)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	if err := setupMy(ctx, db, opt.Rows); err != nil {
		return nil, err
	}
	defer teardownMy(db)
	var bp int64
	db.QueryRowContext(ctx, "SELECT @@innodb_buffer_pool_size").Scan(&bp)
	dir, err := os.MkdirTemp("", "moirai-dbsuite-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	params := map[string]string{
		"load":               fmt.Sprintf("sysbench, %d threads, %s; an UPDATE and a SELECT of one of %d hot rows", opt.Clients, opt.loop("sysbench --rate"), hotRows),
		"table":              fmt.Sprintf("%d rows; buffer pool %d MiB", opt.Rows, bp>>20),
		"warm-up":            opt.Warmup.String() + "; the culprit starts after it (sysbench --report-checkpoints resets its statistics there)",
		"timeout":            fmt.Sprintf("max_statement_time %v, innodb_lock_wait_timeout and lock_wait_timeout %v", opt.StatementTimeout, opt.LockTimeout),
		"ptkill":             fmt.Sprintf("pt-kill --busy-time %d --victims oldest --kill-query --interval 1 --match-command Query --match-db %s", ptkillBusy(opt.BusyTime), cfg.DBName),
		"guard":              fmt.Sprintf("interval %v (while a session waits: %v, and 110 ms after the last poll's end, when MariaDB refreshes its InnoDB views), SLO %v", opt.GuardInterval, min(opt.GuardInterval, 100*time.Millisecond), opt.GuardSLO),
		"victims' objective": opt.SLO.String(),
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
	return opt.execute(SuiteMySQL, params, names, ctls, func(i int, ctl *Controller) (*measure, error) {
		if ctl == nil {
			return runMy(ctx, &opt, dir, db, nil, Controller{Name: "none"}, hotRowCases[cases[i].Name])
		}
		return runMy(ctx, &opt, dir, db, &cases[i], *ctl, hotRowCases[cases[i].Name])
	}, nil)
}

func setupMy(ctx context.Context, db *sql.DB, rows int) error {
	for _, q := range []string{
		"DROP TABLE IF EXISTS " + pgTable,
		"CREATE TABLE " + pgTable + " (id INT PRIMARY KEY, balance BIGINT NOT NULL, filler VARCHAR(255)) ENGINE=InnoDB",
		// seq_1_to_N is MariaDB's Sequence engine.
		fmt.Sprintf("INSERT INTO %s SELECT seq, 0, REPEAT('x', 200) FROM seq_1_to_%d", pgTable, rows),
		"ANALYZE TABLE " + pgTable,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("dbsuite: setting up %s on MariaDB: %w", pgTable, err)
		}
	}
	return nil
}

func teardownMy(db *sql.DB) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db.ExecContext(ctx, "DROP TABLE IF EXISTS "+pgTable)
}

func ptkillBusy(d time.Duration) int { return max(1, int(math.Round(d.Seconds()))) }

// mysqlArgs are a client's connection options for cfg, with the given
// option prefix ("--mysql-" for sysbench, "--" for pt-kill).
func mysqlArgs(cfg *mysql.Config, prefix string) []string {
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		host, port = cfg.Addr, "3306"
	}
	args := []string{prefix + "host=" + host, prefix + "port=" + port, prefix + "user=" + cfg.User}
	if cfg.Passwd != "" {
		args = append(args, prefix+"password="+cfg.Passwd)
	}
	return args
}

// runMy runs sysbench for Duration, the culprit (if any) after Warmup, and
// the controller; at Duration the culprit's sessions are killed so that no
// victim stays blocked past the run. hot: the victims of a hot-row case
// (its normal run's too; see hotRowCases).
func runMy(ctx context.Context, opt *Options, dir string, db *sql.DB, c *MySQLCase, ctl Controller, hot bool) (*measure, error) {
	cfg, err := guardmysql.ParseDSN(opt.DSN)
	if err != nil {
		return nil, err
	}
	opt = ctl.apply(opt)
	r := &myRun{opt: opt, db: db, timeout: ctl.Base() == "timeout"}
	init := ""
	if r.timeout {
		init = opt.mysqlTimeouts()
	}
	script := filepath.Join(dir, fmt.Sprintf("victim-%d.lua", time.Now().UnixNano()))
	if err := os.WriteFile(script, []byte(victimLua(init, hot)), 0o644); err != nil {
		return nil, err
	}
	secs := int(math.Ceil(opt.Duration.Seconds()))
	warm := max(1, int(math.Round(opt.Warmup.Seconds())))
	args := append([]string{script, "--db-driver=mysql", "--mysql-db=" + cfg.DBName,
		"--threads=" + strconv.Itoa(opt.Clients), "--time=" + strconv.Itoa(secs), "--events=0",
		"--report-checkpoints=" + strconv.Itoa(warm), "--histogram=on", "--percentile=99",
		"--mysql-ignore-errors=all"}, mysqlArgs(cfg, "--mysql-")...)
	if opt.Rate > 0 {
		args = append(args, "--rate="+strconv.Itoa(max(1, int(opt.Rate))))
	}
	args = append(args, "run")
	cmd := exec.CommandContext(ctx, opt.Sysbench, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	waitc := make(chan error, 1)
	go func() { waitc <- cmd.Wait() }()

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var culprit func(context.Context) error
	if c != nil && !opt.NoCulprit {
		culprit = func(ctx context.Context) error { return c.run(ctx, r) }
	}
	b := startBeside(runCtx, time.Duration(warm)*time.Second, culprit, func() (func() (int, int, error), error) {
		switch ctl.Base() {
		case "guard":
			return startMyGuard(runCtx, opt, c.Name, r)
		case "ptkill":
			return startPtKill(runCtx, opt, cfg, r), nil
		}
		return nil, nil
	})
	select {
	case <-time.After(time.Until(start.Add(time.Duration(secs) * time.Second))):
	case <-ctx.Done():
	}
	stop()
	killSessions(db, r.culprits.sessions())
	b.wg.Wait()
	b.stopController()
	var werr error
	select {
	case werr = <-waitc:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-waitc
		return nil, fmt.Errorf("sysbench did not end 30s after its time: %s", lastLines(stderr.String(), 5))
	}
	if werr != nil {
		return nil, fmt.Errorf("sysbench: %v: %s", werr, lastLines(stderr.String()+stdout.String(), 5))
	}
	sb, err := ParseSysbench(stdout.String())
	if err != nil {
		return nil, err
	}
	m := sb.measure(time.Duration(secs-warm) * time.Second)
	b.account(m, ctl.Base(), r.culprits.count(), sb.Ignored)
	return m, nil
}

// killSessions ends the culprit's sessions at the run's end (a query
// cancelled by its context goes on in the server until it is killed).
func killSessions(db *sql.DB, ids []int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, id := range ids {
		db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10))
	}
}

// Sysbench is what sysbench's final report says: the statistics since its
// last checkpoint.
type Sysbench struct {
	Transactions int
	PerSec       float64
	Ignored      int // ignored errors: the failed statements (their events were retried)
	AvgMs, P99Ms float64
	// Histogram is the latency histogram (--histogram): bucket values in
	// ms with their counts.
	Histogram []Bucket
}

// Bucket is one row of sysbench's latency histogram.
type Bucket struct {
	Ms    float64
	Count int
}

var (
	sbTransactions = regexp.MustCompile(`^\s*transactions:\s+(\d+)\s+\(([0-9.]+) per sec\.\)`)
	sbIgnored      = regexp.MustCompile(`^\s*ignored errors:\s+(\d+)\s`)
	sbAvg          = regexp.MustCompile(`^\s*avg:\s+([0-9.]+)\s*$`)
	sbP99          = regexp.MustCompile(`^\s*99th percentile:\s+([0-9.]+)\s*$`)
	sbBucket       = regexp.MustCompile(`^\s*([0-9.]+)\s+\|[*\s]*\s(\d+)\s*$`)
)

// ParseSysbench reads sysbench's output (a run with --histogram and
// --percentile=99): the last report's transactions, ignored errors,
// average and 99th percentile latency, and the last histogram. It fails
// when the output has no final report.
func ParseSysbench(out string) (*Sysbench, error) {
	s := &Sysbench{}
	found := false
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "Latency histogram") {
			s.Histogram = s.Histogram[:0]
			continue
		}
		if m := sbTransactions.FindStringSubmatch(line); m != nil {
			n, err1 := strconv.Atoi(m[1])
			r, err2 := strconv.ParseFloat(m[2], 64)
			if err1 != nil || err2 != nil || math.IsInf(r, 0) {
				return nil, fmt.Errorf("dbsuite: sysbench: bad line %q", line)
			}
			s.Transactions, s.PerSec, found = n, r, true
		} else if m := sbIgnored.FindStringSubmatch(line); m != nil {
			s.Ignored, _ = strconv.Atoi(m[1])
		} else if m := sbAvg.FindStringSubmatch(line); m != nil {
			s.AvgMs, _ = strconv.ParseFloat(m[1], 64)
		} else if m := sbP99.FindStringSubmatch(line); m != nil {
			s.P99Ms, _ = strconv.ParseFloat(m[1], 64)
		} else if m := sbBucket.FindStringSubmatch(line); m != nil {
			v, err1 := strconv.ParseFloat(m[1], 64)
			n, err2 := strconv.Atoi(m[2])
			if err1 == nil && err2 == nil && n >= 0 && !math.IsInf(v, 0) && n < 1<<31 {
				s.Histogram = append(s.Histogram, Bucket{v, n})
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("dbsuite: sysbench output: %w", err)
	}
	if !found {
		return nil, fmt.Errorf("dbsuite: sysbench printed no report: %s", lastLines(out, 5))
	}
	return s, nil
}

// maxExpanded bounds the latencies a histogram expands to.
const maxExpanded = 5_000_000

// measure turns the report into a run's measure over window: throughput
// from the transactions, latencies from the histogram (each bucket's value
// repeated by its count; sysbench's own percentile comes from the same
// buckets).
func (s *Sysbench) measure(window time.Duration) *measure {
	m := &measure{window: window, completed: s.Transactions, failed: s.Ignored}
	for _, b := range s.Histogram {
		for range min(b.Count, maxExpanded-len(m.lat)) {
			m.lat = append(m.lat, b.Ms)
		}
	}
	return m
}

// startMyGuard runs the guard in-process on the MariaDB source, after its
// start-up check (which finds the metadata lock view); the returned
// function stops it and counts its acted cancels on the culprit's and on
// other sessions.
func startMyGuard(ctx context.Context, opt *Options, run string, r *myRun) (func() (int, int, error), error) {
	none := func() (int, int, error) { return 0, 0, nil }
	src, err := guardmysql.Open(ctx, opt.DSN)
	if err != nil {
		return none, err
	}
	if _, err := src.Check(ctx); err != nil {
		src.Close()
		return none, err
	}
	return runGuard(ctx, opt, SuiteMySQL+"/"+run, src, func(d guard.Decision) bool { return r.culprits.has(d.Target.Session) })
}

// startPtKill runs the real pt-kill for the run and, when stopped, counts
// the statements it killed (from its --print lines) on the culprit's and
// on other sessions.
func startPtKill(ctx context.Context, opt *Options, cfg *mysql.Config, r *myRun) func() (int, int, error) {
	args := append(mysqlArgs(cfg, "--"), "--busy-time", strconv.Itoa(ptkillBusy(opt.BusyTime)),
		"--victims", "oldest", "--kill-query", "--interval", "1", "--print", "--match-command", "Query",
		"--match-db", cfg.DBName) // the suite's database only: the server may be shared
	cmd := exec.CommandContext(ctx, opt.PtKill, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return func() (int, int, error) { return 0, 0, fmt.Errorf("pt-kill: %w", err) }
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return func() (int, int, error) {
		err := <-done
		if ctx.Err() != nil {
			err = nil // killed at the run's end, as planned
		} else if err != nil {
			err = fmt.Errorf("pt-kill: %v: %s", err, lastLines(stderr.String(), 3))
		}
		culprits, victims := 0, 0
		for _, id := range ParsePtKill(stdout.String()) {
			if r.culprits.has(id) {
				culprits++
			} else {
				victims++
			}
		}
		return culprits, victims, err
	}
}

var ptKillLine = regexp.MustCompile(`^# \S+ KILL (?:QUERY )?(\d+) \(`)

// ParsePtKill returns the connection ids of the statements pt-kill's
// --print output says it killed ("# <time> KILL QUERY <id> (<command>
// <seconds> sec) <statement>"); other lines are ignored.
func ParsePtKill(out string) []int64 {
	var ids []int64
	for line := range strings.Lines(out) {
		m := ptKillLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if id, err := strconv.ParseInt(m[1], 10, 64); err == nil && id > 0 {
			ids = append(ids, id)
		}
	}
	return ids
}
