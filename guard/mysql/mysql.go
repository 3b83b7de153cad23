// Package mysql is moirai guard's source for MariaDB 10.6 and later.
//
// Each poll reads, on one connection of the guard:
//
//   - information_schema.PROCESSLIST: the connection threads, their
//     statement (INFO), its QUERY_ID, TIME_MS, STATE and, for the
//     statements that report one, PROGRESS;
//   - INNODB_TRX: the open transactions, when they started and since when
//     they wait;
//   - INNODB_LOCK_WAITS joined with INNODB_LOCKS: which transaction waits
//     for a row or table lock held by which one (exact);
//   - information_schema.METADATA_LOCK_INFO, when the plugin of that name
//     is installed: the metadata locks held, by table;
//   - SHOW GLOBAL STATUS: commits and rollbacks, the buffer pool's pages and
//     misses.
//
// Waits are attributed to their root holders. InnoDB lock waits name their
// blocker. A FLUSH TABLES WITH READ LOCK that waits for the tables in use
// to be closed waits for every statement that was running when it began;
// the statements queued behind it ("Waiting for backup lock" in MariaDB
// 10.11) wait, softly, for the same ones, never for the FLUSH. Once the
// FLUSH holds the lock its thread runs other statements, and the waits
// behind it are reported with no holder (a backup is not a culprit). A statement waiting for
// a table's metadata lock is blamed on the threads holding a metadata lock
// on a table its statement names, and only when METADATA_LOCK_INFO shows
// them; without the plugin such waits are reported with no holder, so the
// guard never blames a session it cannot tie to the lock.
//
// Statements are cancelled with KILL QUERY ID, which targets the statement
// itself: a thread that moved on to another statement is not touched.
package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/moirai-go/moirai/guard"
	"github.com/moirai-go/moirai/resource"
)

// Source polls one MariaDB server.
type Source struct {
	db  *sql.DB
	mdl bool // METADATA_LOCK_INFO is available
}

var _ guard.Source = (*Source)(nil)

func init() {
	guard.Register("mysql", func(ctx context.Context, dsn string) (guard.Source, error) { return Open(ctx, dsn) })
	guard.Register("mariadb", func(ctx context.Context, dsn string) (guard.Source, error) { return Open(ctx, dsn) })
}

// Open connects to the server of dsn: mysql://user:pass@tcp(host:port)/db
// (or mariadb://…, or the driver's own DSN without a scheme).
func Open(ctx context.Context, dsn string) (*Source, error) {
	for _, p := range []string{"mysql://", "mariadb://"} {
		dsn = strings.TrimPrefix(dsn, p)
	}
	cfg, err := driver.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("guard/mysql: bad DSN: %v", redact(err, dsn))
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 5*time.Second, 5*time.Second, 5*time.Second
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["max_statement_time"] = "2" // seconds: bounds every statement of the guard
	connector, err := driver.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("guard/mysql: %w", err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(2)
	db.SetMaxIdleConns(2)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("guard/mysql: cannot reach %s: %w", cfg.Addr, err)
	}
	return &Source{db: db}, nil
}

// redact removes a DSN's password from an error message.
func redact(err error, dsn string) string {
	msg := err.Error()
	if at := strings.LastIndex(dsn, "@"); at > 0 {
		if c := strings.Index(dsn[:at], ":"); c >= 0 && c+1 < at {
			msg = strings.ReplaceAll(msg, dsn[c+1:at], "***")
		}
	}
	return msg
}

// Name returns "mysql".
func (s *Source) Name() string { return "mysql" }

// Close closes the connections.
func (s *Source) Close() error { return s.db.Close() }

