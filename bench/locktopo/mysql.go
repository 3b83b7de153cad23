package locktopo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/moirai-go/moirai/guard"
	guardmysql "github.com/moirai-go/moirai/guard/mysql"
)

// myServer is the MariaDB of a run: a scope database (the guard's), an
// other database, and four accounts named moirai_locktopo_<run>…: an
// ordinary one, a protected one, a superuser (ALL PRIVILEGES ON *.*) and
// the guard's own least-privilege account (PROCESS, CONNECTION ADMIN,
// SELECT on mysql.global_priv and mysql.roles_mapping, and SELECT on the
// scope database its DSN names).
type myServer struct {
	admin    string
	interval time.Duration

	base                  *mysql.Config
	scope, othr           string
	app, prot, super, grd string
	db                    *sql.DB // the administrator's
	created               []string
}

func (m *myServer) setup(ctx context.Context) error {
	cfg, err := guardmysql.ParseDSN(m.admin)
	if err != nil {
		return err
	}
	m.base = cfg
	name := runName()
	m.scope, m.othr = name, name+"_o"
	m.app, m.prot, m.super, m.grd = name+"_app", name+"_prot", name+"_su", name+"_guard"
	c := cfg.Clone()
	c.DBName = ""
	if m.db, err = m.openDB(c); err != nil {
		return err
	}
	m.db.SetMaxOpenConns(4)
	exec := func(q string) error {
		_, err := m.db.ExecContext(ctx, q)
		return err
	}
	for _, u := range []string{m.app, m.prot, m.super, m.grd} {
		if err := exec(fmt.Sprintf("CREATE USER '%s'@'%%'", u)); err != nil {
			return err
		}
		m.created = append(m.created, fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", u))
	}
	for _, db := range []string{m.scope, m.othr} {
		if err := exec("CREATE DATABASE " + db); err != nil {
			return err
		}
		m.created = append([]string{"DROP DATABASE IF EXISTS " + db}, m.created...)
		for _, u := range []string{m.app, m.prot} {
			if err := exec(fmt.Sprintf("GRANT ALL ON %s.* TO '%s'@'%%'", db, u)); err != nil {
				return err
			}
		}
	}
	if err := exec(fmt.Sprintf("GRANT ALL PRIVILEGES ON *.* TO '%s'@'%%'", m.super)); err != nil {
		return err
	}
	// The guard's DSN names the scope database: its account may read it.
	if err := exec(fmt.Sprintf("GRANT SELECT ON %s.* TO '%s'@'%%'", m.scope, m.grd)); err != nil {
		return err
	}
	// What the guard's start-up check asks for: reading every account's
	// privileges (to recognize a superuser's session) besides PROCESS and
	// CONNECTION ADMIN.
	for _, q := range []string{
		"GRANT SELECT ON mysql.global_priv TO '%s'@'%%'",
		"GRANT SELECT ON mysql.roles_mapping TO '%s'@'%%'",
		"GRANT PROCESS, CONNECTION ADMIN ON *.* TO '%s'@'%%'",
	} {
		if err := exec(fmt.Sprintf(q, m.grd)); err != nil {
			return err
		}
	}
	return nil
}

func (m *myServer) openDB(cfg *mysql.Config) (*sql.DB, error) {
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

func (m *myServer) teardown() {
	if m.db == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, q := range m.created {
		m.db.ExecContext(ctx, q)
	}
	m.db.Close()
}

func (m *myServer) prepare(ctx context.Context, sc *Scenario) error {
	c, err := m.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "USE "+m.scope); err != nil {
		return err
	}
	if _, err := c.ExecContext(ctx, "SET SESSION lock_wait_timeout = 5"); err != nil {
		return err
	}
	for _, t := range sc.Tables {
		t = m.scope + "." + t
		for _, q := range []string{
			"DROP TABLE IF EXISTS " + t,
			"CREATE TABLE " + t + " (id int PRIMARY KEY, v int NOT NULL) ENGINE=InnoDB",
			"INSERT INTO " + t + " SELECT seq, 0 FROM seq_1_to_10",
		} {
			// Another client's global read lock (a backup, an FTWRL of
			// the mysql suite) stalls these for as long as it is held:
			// try again, a few times.
			var err error
			for range 4 {
				if _, err = c.ExecContext(ctx, q); !isLockWaitTimeout(err) {
					break
				}
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (m *myServer) open(ctx context.Context, s Session) (conn, error) {
	cfg := m.base.Clone()
	cfg.Passwd = ""
	cfg.User, cfg.DBName = m.app, m.scope
	if s.OtherDB {
		cfg.DBName = m.othr
	}
	switch s.Account {
	case AcctProt:
		cfg.User = m.prot
	case AcctSuper:
		cfg.User = m.super
	}
	db, err := m.openDB(cfg)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	c, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	mc := &myConn{db: db, c: c}
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&mc.cid); err != nil {
		mc.close()
		return nil, err
	}
	if _, err := c.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 20, lock_wait_timeout = 20, max_statement_time = 30"); err != nil {
		mc.close()
		return nil, err
	}
	return mc, nil
}

func isLockWaitTimeout(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1205
}

func idList(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}

// waiting reads PROCESSLIST only: a metadata lock or global read lock
// wait says so in STATE; a row lock wait does not, but every statement of
// a scenario is instant unless it waits, so one still running after
// 200 ms waits. (INNODB_TRX would say so, but it is a cache that a read
// less than 100 ms after the last one leaves as it was: polling it would
// freeze the guard's view of the locks.)
func (m *myServer) waiting(ctx context.Context, ids []int64) (map[int64]bool, error) {
	out := map[int64]bool{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := m.db.QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE ID IN ("+idList(ids)+") AND COMMAND = 'Query' AND (STATE LIKE 'Waiting for%' OR TIME_MS >= 200)")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}

// disturbed looks for another client's part in the server's global read
// lock: a session not of the scenario waiting for it or for the backup
// lock (behind the scenario's FTWRL, or another's), or holding it
// (another client's FTWRL or backup, from the metadata lock view when the
// server has one).
func (m *myServer) disturbed(ctx context.Context, mine []int64) string {
	not := ""
	if len(mine) > 0 {
		not = " AND ID NOT IN (" + idList(mine) + ")"
	}
	var id int64
	var db, st string
	err := m.db.QueryRowContext(ctx, "SELECT ID, COALESCE(DB, ''), STATE FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()"+not+
		" AND (STATE LIKE 'Waiting for global read lock%' OR STATE LIKE 'Waiting for backup lock%' OR STATE LIKE 'Waiting for commit lock%') LIMIT 1").Scan(&id, &db, &st)
	if err == nil {
		return fmt.Sprintf("another client's session %d (database %q) is in %q", id, db, st)
	}
	not = strings.ReplaceAll(not, "ID NOT IN", "THREAD_ID NOT IN")
	if m.db.QueryRowContext(ctx, "SELECT THREAD_ID FROM information_schema.METADATA_LOCK_INFO WHERE LOCK_MODE LIKE 'MDL_BACKUP_FTWRL%'"+not+" LIMIT 1").Scan(&id) == nil {
		return fmt.Sprintf("another client's session %d holds the global read lock", id)
	}
	return ""
}

func (m *myServer) describe(ctx context.Context, ids []int64) string {
	if len(ids) == 0 {
		return ""
	}
	rows, err := m.db.QueryContext(ctx, "SELECT ID, COMMAND, COALESCE(STATE, ''), LEFT(COALESCE(INFO, ''), 60), TIME_MS FROM information_schema.PROCESSLIST WHERE ID IN ("+idList(ids)+")")
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id int64
		var cmd, st, info string
		var ms float64
		if rows.Scan(&id, &cmd, &st, &info, &ms) == nil {
			fmt.Fprintf(&b, "[%d %s %q %q %.0fms] ", id, cmd, st, info, ms)
		}
	}
	return b.String()
}

// kill ends the run's own connections ids, and only those.
func (m *myServer) kill(ids []int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, id := range ids {
		m.db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
	}
	if len(ids) == 0 {
		return
	}
	// A killed thread lingers in PROCESSLIST while it rolls back: wait
	// until every one is gone, so that the next scenario's guard does not
	// see them (its scope is the same database).
	gone(ctx, func(ctx context.Context) (int, error) {
		var n int
		err := m.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID IN ("+idList(ids)+")").Scan(&n)
		return n, err
	})
}

func (m *myServer) source(ctx context.Context, sc *Scenario) (guard.Source, error) {
	var opts []guardmysql.Option
	if sc.NoMDLView {
		opts = append(opts, guardmysql.WithoutMDLView())
	}
	return guardmysql.Open(ctx, fmt.Sprintf("mysql://%s@tcp(%s)/%s", m.grd, m.base.Addr, m.scope), opts...)
}

func (m *myServer) protection() guard.Protection {
	return guard.Protection{Users: []string{m.prot}}
}

func (m *myServer) pollInterval() time.Duration { return m.interval }

func (m *myServer) expand(q string) string { return strings.ReplaceAll(q, scopeDBToken, m.scope) }

// myConn is one MariaDB connection, alone in its pool.
type myConn struct {
	db  *sql.DB
	c   *sql.Conn
	cid int64
}

func (c *myConn) id() int64 { return c.cid }

func (c *myConn) exec(ctx context.Context, q string) error {
	_, err := c.c.ExecContext(ctx, q)
	return err
}

func (c *myConn) close() {
	c.c.Close()
	c.db.Close()
}
