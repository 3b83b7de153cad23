package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/moirai-go/moirai/guard"
	"github.com/moirai-go/moirai/resource"
)

func init() {
	open := func(ctx context.Context, dsn string) (guard.Source, error) { return Open(ctx, dsn) }
	guard.Register("mysql", open)
	guard.Register("mariadb", open)
}

// innodbViewsRefresh is how often, at most, MariaDB refreshes the cache
// behind INNODB_TRX, INNODB_LOCKS and INNODB_LOCK_WAITS: on a read more
// than 100 ms after the last read (CACHE_MIN_IDLE_TIME_NS in
// trx0i_s.cc); a faster poll would read the same rows again.
const innodbViewsRefresh = 100 * time.Millisecond

const procQuery = `SELECT ID, USER, HOST, DB, COMMAND, TIME_MS, STATE, INFO, STAGE, MAX_STAGE, PROGRESS, QUERY_ID, NOW(6), CONNECTION_ID() FROM information_schema.PROCESSLIST`

// Poll reads the server's views once, on one connection: the threads,
// the InnoDB transactions and lock waits, the metadata locks when a view
// of them exists, and the status counters.
func (s *Source) Poll(ctx context.Context) (*guard.Observation, error) {
	start := time.Now()
	obs := &guard.Observation{Skipped: map[string]int{}, Refresh: innodbViewsRefresh}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("guard/mysql: %w", err)
	}
	defer conn.Close()
	// Session profiling makes the server report what the poll's own
	// statements cost it (SHOW PROFILES, summed into ServerTime).
	profiled := false
	if _, err := conn.ExecContext(ctx, "SET profiling = 1, profiling_history_size = 0"); err == nil {
		_, err = conn.ExecContext(ctx, "SET profiling_history_size = 15")
		profiled = err == nil
	}
	if err := s.readThreads(ctx, conn, obs); err != nil {
		return nil, err
	}
	trxs, err := readTrxs(ctx, conn, obs)
	if err != nil {
		return nil, err
	}
	waits, err := readWaits(ctx, conn, obs)
	if err != nil {
		return nil, err
	}
	mdl, err := s.readMDL(ctx, conn, obs)
	if err != nil {
		return nil, err
	}
	Build(obs, trxs, waits, mdl)

	st, err := status(ctx, conn, `SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_buffer_pool_pages_total','Innodb_buffer_pool_pages_free','Innodb_buffer_pool_pages_data','Innodb_buffer_pool_reads','Innodb_buffer_pool_read_requests','Innodb_buffer_pool_pages_flushed','Innodb_buffer_pool_pages_LRU_flushed','Threads_connected','Handler_commit','Handler_rollback')`)
	if err != nil {
		return nil, err
	}
	vars, err := status(ctx, conn, `SHOW GLOBAL VARIABLES WHERE Variable_name = 'max_connections'`)
	if err != nil {
		return nil, err
	}
	AddStatus(obs, st, vars)
	if profiled {
		obs.ServerTime = serverTime(ctx, conn)
	}
	obs.Took = time.Since(start)
	return obs, nil
}