// Check verifies that the server is MariaDB 10.6 or later and that the
// account has PROCESS and CONNECTION ADMIN (or SUPER), and finds whether
// METADATA_LOCK_INFO is there.
func (s *Source) Check(ctx context.Context) (guard.ServerInfo, error) {
	var version, user string
	if err := s.db.QueryRowContext(ctx, "SELECT VERSION(), CURRENT_USER()").Scan(&version, &user); err != nil {
		return guard.ServerInfo{}, fmt.Errorf("guard/mysql: reading the version: %w", err)
	}
	info := guard.ServerInfo{Version: version}
	if err := supported(version); err != nil {
		return info, err
	}
	rows, err := s.db.QueryContext(ctx, "SHOW GRANTS FOR CURRENT_USER()")
	if err != nil {
		return info, fmt.Errorf("guard/mysql: reading the account's grants: %w", err)
	}
	var grants []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			rows.Close()
			return info, err
		}
		grants = append(grants, g)
	}
	rows.Close()
	missing, super := missingPrivileges(grants)
	info.Superuser = super
	var n int
	err = s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PLUGINS
		WHERE PLUGIN_NAME = 'METADATA_LOCK_INFO' AND PLUGIN_STATUS = 'ACTIVE'`).Scan(&n)
	s.mdl = err == nil && n > 0
	if s.mdl {
		info.Features = append(info.Features, "metadata locks: METADATA_LOCK_INFO")
	} else {
		info.Features = append(info.Features, "metadata locks: unavailable (install the metadata_lock_info plugin); their waits are seen but blamed on nobody")
	}
	info.Features = append(info.Features, "row locks: INNODB_LOCK_WAITS", "global read lock: inferred from PROCESSLIST")
	if len(missing) > 0 {
		return info, &guard.PrivilegeError{User: user, Missing: missing,
			Hint: fmt.Sprintf("GRANT %s ON *.* TO %s", strings.Join(missing, ", "), user)}
	}
	return info, nil
}

var versionRE = regexp.MustCompile(`^(\d+)\.(\d+)`)

// supported reports whether a VERSION() string is a MariaDB the source
// knows.
func supported(v string) error {
	if !strings.Contains(strings.ToLower(v), "mariadb") {
		return fmt.Errorf("guard/mysql: server %q is not MariaDB: only MariaDB 10.6 or later is supported (MySQL's views differ)", v)
	}
	m := versionRE.FindStringSubmatch(v)
	if m == nil {
		return fmt.Errorf("guard/mysql: cannot read the version of %q", v)
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	if major < 10 || major == 10 && minor < 6 {
		return fmt.Errorf("guard/mysql: MariaDB %s.%s is not supported: 10.6 or later is", m[1], m[2])
	}
	return nil
}

// missingPrivileges reads SHOW GRANTS lines: it returns what of PROCESS
// and CONNECTION ADMIN the account lacks (SUPER or ALL PRIVILEGES give
// both), and whether it is all-powerful.
func missingPrivileges(grants []string) (missing []string, super bool) {
	var process, admin bool
	for _, g := range grants {
		u := strings.ToUpper(g)
		if !strings.Contains(u, " ON *.* ") {
			continue
		}
		head, _, _ := strings.Cut(u, " ON *.* ")
		if strings.Contains(head, "ALL PRIVILEGES") {
			return nil, true
		}
		if strings.Contains(head, "SUPER") {
			super = true
			process, admin = process || strings.Contains(head, "PROCESS"), true
		}
		if strings.Contains(head, "PROCESS") {
			process = true
		}
		if strings.Contains(head, "CONNECTION ADMIN") {
			admin = true
		}
	}
	if !process {
		missing = append(missing, "PROCESS")
	}
	if !admin {
		missing = append(missing, "CONNECTION ADMIN")
	}
	return missing, super
}

// The rows as scanned, with NULL-able columns as sql.Null*.
type threadRow struct {
	id                      sql.NullInt64
	user, host, db, command sql.NullString
	timeMS                  sql.NullFloat64
	state, info             sql.NullString
	stage, maxStage         sql.NullInt64
	progress                sql.NullFloat64
	queryID                 sql.NullInt64
}

type trxRow struct {
	id          sql.NullString
	thread      sql.NullInt64
	started     sql.NullTime
	state       sql.NullString
	waitStarted sql.NullTime
}

type waitRow struct {
	requesting, blocking sql.NullString
	table, mode          sql.NullString
}

type mdlRow struct {
	thread        sql.NullInt64
	mode, kind    sql.NullString
	schema, table sql.NullString
}

// Poll reads the views once.
func (s *Source) Poll(ctx context.Context) (*guard.Observation, error) {
	start := time.Now()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("guard/mysql: poll: %w", err)
	}
	defer conn.Close()
	var at time.Time
	var own int64
	if err := conn.QueryRowContext(ctx, "SELECT NOW(6), CONNECTION_ID()").Scan(&at, &own); err != nil {
		return nil, fmt.Errorf("guard/mysql: poll: %w", err)
	}
	var threads []threadRow
	if err := scanAll(ctx, conn, `SELECT ID, USER, HOST, DB, COMMAND, TIME_MS, STATE, INFO, STAGE, MAX_STAGE, PROGRESS, QUERY_ID
		FROM information_schema.PROCESSLIST`, func(r *sql.Rows) error {
		var t threadRow
		err := r.Scan(&t.id, &t.user, &t.host, &t.db, &t.command, &t.timeMS, &t.state, &t.info, &t.stage, &t.maxStage, &t.progress, &t.queryID)
		threads = append(threads, t)
		return err
	}); err != nil {
		return nil, err
	}
	var trxs []trxRow
	if err := scanAll(ctx, conn, `SELECT trx_id, trx_mysql_thread_id, trx_started, trx_state, trx_wait_started
		FROM information_schema.INNODB_TRX`, func(r *sql.Rows) error {
		var t trxRow
		err := r.Scan(&t.id, &t.thread, &t.started, &t.state, &t.waitStarted)
		trxs = append(trxs, t)
		return err
	}); err != nil {
		return nil, err
	}
	var waits []waitRow
	if err := scanAll(ctx, conn, `SELECT w.requesting_trx_id, w.blocking_trx_id, l.lock_table, l.lock_mode
		FROM information_schema.INNODB_LOCK_WAITS w
		LEFT JOIN information_schema.INNODB_LOCKS l ON l.lock_id = w.requested_lock_id`, func(r *sql.Rows) error {
		var w waitRow
		err := r.Scan(&w.requesting, &w.blocking, &w.table, &w.mode)
		waits = append(waits, w)
		return err
	}); err != nil {
		return nil, err
	}
	var mdls []mdlRow
	if s.mdl {
		if err := scanAll(ctx, conn, `SELECT THREAD_ID, LOCK_MODE, LOCK_TYPE, TABLE_SCHEMA, TABLE_NAME
			FROM information_schema.METADATA_LOCK_INFO`, func(r *sql.Rows) error {
			var m mdlRow
			err := r.Scan(&m.thread, &m.mode, &m.kind, &m.schema, &m.table)
			mdls = append(mdls, m)
			return err
		}); err != nil {
			return nil, err
		}
	}
	status := map[string]int64{}
	if err := scanAll(ctx, conn, `SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_commit', 'Com_rollback',
		'Innodb_buffer_pool_pages_total', 'Innodb_buffer_pool_pages_free', 'Innodb_buffer_pool_reads')`, func(r *sql.Rows) error {
		var k, v string
		if err := r.Scan(&k, &v); err != nil {
			return err
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			status[k] = n
		}
		return nil
	}); err != nil {
		return nil, err
	}
	// MariaDB keeps no per-statement server time without the Performance
	// Schema: the server's clock from the first statement to this one
	// bounds it (it also counts the round trips in between).
	var end time.Time
	if err := conn.QueryRowContext(ctx, "SELECT NOW(6)").Scan(&end); err != nil {
		return nil, fmt.Errorf("guard/mysql: poll: %w", err)
	}
	obs := build(at, own, threads, trxs, waits, mdls)
	obs.ServerTime = max(end.Sub(at), 0)
	obs.Committed, obs.RolledBack = status["Com_commit"], status["Com_rollback"]
	if total := status["Innodb_buffer_pool_pages_total"]; total > 0 {
		obs.Resources = append(obs.Resources, guard.Resource{Name: "buffer-pool", Kind: resource.KindMemory,
			Capacity: total, InUse: total - status["Innodb_buffer_pool_pages_free"], Misses: status["Innodb_buffer_pool_reads"]})
	}
	obs.Took = time.Since(start)
	return obs, nil
}

func scanAll(ctx context.Context, conn *sql.Conn, q string, row func(*sql.Rows) error) error {
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("guard/mysql: poll: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows); err != nil {
			return fmt.Errorf("guard/mysql: poll: %w", err)
		}
	}
	return rows.Err()
}

var (
	ftwrlRE = regexp.MustCompile(`(?i)^\s*flush\s+tables?\b.*\bwith\s+read\s+lock`)
	ddlRE   = regexp.MustCompile(`(?i)^\s*(alter|drop|truncate|rename|create\s+(unique\s+)?index|optimize|repair)\b`)
)

// kindOf classifies a thread: "client" for connections running or able
// to run statements, the server's word otherwise.
func kindOf(user, command string) string {
	switch {
	case user == "system user" || user == "event_scheduler":
		return "system user"
	case command == "Daemon":
		return "daemon"
	case command == "Binlog Dump" || command == "Binlog Dump GTID" || strings.HasPrefix(command, "Slave_"):
		return "replication"
	}
	return "client"
}

// build turns the rows into an observation. Rows without the values the
// guard needs are skipped and counted by view.
func build(at time.Time, own int64, threads []threadRow, trxs []trxRow, waits []waitRow, mdls []mdlRow) *guard.Observation {
	obs := &guard.Observation{At: at, Skipped: map[string]int{}}
	index := map[int64]int{}
	for i := range threads {
		t := &threads[i]
		if !t.id.Valid || t.id.Int64 <= 0 || !t.command.Valid {
			obs.Skipped["PROCESSLIST"]++
			continue
		}
		if _, dup := index[t.id.Int64]; dup {
			obs.Skipped["PROCESSLIST"]++
			continue
		}
		s := guard.Session{ID: t.id.Int64, Statement: t.queryID.Int64, User: t.user.String, ClientAddr: t.host.String,
			Database: t.db.String, State: t.command.String, Query: t.info.String, WaitEvent: t.state.String,
			Own: t.id.Int64 == own}
		s.Kind = kindOf(s.User, t.command.String)
		s.Superuser = s.User == "root"
		s.Active = (t.command.String == "Query" || t.command.String == "Execute") && t.info.Valid
		if s.Active {
			ms := t.timeMS.Float64
			if !t.timeMS.Valid || ms < 0 || ms > 1e12 {
				ms = 0
			}
			s.Age = time.Duration(ms * float64(time.Millisecond))
			s.QueryStart = at.Add(-s.Age)
			s.State = "active"
		}
		if t.progress.Valid && t.progress.Float64 > 0 && t.progress.Float64 <= 100 {
			s.Done, s.Total = int64(t.progress.Float64*10), 1000
		}
		s.Fingerprint = guard.Fingerprint(s.Query)
		index[s.ID] = len(obs.Sessions)
		obs.Sessions = append(obs.Sessions, s)
	}
	// Transactions: their start, and idle sessions holding one open.
	trxThread := map[string]int64{}
	waitSince := map[int64]time.Time{}
	for i := range trxs {
		x := &trxs[i]
		if !x.id.Valid || !x.thread.Valid {
			obs.Skipped["INNODB_TRX"]++
			continue
		}
		j, ok := index[x.thread.Int64]
		if !ok {
			obs.Skipped["INNODB_TRX"]++
			continue
		}
		trxThread[x.id.String] = x.thread.Int64
		s := &obs.Sessions[j]
		if x.started.Valid {
			s.XactStart = x.started.Time
		}
		if !s.Active && s.State == "Sleep" {
			s.IdleInTransaction, s.State = true, "idle in transaction"
		}
		if x.waitStarted.Valid {
			waitSince[x.thread.Int64] = x.waitStarted.Time
		}
	}
	resources := map[string]bool{}
	addRes := func(name string, kind resource.Kind) {
		if !resources[name] {
			resources[name] = true
			obs.Resources = append(obs.Resources, guard.Resource{Name: name, Kind: kind})
		}
	}
	type heldKey struct {
		session int64
		name    string
	}
	held := map[heldKey]bool{}
	hold := func(session int64, name string) {
		if k := (heldKey{session, name}); !held[k] {
			held[k] = true
			obs.Uses = append(obs.Uses, guard.Use{Session: session, Resource: name, Held: true})
		}
	}

	// InnoDB lock waits: exact, one row per (waiter, blocker).
	type waitKey struct {
		session int64
		name    string
	}
	rowWaits := map[waitKey]*guard.Use{}
	var rowOrder []waitKey
	for i := range waits {
		w := &waits[i]
		waiter, ok1 := trxThread[w.requesting.String]
		blocker, ok2 := trxThread[w.blocking.String]
		if !w.requesting.Valid || !w.blocking.Valid || !ok1 || !ok2 || waiter == blocker {
			obs.Skipped["INNODB_LOCK_WAITS"]++
			continue
		}
		name := "row:" + strings.ReplaceAll(strings.Trim(w.table.String, "`"), "`.`", ".")
		if !w.table.Valid || w.table.String == "" {
			name = "row:unknown"
		}
		addRes(name, resource.KindLock)
		hold(blocker, name)
		k := waitKey{waiter, name}
		u := rowWaits[k]
		if u == nil {
			u = &guard.Use{Session: waiter, Resource: name, Mode: w.mode.String, Waiting: true, Since: waitSince[waiter]}
			rowWaits[k] = u
			rowOrder = append(rowOrder, k)
		}
		u.BlockedBy = appendUnique(u.BlockedBy, blocker)
	}
	for _, k := range rowOrder {
		obs.Uses = append(obs.Uses, *rowWaits[k])
	}

	// The global read lock: FLUSH TABLES WITH READ LOCK.
	var flush *guard.Session
	for j := range obs.Sessions {
		s := &obs.Sessions[j]
		if ftwrlRE.MatchString(s.Query) && (s.Active || s.State == "active") {
			flush = s
			break
		}
	}
	// MariaDB 10.4+ implements FLUSH TABLES WITH READ LOCK with backup
	// locks: the FLUSH and the writes queued behind it wait "for backup
	// lock"; older states kept for the statements that still use them.
	grlWaiting := func(s *guard.Session) bool {
		switch s.WaitEvent {
		case "Waiting for backup lock", "Waiting for global read lock", "Waiting for commit lock":
			return true
		}
		return false
	}
	if flush != nil || anySession(obs.Sessions, grlWaiting) {
		const grl = "global-read-lock"
		var roots []int64
		soft := false
		if flush != nil && strings.HasPrefix(flush.WaitEvent, "Waiting for") {
			// The FLUSH waits for the statements running since before
			// it: they are the roots, and whoever queues behind the FLUSH
			// waits for them softly.
			for j := range obs.Sessions {
				s := &obs.Sessions[j]
				if s.ID != flush.ID && s.Active && !s.Own && s.Age > flush.Age && !grlWaiting(s) && s.Kind == "client" {
					roots = append(roots, s.ID)
				}
			}
			soft = true
			addRes(grl, resource.KindLock)
			for _, r := range roots {
				hold(r, grl)
			}
			obs.Uses = append(obs.Uses, guard.Use{Session: flush.ID, Resource: grl, Mode: "FLUSH", Waiting: true,
				BlockedBy: roots, Since: flush.QueryStart})
		} else if flush != nil {
			roots = []int64{flush.ID}
		}
		for j := range obs.Sessions {
			s := &obs.Sessions[j]
			if !grlWaiting(s) || (flush != nil && s.ID == flush.ID) {
				continue
			}
			addRes(grl, resource.KindLock)
			obs.Uses = append(obs.Uses, guard.Use{Session: s.ID, Resource: grl, Waiting: true, BlockedBy: roots, Soft: soft, Since: s.QueryStart})
		}
	}

	// Metadata locks: holders from METADATA_LOCK_INFO, waiters from the
	// thread states, tied by the table names the waiter's statement uses.
	mdlHolders := map[string][]int64{}
	for i := range mdls {
		m := &mdls[i]
		if !m.thread.Valid || !m.table.Valid || m.table.String == "" {
			continue // schema- or global-scope locks: not a table's
		}
		name := "mdl:" + m.schema.String + "." + m.table.String
		mdlHolders[name] = appendUnique(mdlHolders[name], m.thread.Int64)
	}
	for j := range obs.Sessions {
		s := &obs.Sessions[j]
		if s.WaitEvent != "Waiting for table metadata lock" {
			continue
		}
		matched := false
		for name, holders := range mdlHolders {
			_, table, _ := strings.Cut(strings.TrimPrefix(name, "mdl:"), ".")
			if !mentions(s.Query, table) {
				continue
			}
			matched = true
			addRes(name, resource.KindLock)
			var roots []int64
			soft := false
			for _, h := range holders {
				hs, known := index[h]
				if h == s.ID || !known {
					continue // itself, or a thread the processlist no longer shows
				}
				if obs.Sessions[hs].WaitEvent == "Waiting for table metadata lock" {
					soft = true // queued behind another waiter (a DDL)
					continue
				}
				roots = append(roots, h)
				hold(h, name)
			}
			if !ddlRE.MatchString(s.Query) && anyDDLWaiting(obs.Sessions, table, s.ID) {
				soft = true
			}
			obs.Uses = append(obs.Uses, guard.Use{Session: s.ID, Resource: name, Waiting: true, BlockedBy: roots, Soft: soft, Since: s.QueryStart})
		}
		if !matched {
			addRes("mdl:unknown", resource.KindLock)
			obs.Uses = append(obs.Uses, guard.Use{Session: s.ID, Resource: "mdl:unknown", Waiting: true, Since: s.QueryStart})
		}
	}
	return obs
}

