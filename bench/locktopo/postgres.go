package locktopo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/moirai-go/moirai/guard"
	guardpg "github.com/moirai-go/moirai/guard/postgres"
)

// pgServer is the PostgreSQL of a run: a scope database (the guard's), an
// other database, an ordinary role and a protected role, all named
// moirai_locktopo_<run>…; the superuser is the administrator's role.
type pgServer struct {
	admin    string
	interval time.Duration

	base        *pgx.ConnConfig
	scope, othr string // databases
	app, prot   string // roles
	adminConn   *pgx.Conn
	dbConn      map[string]*pgx.Conn
	created     []string // statements that undo the set-up, in order
}

func (p *pgServer) setup(ctx context.Context) error {
	cfg, err := pgx.ParseConfig(p.admin)
	if err != nil {
		return fmt.Errorf("admin DSN: %w", err)
	}
	p.base = cfg
	name := runName()
	p.scope, p.othr = name, name+"_o"
	p.app, p.prot = name+"_app", name+"_prot"
	if p.adminConn, err = p.connect(ctx, cfg.Database, cfg.User, "moirai_locktopo_admin"); err != nil {
		return err
	}
	p.dbConn = map[string]*pgx.Conn{}
	for _, r := range []string{p.app, p.prot} {
		if _, err := p.adminConn.Exec(ctx, "CREATE ROLE "+r+" LOGIN"); err != nil {
			return err
		}
		p.created = append(p.created, "DROP ROLE IF EXISTS "+r)
	}
	for _, db := range []string{p.scope, p.othr} {
		if _, err := p.adminConn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
			return err
		}
		p.created = append([]string{"DROP DATABASE IF EXISTS " + db + " WITH (FORCE)"}, p.created...)
		c, err := p.connect(ctx, db, cfg.User, "moirai_locktopo_admin")
		if err != nil {
			return err
		}
		p.dbConn[db] = c
		for _, q := range []string{
			"SET lock_timeout = '5s'",
			fmt.Sprintf("GRANT ALL ON SCHEMA public TO %s, %s", p.app, p.prot),
			fmt.Sprintf("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON TABLES TO %s, %s", p.app, p.prot),
		} {
			if _, err := c.Exec(ctx, q); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *pgServer) teardown() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range p.dbConn {
		c.Close(ctx)
	}
	if p.adminConn == nil {
		return
	}
	for _, q := range p.created {
		p.adminConn.Exec(ctx, q)
	}
	p.adminConn.Close(ctx)
}

// connect opens a session to db as user.
func (p *pgServer) connect(ctx context.Context, db, user, app string) (*pgx.Conn, error) {
	cfg := p.base.Copy()
	cfg.Database, cfg.User = db, user
	cfg.RuntimeParams = map[string]string{
		"application_name":  app,
		"statement_timeout": "30000",
		"lock_timeout":      "20000",
	}
	return pgx.ConnectConfig(ctx, cfg)
}

func (p *pgServer) prepare(ctx context.Context, sc *Scenario) error {
	dbs := []string{p.scope}
	if sc.Topology == TopoOtherDB {
		dbs = append(dbs, p.othr)
	}
	for _, db := range dbs {
		c := p.dbConn[db]
		for _, t := range sc.Tables {
			for _, q := range []string{
				"DROP TABLE IF EXISTS " + t,
				"CREATE TABLE " + t + " (id int PRIMARY KEY, v int NOT NULL)",
				"INSERT INTO " + t + " SELECT g, 0 FROM generate_series(1, 10) g",
			} {
				if _, err := c.Exec(ctx, q); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (p *pgServer) open(ctx context.Context, s Session) (conn, error) {
	db, user, app := p.scope, p.app, "moirai_locktopo"
	if s.OtherDB {
		db = p.othr
	}
	switch s.Account {
	case AcctProt:
		user = p.prot
	case AcctSuper:
		user = p.base.User
	}
	if s.App != "" {
		app = s.App
	}
	c, err := p.connect(ctx, db, user, app)
	if err != nil {
		return nil, err
	}
	return &pgConn{c: c}, nil
}

func (p *pgServer) waiting(ctx context.Context, ids []int64) (map[int64]bool, error) {
	rows, err := p.adminConn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE pid = ANY($1) AND wait_event_type = 'Lock'", ids)
	if err != nil {
		return nil, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, err
	}
	out := map[int64]bool{}
	for _, id := range pids {
		out[int64(id)] = true
	}
	return out, nil
}

func (p *pgServer) describe(ctx context.Context, ids []int64) string {
	rows, err := p.adminConn.Query(ctx, "SELECT pid, state, coalesce(wait_event_type, ''), coalesce(wait_event, ''), left(query, 60) FROM pg_stat_activity WHERE pid = ANY($1)", ids)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var pid int32
		var st, wt, we, q string
		if rows.Scan(&pid, &st, &wt, &we, &q) == nil {
			fmt.Fprintf(&b, "[%d %s %s:%s %q] ", pid, st, wt, we, q)
		}
	}
	return b.String()
}

// disturbed: nothing of another client's reaches a scenario's locks on
// PostgreSQL (its tables and advisory locks are the run's database's).
func (p *pgServer) disturbed(context.Context, []int64) string { return "" }

// kill terminates the run's own sessions ids, and only those.
func (p *pgServer) kill(ids []int64) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.adminConn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = ANY($1)", ids)
	// A terminated backend lingers while it exits: wait until every one
	// is gone, so that the next scenario's guard does not see them.
	gone(ctx, func(ctx context.Context) (n int, err error) {
		err = p.adminConn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)", ids).Scan(&n)
		return n, err
	})
}

func (p *pgServer) source(ctx context.Context, _ *Scenario) (guard.Source, error) {
	cfg := p.base
	dsn := fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, p.scope)
	if cfg.Password != "" {
		dsn = fmt.Sprintf("postgres://%s:%s@%s:%d/%s", cfg.User, cfg.Password, cfg.Host, cfg.Port, p.scope)
	}
	return guardpg.Open(ctx, dsn)
}

func (p *pgServer) protection() guard.Protection {
	return guard.Protection{Users: []string{p.prot}, Applications: []string{protectedApp}}
}

func (p *pgServer) pollInterval() time.Duration { return p.interval }

func (p *pgServer) expand(q string) string { return strings.ReplaceAll(q, scopeDBToken, p.scope) }

// pgConn is one PostgreSQL session.
type pgConn struct{ c *pgx.Conn }

func (c *pgConn) id() int64 { return int64(c.c.PgConn().PID()) }

func (c *pgConn) exec(ctx context.Context, q string) error {
	_, err := c.c.Exec(ctx, q)
	return err
}

func (c *pgConn) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c.c.Close(ctx)
}