// readThreads reads PROCESSLIST into obs's sessions (and obs.At, the
// server's clock), marking the guard's own and the superusers'.
func (s *Source) readThreads(ctx context.Context, conn *sql.Conn, obs *guard.Observation) error {
	rows, err := conn.QueryContext(ctx, procQuery)
	if err != nil {
		return fmt.Errorf("guard/mysql: processlist: %w", err)
	}
	var own int64
	for rows.Next() {
		var r ProcRow
		var now time.Time
		if err := rows.Scan(&r.ID, &r.User, &r.Host, &r.DB, &r.Command, &r.TimeMS, &r.State, &r.Info, &r.Stage, &r.MaxStage, &r.Progress, &r.QueryID, &now, &own); err != nil {
			obs.Skipped["processlist"]++
			continue
		}
		obs.At = now
		sess, ok := ParseSession(r, now)
		if !ok {
			obs.Skipped["processlist"]++
			continue
		}
		obs.Sessions = append(obs.Sessions, sess)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if obs.At.IsZero() {
		obs.At = time.Now()
	}
	for i := range obs.Sessions {
		se := &obs.Sessions[i]
		se.Own = se.ID == own || se.User == s.user && se.Query == procQuery
		se.Superuser = se.Kind == "client" && s.isSuper(ctx, se.User, time.Now())
	}
	return nil
}

// readTrxs reads INNODB_TRX.
func readTrxs(ctx context.Context, conn *sql.Conn, obs *guard.Observation) ([]Trx, error) {
	return readRows(ctx, conn, obs, "innodb_trx", `SELECT trx_id, trx_mysql_thread_id, trx_started, trx_state, trx_rows_locked, trx_wait_started FROM information_schema.INNODB_TRX`,
		func(rows *sql.Rows) (Trx, bool) {
			var r TrxRow
			if rows.Scan(&r.ID, &r.Thread, &r.Started, &r.State, &r.RowsLocked, &r.WaitStarted) != nil {
				return Trx{}, false
			}
			return ParseTrx(r)
		})
}

// readWaits reads INNODB_LOCK_WAITS joined with the requested lock.
func readWaits(ctx context.Context, conn *sql.Conn, obs *guard.Observation) ([]Wait, error) {
	return readRows(ctx, conn, obs, "innodb_lock_waits", `SELECT w.requesting_trx_id, w.blocking_trx_id, l.lock_id, l.lock_mode, l.lock_type, l.lock_table
		FROM information_schema.INNODB_LOCK_WAITS w JOIN information_schema.INNODB_LOCKS l ON l.lock_id = w.requested_lock_id`,
		func(rows *sql.Rows) (Wait, bool) {
			var r WaitRow
			if rows.Scan(&r.Requesting, &r.Blocking, &r.LockID, &r.Mode, &r.Type, &r.Table) != nil {
				return Wait{}, false
			}
			return ParseWait(r)
		})
}

// readRows runs query, a read of view, on conn and turns each row into a
// T with row; a row that row refuses (it does not scan, or it does not
// parse) is counted in obs.Skipped[view].
func readRows[T any](ctx context.Context, conn *sql.Conn, obs *guard.Observation, view, query string, row func(*sql.Rows) (T, bool)) ([]T, error) {
	rows, err := conn.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("guard/mysql: %s: %w", view, err)
	}
	var out []T
	for rows.Next() {
		if t, ok := row(rows); ok {
			out = append(out, t)
		} else {
			obs.Skipped[view]++
		}
	}
	return out, rows.Close()
}

// readMDL reads the granted table metadata locks from the view Check
// found; nil (not empty) when there is none, for Build to infer them.
func (s *Source) readMDL(ctx context.Context, conn *sql.Conn, obs *guard.Observation) ([]MDL, error) {
	q := mdlQuery(s.mdl)
	if q == "" {
		return nil, nil
	}
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("guard/mysql: metadata locks (%s): %w", s.mdl, err)
	}
	mdl := []MDL{}
	for rows.Next() {
		var th sql.NullInt64
		var mode, schema, table sql.NullString
		if err := rows.Scan(&th, &mode, &schema, &table); err != nil {
			obs.Skipped["metadata_locks"]++
			continue
		}
		if m, ok := ParseMDL(th, mode, schema, table); ok {
			mdl = append(mdl, m)
		} else if schema.Valid && table.Valid && table.String != "" {
			obs.Skipped["metadata_locks"]++
		}
	}
	return mdl, rows.Close()
}

// AddStatus adds the buffer pool, the connection slots and the commit
// counters (Handler_commit, Handler_rollback) from SHOW GLOBAL STATUS /
// VARIABLES values. Evictions are
// estimated as the pool's misses beyond its free pages: once the pool is
// full, every page read from disk (Innodb_buffer_pool_reads) evicts one,
// so evictions ≈ reads − (pages_total − pages_free) when positive.
func AddStatus(obs *guard.Observation, st, vars map[string]int64) {
	total, free, data := st["Innodb_buffer_pool_pages_total"], st["Innodb_buffer_pool_pages_free"], st["Innodb_buffer_pool_pages_data"]
	if total > 0 {
		ev := st["Innodb_buffer_pool_reads"] - (total - free)
		if ev < 0 {
			ev = 0
		}
		obs.Resources = append(obs.Resources, guard.Resource{Name: "buffer-pool", Kind: resource.KindMemory, Capacity: total, InUse: data, Evictions: ev, Misses: st["Innodb_buffer_pool_reads"]})
	}
	if mc := vars["max_connections"]; mc > 0 {
		obs.Resources = append(obs.Resources, guard.Resource{Name: "connection-slots", Kind: resource.KindQueue, Capacity: mc, InUse: st["Threads_connected"]})
	}
	// Handler_commit counts every transaction the storage engines commit,
	// autocommit statements included; Com_commit counts only explicit
	// COMMITs, and stays at 0 under a load of autocommit statements.
	obs.Committed, obs.RolledBack = st["Handler_commit"], st["Handler_rollback"]
}