// mentions reports whether a statement names table as a whole word.
func mentions(query, table string) bool {
	if table == "" {
		return false
	}
	q, t := strings.ToLower(query), strings.ToLower(table)
	for i := 0; ; {
		k := strings.Index(q[i:], t)
		if k < 0 {
			return false
		}
		a, b := i+k, i+k+len(t)
		if (a == 0 || !word(q[a-1])) && (b == len(q) || !word(q[b])) {
			return true
		}
		i = a + 1
	}
}

func word(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c >= 0x80
}

func anyDDLWaiting(ss []guard.Session, table string, except int64) bool {
	for i := range ss {
		s := &ss[i]
		if s.ID != except && s.WaitEvent == "Waiting for table metadata lock" && ddlRE.MatchString(s.Query) && mentions(s.Query, table) {
			return true
		}
	}
	return false
}

func anySession(ss []guard.Session, f func(*guard.Session) bool) bool {
	for i := range ss {
		if f(&ss[i]) {
			return true
		}
	}
	return false
}

func appendUnique(xs []int64, x int64) []int64 {
	for _, y := range xs {
		if y == x {
			return xs
		}
	}
	return append(xs, x)
}

// Cancel kills t's statement with KILL QUERY ID, which can reach no other
// statement; it first checks that the thread exists and runs it, to tell
// a vanished thread from a finished statement.
func (s *Source) Cancel(ctx context.Context, t guard.Target) error {
	if t.Statement <= 0 {
		return fmt.Errorf("guard/mysql: target of thread %d has no QUERY_ID: refusing to cancel blind", t.Session)
	}
	if err := s.verify(ctx, t, true); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, "KILL QUERY ID "+strconv.FormatInt(t.Statement, 10)); err != nil {
		var me *driver.MySQLError
		if errors.As(err, &me) && me.Number == 1094 { // ER_NO_SUCH_THREAD: unknown query id
			return guard.ErrChanged
		}
		return fmt.Errorf("guard/mysql: KILL QUERY ID %d: %w", t.Statement, err)
	}
	return nil
}

