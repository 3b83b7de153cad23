package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/moirai-go/moirai/guard"
)

// Source is a MariaDB server as the guard sees it.
type Source struct {
	db       *sql.DB
	user     string
	database string // the DSN's: the guard's scope by default
	mdl      string // "metadata_lock_info", "performance_schema" or ""
	selfSup  bool   // the guard's own account is a superuser (Check)
	privs    privileges
	config

	lease     *sql.Conn // the lease's own connection (see Lease)
	leaseHeld bool
	leaseName string
}

// Database returns the DSN's database ("" when it names none): the
// guard's scope unless it is told to act in every database.
func (s *Source) Database() string { return s.database }

var _ guard.Scoped = (*Source)(nil)

var _ guard.Source = (*Source)(nil)

// ParseDSN turns "mysql://user:pass@tcp(host:port)/db?params" or the
// driver's plain DSN into a driver config.
func ParseDSN(dsn string) (*mysql.Config, error) {
	if s, ok := strings.CutPrefix(dsn, "mysql://"); ok {
		dsn = s
	} else if s, ok := strings.CutPrefix(dsn, "mariadb://"); ok {
		dsn = s
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("guard/mysql: bad DSN: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	return cfg, nil
}

// Option configures [Open]. Options are made by the With functions; they
// set an unexported configuration, which Open applies to the Source it
// returns once all of them ran.
type Option func(*config)

// config is what the options set.
type config struct {
	noMDL bool // WithoutMDLView: behave as on a server without a view
}

// WithoutMDLView makes the source ignore the server's metadata lock views
// (the METADATA_LOCK_INFO plugin, Performance Schema) and behave as on a
// server without them: waits for metadata locks are seen from PROCESSLIST
// states and a table's holder is inferred when only one session can hold
// it. The plugin is server-wide; this shows what the guard does where it
// is not installed.
func WithoutMDLView() Option { return func(c *config) { c.noMDL = true } }

// Open opens a small dedicated pool to the server of dsn. The DSN's
// database is the guard's scope (see Database), not the connections'
// current database: every statement of the source names its schema
// (information_schema, mysql, performance_schema), so the guard's account
// needs no privilege on the database it guards, and connecting does not
// fail with "access denied to database" (1044) for the least-privilege
// account.
func Open(ctx context.Context, dsn string, opts ...Option) (*Source, error) {
	var c config
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	scope := cfg.DBName
	cfg.DBName = ""
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("guard/mysql: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(3) // polls, actions, and the lease's own
	db.SetMaxIdleConns(2)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("guard/mysql: connect: %w", err)
	}
	return &Source{db: db, user: cfg.User, database: scope, config: c}, nil
}

// Name reports "mysql".
func (s *Source) Name() string { return "mysql" }

// Close closes the pool.
func (s *Source) Close() error {
	s.dropLease()
	return s.db.Close()
}

// ParseVersion checks a VERSION() string: MariaDB ≥ 10.6.
func ParseVersion(v string) error {
	if !strings.Contains(strings.ToLower(v), "mariadb") {
		return fmt.Errorf("guard/mysql: server %q is not MariaDB (MySQL is not supported: its views differ)", v)
	}
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil {
		return fmt.Errorf("guard/mysql: cannot read the version of %q", v)
	}
	if major < 10 || major == 10 && minor < 6 {
		return fmt.Errorf("guard/mysql: MariaDB %d.%d found, 10.6 or later needed", major, minor)
	}
	return nil
}

// Check verifies the server and the guard's privileges.
func (s *Source) Check(ctx context.Context) (guard.ServerInfo, error) {
	var info guard.ServerInfo
	if err := s.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&info.Version); err != nil {
		return info, fmt.Errorf("guard/mysql: %w", err)
	}
	if err := ParseVersion(info.Version); err != nil {
		return info, err
	}
	var cur string
	if err := s.db.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&cur); err != nil {
		return info, fmt.Errorf("guard/mysql: %w", err)
	}
	privs, err := s.grants(ctx, "SHOW GRANTS")
	if err != nil {
		return info, err
	}
	info.Superuser = privs["SUPER"] || privs["ALL PRIVILEGES"]
	s.selfSup = info.Superuser
	var missing []string
	if !privs["PROCESS"] && !info.Superuser {
		missing = append(missing, "PROCESS")
	}
	if !privs["CONNECTION ADMIN"] && !info.Superuser {
		missing = append(missing, "CONNECTION ADMIN")
	}
	if len(missing) > 0 {
		return info, &guard.PrivilegeError{User: cur, Missing: missing,
			Hint: "GRANT " + strings.Join(missing, ", ") + " ON *.* TO " + quoteAccount(cur)}
	}

	s.mdl = ""
	var n int
	switch {
	case s.noMDL:
	case s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME='METADATA_LOCK_INFO' AND PLUGIN_STATUS='ACTIVE'").Scan(&n) == nil && n > 0:
		s.mdl = "metadata_lock_info"
	default:
		var on int
		if s.db.QueryRowContext(ctx, "SELECT @@performance_schema").Scan(&on) == nil && on == 1 {
			s.mdl = "performance_schema"
		}
	}
	if s.mdl == "" && s.noMDL {
		info.Features = append(info.Features, "metadata_locks: views ignored (WithoutMDLView; waits seen from PROCESSLIST states; a table's holder inferred when only one session can hold it)")
	} else if s.mdl == "" {
		info.Features = append(info.Features, "metadata_locks: unavailable (waits seen from PROCESSLIST states; a table's holder inferred when only one session can hold it)")
	} else {
		info.Features = append(info.Features, "metadata_locks: "+s.mdl)
	}
	info.Features = append(info.Features, "innodb_lock_waits: information_schema")
	// Which sessions are superusers': the accounts' global privileges and
	// roles. Unreadable, every other account's sessions are treated as
	// superusers' (never acted on): the detection fails closed.
	s.privs = privileges{}
	if err := s.privs.load(ctx, s.db, time.Now()); err != nil {
		info.Features = append(info.Features, "superusers: privileges unreadable: every other account's sessions are protected")
		return info, &guard.PrivilegeError{User: cur, Missing: []string{"SELECT ON mysql.global_priv", "SELECT ON mysql.roles_mapping"},
			Hint: superGrants(quoteAccount(cur)) + "; without them no session of another account is ever acted on"}
	}
	info.Features = append(info.Features, "superusers: mysql.global_priv and mysql.roles_mapping")
	return info, nil
}