func status(ctx context.Context, conn *sql.Conn, q string) (map[string]int64, error) {
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("guard/mysql: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, rows.Err()
}

// current reads the session's running QUERY_ID; ErrVanished if none.
func current(ctx context.Context, conn *sql.Conn, id int64) (qid int64, trx sql.NullTime, err error) {
	err = conn.QueryRowContext(ctx, `SELECT p.QUERY_ID, t.trx_started FROM information_schema.PROCESSLIST p
		LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID WHERE p.ID = ?`, id).Scan(&qid, &trx)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, trx, guard.ErrVanished
	}
	return qid, trx, err
}

// Cancel kills the statement t.Statement with KILL QUERY ID, which cannot
// hit any other statement.
func (s *Source) Cancel(ctx context.Context, t guard.Target) error {
	return s.kill(ctx, t.Session, "KILL QUERY ID "+strconv.FormatInt(t.Statement, 10), guard.ErrChanged,
		func(qid int64, _ sql.NullTime) bool { return qid == t.Statement && t.Statement > 0 })
}

// Terminate kills t's connection after verifying it still runs the same
// statement (or, idle in transaction, the same transaction start).
func (s *Source) Terminate(ctx context.Context, t guard.Target) error {
	return s.kill(ctx, t.Session, "KILL CONNECTION "+strconv.FormatInt(t.Session, 10), guard.ErrVanished,
		func(qid int64, trx sql.NullTime) bool {
			if !t.XactStart.IsZero() {
				return trx.Valid && trx.Time.Equal(t.XactStart)
			}
			return qid == t.Statement
		})
}

// kill runs the KILL statement stmt on an action connection if same
// says that the session still runs what the guard decided on, from the
// QUERY_ID it runs now and its transaction's start (else ErrChanged). A
// KILL that finds nothing to kill returns unknown.
func (s *Source) kill(ctx context.Context, session int64, stmt string, unknown error, same func(qid int64, trx sql.NullTime) bool) (err error) {
	conn, done, err := s.actionConn(ctx)
	if err != nil {
		return err
	}
	defer func() { done(err) }()
	qid, trx, err := current(ctx, conn, session)
	if err != nil {
		return err
	}
	if !same(qid, trx) {
		return guard.ErrChanged
	}
	if _, err = conn.ExecContext(ctx, stmt); err != nil {
		if isUnknown(err) {
			return unknown
		}
		return fmt.Errorf("guard/mysql: %s: %w", stmt, err)
	}
	return nil
}

// isUnknown reports MariaDB's "Unknown thread id" (1094) and "Unknown
// query id" (1957) errors: the KILL matched nothing.
func isUnknown(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1094 || me.Number == 1957)
}

// serverTime sums the durations SHOW PROFILES reports for the poll's
// statements (the profile history was emptied when the poll began).
func serverTime(ctx context.Context, conn *sql.Conn) time.Duration {
	rows, err := conn.QueryContext(ctx, "SHOW PROFILES")
	if err != nil {
		return 0
	}
	defer rows.Close()
	var sum float64
	for rows.Next() {
		var id int64
		var d float64
		var q sql.NullString
		if rows.Scan(&id, &d, &q) != nil {
			return 0
		}
		if q.String != "SET profiling_history_size = 15" {
			sum += d
		}
	}
	return time.Duration(sum * float64(time.Second))
}

// mdlQuery is the granted-table-MDL query of the metadata lock view Check
// found ("" when none).
func mdlQuery(view string) string {
	switch view {
	case "metadata_lock_info":
		return `SELECT THREAD_ID, LOCK_MODE, TABLE_SCHEMA, TABLE_NAME FROM information_schema.METADATA_LOCK_INFO WHERE LOCK_TYPE LIKE 'Table%'`
	case "performance_schema":
		return `SELECT t.PROCESSLIST_ID, m.LOCK_TYPE, m.OBJECT_SCHEMA, m.OBJECT_NAME FROM performance_schema.metadata_locks m
			JOIN performance_schema.threads t ON t.THREAD_ID = m.OWNER_THREAD_ID WHERE m.OBJECT_TYPE = 'TABLE' AND m.LOCK_STATUS = 'GRANTED'`
	}
	return ""
}