// Terminate ends t's connection with KILL CONNECTION after checking that
// the thread still holds the transaction that began at t.XactStart. A
// thread that commits and begins another transaction in the moment
// between the check and the KILL is the race left (MariaDB has no KILL
// for a transaction).
func (s *Source) Terminate(ctx context.Context, t guard.Target) error {
	if err := s.verify(ctx, t, false); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(t.Session, 10)); err != nil {
		var me *driver.MySQLError
		if errors.As(err, &me) && me.Number == 1094 {
			return guard.ErrVanished
		}
		return fmt.Errorf("guard/mysql: KILL CONNECTION %d: %w", t.Session, err)
	}
	return nil
}

// verify checks that t's thread exists and still runs t's statement
// (sameStatement) or t's transaction.
func (s *Source) verify(ctx context.Context, t guard.Target, sameStatement bool) error {
	var queryID sql.NullInt64
	var started sql.NullTime
	err := s.db.QueryRowContext(ctx, `SELECT p.QUERY_ID, t.trx_started FROM information_schema.PROCESSLIST p
		LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID WHERE p.ID = ?`, t.Session).Scan(&queryID, &started)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return guard.ErrVanished
	case err != nil:
		return fmt.Errorf("guard/mysql: checking thread %d: %w", t.Session, err)
	case sameStatement && queryID.Int64 != t.Statement:
		return guard.ErrChanged
	case !t.XactStart.IsZero() && (!started.Valid || !started.Time.Equal(t.XactStart)):
		return guard.ErrChanged
	}
	return nil
}