func quoteAccount(cur string) string {
	u, h, _ := strings.Cut(cur, "@")
	return "'" + u + "'@'" + h + "'"
}

// grants runs a SHOW GRANTS statement and returns the global privileges.
func (s *Source) grants(ctx context.Context, q string) (map[string]bool, error) {
	rows, err := s.db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("guard/mysql: %s: %w", q, err)
	}
	defer rows.Close()
	privs := map[string]bool{}
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			return nil, err
		}
		for p := range ParseGrant(g) {
			privs[p] = true
		}
	}
	return privs, rows.Err()
}

// ParseGrant returns the global (ON *.*) privileges of one SHOW GRANTS
// line, upper-cased; none for grants on databases or tables.
func ParseGrant(line string) map[string]bool {
	out := map[string]bool{}
	up := strings.ToUpper(line)
	rest, ok := strings.CutPrefix(up, "GRANT ")
	if !ok {
		return out
	}
	list, on, ok := strings.Cut(rest, " ON ")
	if !ok || !strings.HasPrefix(strings.TrimSpace(on), "*.*") {
		return out
	}
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out[p] = true
		}
	}
	return out
}

// superGrants are the grants that let the guard's account tell
// superusers' sessions.
func superGrants(account string) string {
	return "GRANT SELECT ON mysql.global_priv TO " + account + "; GRANT SELECT ON mysql.roles_mapping TO " + account
}
