package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/moirai-go/moirai/guard"
	"github.com/moirai-go/moirai/resource"
)

// Source is a MariaDB server as the guard sees it.
type Source struct {
	db       *sql.DB
	user     string
	database string // the DSN's: the guard's scope by default
	mdl      string // "metadata_lock_info", "performance_schema" or ""
	noMDL    bool   // WithoutMDLView: behave as on a server without a view
	selfSup  bool   // the guard's own account is a superuser (Check)
	privs    privileges
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

// Option configures a Source.
type Option func(*Source)

// WithoutMDLView makes the source ignore the server's metadata lock views
// (the METADATA_LOCK_INFO plugin, Performance Schema) and behave as on a
// server without them: waits for metadata locks are seen from PROCESSLIST
// states and a table's holder is inferred when only one session can hold
// it. The plugin is server-wide; this shows what the guard does where it
// is not installed.
func WithoutMDLView() Option { return func(s *Source) { s.noMDL = true } }

// Open opens a small dedicated pool to the server of dsn.
func Open(ctx context.Context, dsn string, opts ...Option) (*Source, error) {
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("guard/mysql: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(2)
	db.SetMaxIdleConns(2)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("guard/mysql: connect: %w", err)
	}
	s := &Source{db: db, user: cfg.User, database: cfg.DBName}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Name reports "mysql".
func (s *Source) Name() string { return "mysql" }

// Close closes the pool.
func (s *Source) Close() error { return s.db.Close() }

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

// superACL is SUPER's bit in mysql.global_priv's access mask (MariaDB's
// privilege_t: SELECT is bit 0, SUPER bit 15; ALL PRIVILEGES sets it).
const superACL = 1 << 15

// privsTTL is how long the accounts' privileges are cached.
const privsTTL = time.Minute

// privileges is what the guard read of the accounts: the user names of
// which some account, directly or through a role, has SUPER. Sessions
// show their user name, not the account (user@host pattern) they logged
// in as, so a name is a superuser's when any of its accounts is.
type privileges struct {
	loaded   time.Time
	readable bool
	super    map[string]bool
}

// load reads mysql.global_priv and mysql.roles_mapping.
func (p *privileges) load(ctx context.Context, db *sql.DB, now time.Time) error {
	p.loaded, p.readable = now, false
	access := map[string]uint64{} // user (or role) name → its accounts' masks OR-ed
	rows, err := db.QueryContext(ctx, `SELECT User, CAST(COALESCE(JSON_VALUE(Priv, '$.access'), '0') AS UNSIGNED) FROM mysql.global_priv`)
	if err != nil {
		return fmt.Errorf("guard/mysql: reading mysql.global_priv: %w", err)
	}
	for rows.Next() {
		var u string
		var a uint64
		if err := rows.Scan(&u, &a); err != nil {
			rows.Close()
			return err
		}
		access[u] |= a
	}
	if err := rows.Close(); err != nil {
		return err
	}
	roles := map[string][]string{}
	rows, err = db.QueryContext(ctx, `SELECT User, Role FROM mysql.roles_mapping`)
	if err != nil {
		return fmt.Errorf("guard/mysql: reading mysql.roles_mapping: %w", err)
	}
	for rows.Next() {
		var u, r string
		if err := rows.Scan(&u, &r); err != nil {
			rows.Close()
			return err
		}
		roles[u] = append(roles[u], r)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	p.super = map[string]bool{}
	for u := range access {
		p.super[u] = superOf(u, access, roles, map[string]bool{})
	}
	p.readable = true
	return nil
}

// superOf reports whether name, or a role granted to it (transitively),
// has SUPER.
func superOf(name string, access map[string]uint64, roles map[string][]string, seen map[string]bool) bool {
	if seen[name] {
		return false
	}
	seen[name] = true
	if access[name]&superACL != 0 {
		return true
	}
	for _, r := range roles[name] {
		if superOf(r, access, roles, seen) {
			return true
		}
	}
	return false
}

// isSuper reports whether a session of user must be treated as a
// superuser's: root, an account with SUPER (directly or by a role), or
// any account when the privileges cannot be read (fails closed). The
// guard's own user is what Check found.
func (s *Source) isSuper(ctx context.Context, user string, now time.Time) bool {
	switch {
	case user == "":
		return false // a server thread, whose Kind protects it
	case user == "root":
		return true
	case user == s.user:
		return s.selfSup
	}
	if now.Sub(s.privs.loaded) >= privsTTL || now.Before(s.privs.loaded) {
		_ = s.privs.load(ctx, s.db, now) // failing, readable is false: closed
	}
	if !s.privs.readable {
		return true
	}
	v, known := s.privs.super[user]
	return v || !known // an account created since the last read: closed
}

// ProcRow is one scanned PROCESSLIST row.
type ProcRow struct {
	ID                      sql.NullInt64
	User, Host, DB, Command sql.NullString
	TimeMS                  sql.NullFloat64
	State, Info             sql.NullString
	Stage, MaxStage         sql.NullInt64
	Progress                sql.NullFloat64
	QueryID                 sql.NullInt64
}

var commands = map[string]bool{
	"Sleep": true, "Query": true, "Connect": true, "Quit": true, "Init DB": true,
	"Field List": true, "Create DB": true, "Drop DB": true, "Refresh": true, "Shutdown": true,
	"Statistics": true, "Processlist": true, "Kill": true, "Debug": true, "Ping": true,
	"Time": true, "Delayed insert": true, "Change user": true, "Binlog Dump": true,
	"Table Dump": true, "Connect Out": true, "Register Slave": true, "Prepare": true,
	"Execute": true, "Long Data": true, "Close stmt": true, "Reset stmt": true,
	"Set option": true, "Fetch": true, "Daemon": true, "Reset connection": true,
	"Slave_IO": true, "Slave_SQL": true, "Slave_worker": true, "Bulk_execute": true,
}

// ParseSession turns one PROCESSLIST row into a session; ok is false when
// the row must be skipped.
func ParseSession(r ProcRow, now time.Time) (guard.Session, bool) {
	var s guard.Session
	if !r.ID.Valid || r.ID.Int64 <= 0 || !r.Command.Valid || !r.TimeMS.Valid || !(r.TimeMS.Float64 >= 0 && r.TimeMS.Float64 < 1e12) || !r.QueryID.Valid || r.QueryID.Int64 < 0 {
		return s, false
	}
	if !commands[r.Command.String] {
		return s, false
	}
	s.ID = r.ID.Int64
	s.Statement = r.QueryID.Int64
	s.User, s.Database, s.ClientAddr = r.User.String, r.DB.String, r.Host.String
	s.State = r.Command.String
	s.Kind = "client"
	switch {
	case r.User.String == "system user":
		s.Kind = "system user"
	case r.User.String == "event_scheduler" || r.Command.String == "Daemon":
		s.Kind = "event scheduler"
		if r.Command.String == "Daemon" && r.User.String != "event_scheduler" {
			s.Kind = "daemon"
		}
	case strings.HasPrefix(r.Command.String, "Binlog Dump") || strings.HasPrefix(r.Command.String, "Slave_"):
		s.Kind = "replication"
	}
	s.Active = r.Command.String != "Sleep" && r.Command.String != "Daemon" && r.Info.Valid
	s.Query = r.Info.String
	if s.Query != "" {
		s.Fingerprint = guard.Fingerprint(s.Query)
	}
	s.Age = time.Duration(r.TimeMS.Float64 * float64(time.Millisecond))
	if s.Active {
		s.QueryStart = now.Add(-s.Age)
	}
	s.StateChange = now.Add(-s.Age)
	st := r.State.String
	if isWaitState(st) {
		s.WaitEvent = st
	}
	s.Running = s.Active && s.WaitEvent == "" && st != "User sleep" && st != "User lock"
	if r.MaxStage.Valid && r.MaxStage.Int64 > 0 && r.Progress.Valid && r.Progress.Float64 >= 0 {
		s.Total = 1000
		s.Done = int64(r.Progress.Float64 * 10)
	}
	return s, true
}

func isWaitState(st string) bool {
	return strings.HasPrefix(st, "Waiting for") || st == "Locked"
}

// TrxRow is one scanned INNODB_TRX row.
type TrxRow struct {
	ID          sql.NullString
	Thread      sql.NullInt64
	Started     sql.NullTime
	State       sql.NullString
	RowsLocked  sql.NullInt64
	WaitStarted sql.NullTime
}

// Trx is a parsed INNODB_TRX row.
type Trx struct {
	ID          string // "0" for a transaction InnoDB gave no id (see noID)
	Thread      int64
	Started     time.Time
	State       string
	WaitStarted time.Time
	RowsLocked  int64
}

// noID is the trx_id INNODB_TRX shows for a transaction that has not
// written: one that only took locking reads (LOCK IN SHARE MODE) holds
// its row locks under it, and so may several at once.
const noID = "0"

// ParseTrx parses one INNODB_TRX row.
func ParseTrx(r TrxRow) (Trx, bool) {
	if !r.ID.Valid || r.ID.String == "" || !r.Thread.Valid || r.Thread.Int64 <= 0 || !r.Started.Valid || !r.State.Valid {
		return Trx{}, false
	}
	switch r.State.String {
	case "RUNNING", "LOCK WAIT", "ROLLING BACK", "COMMITTING":
	default:
		return Trx{}, false
	}
	t := Trx{ID: r.ID.String, Thread: r.Thread.Int64, Started: r.Started.Time, State: r.State.String}
	if r.RowsLocked.Valid {
		t.RowsLocked = r.RowsLocked.Int64
	}
	if r.WaitStarted.Valid {
		t.WaitStarted = r.WaitStarted.Time
	}
	return t, true
}

// WaitRow is one INNODB_LOCK_WAITS row joined with the requested lock's
// INNODB_LOCKS row.
type WaitRow struct {
	Requesting, Blocking, LockID sql.NullString
	Mode, Type, Table            sql.NullString
}

// Wait is a parsed lock wait.
type Wait struct {
	Requesting, Blocking string
	Resource, Mode       string
	Table                string // db.table
}

// ParseWait parses one lock wait row; the lock id must be
// "trx:space:page:rec" (record: the resource is "row:db.table/space:page:rec")
// or "trx:table" (table: "relation:db.table").
func ParseWait(r WaitRow) (Wait, bool) {
	if !r.Requesting.Valid || !r.Blocking.Valid || !r.LockID.Valid || !r.Type.Valid || !r.Table.Valid || r.Table.String == "" {
		return Wait{}, false
	}
	parts := strings.Split(r.LockID.String, ":")
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 10, 64); err != nil {
			return Wait{}, false
		}
	}
	table := strings.ReplaceAll(r.Table.String, "`", "")
	w := Wait{Requesting: r.Requesting.String, Blocking: r.Blocking.String, Mode: r.Mode.String, Table: table}
	switch {
	case r.Type.String == "RECORD" && len(parts) == 4:
		// The record (space, page, heap number): the waiters of one row
		// wait for one resource, and two hot rows of a table are two (a
		// decision on one is no episode of the other).
		w.Resource = "row:" + table + "/" + strings.Join(parts[1:], ":")
	case r.Type.String == "TABLE" && len(parts) == 2:
		w.Resource = "relation:" + table
	default:
		return Wait{}, false
	}
	return w, true
}

// Build assembles the sessions, resources and uses of one poll from parsed
// rows (pure: the integration of the soft-blocking rule).
//
// mdl lists the granted metadata locks when the server has a metadata lock
// view (non-nil, possibly empty): a table MDL waiter is then attributed to
// the non-waiting sessions holding an MDL on its table. Without a view
// (mdl nil) the holder is inferred (see inferMDL).
func Build(obs *guard.Observation, trxs []Trx, waits []Wait, mdl []MDL) {
	byID := map[int64]*guard.Session{}
	for i := range obs.Sessions {
		byID[obs.Sessions[i].ID] = &obs.Sessions[i]
	}
	trxThread := map[string]int64{}
	// The transactions without an id that hold row locks: the candidate
	// holders of a lock whose blocking trx is noID.
	var noIDHolders, noIDWaiters []int64
	for _, t := range trxs {
		if t.ID == noID {
			switch {
			case t.State == "RUNNING" && t.RowsLocked > 0:
				noIDHolders = append(noIDHolders, t.Thread)
			case t.State == "LOCK WAIT":
				noIDWaiters = append(noIDWaiters, t.Thread)
			}
		} else {
			trxThread[t.ID] = t.Thread
		}
		if s := byID[t.Thread]; s != nil {
			s.XactStart = t.Started
			s.IdleInTransaction = !s.Active && t.State == "RUNNING"
			// A row-lock wait often shows in PROCESSLIST as "Statistics"
			// or "Updating"; INNODB_TRX is the authority.
			if t.State == "LOCK WAIT" && s.WaitEvent == "" {
				s.WaitEvent = "Lock wait (InnoDB)"
				s.Running = false
			}
			if s.IdleInTransaction {
				s.State = "Sleep in transaction"
			}
		}
	}
	res := map[string]bool{}
	addRes := func(name string) {
		if !res[name] {
			res[name] = true
			obs.Resources = append(obs.Resources, guard.Resource{Name: name, Kind: resource.KindLock})
		}
	}
	// Row and table locks: INNODB_LOCK_WAITS names the blocking trx
	// directly. A blocker that itself waits is followed to the root.
	blockers := map[int64][]int64{}
	wres := map[int64]Wait{}
	noIDRows := map[int64]int{} // requester → its rows blocked by noID
	var noIDReq []Wait          // the rows whose requester has no id
	for _, w := range waits {
		if w.Requesting == noID {
			noIDReq = append(noIDReq, w)
			continue
		}
		req, ok1 := trxThread[w.Requesting]
		if ok1 && w.Blocking == noID {
			noIDRows[req]++
			wres[req] = w
			continue
		}
		blk, ok2 := trxThread[w.Blocking]
		if !ok1 || !ok2 {
			obs.Skipped["innodb_lock_waits"]++
			continue
		}
		blockers[req] = appendUnique(blockers[req], blk)
		wres[req] = w
	}
	whyReq := resolveNoIDWaiters(noIDReq, noIDWaiters, byID, trxThread, blockers, wres)
	inferredBy, why := resolveNoID(noIDRows, wres, noIDHolders, mdl, blockers)
	for req, w := range whyReq {
		why[req] = w
	}
	held := map[[2]any]bool{}
	for req, w := range wres {
		addRes(w.Resource)
		roots := roots(req, blockers, wres)
		var since time.Time
		for _, t := range trxs {
			if t.Thread == req {
				since = t.WaitStarted
			}
		}
		u := guard.Use{Session: req, Resource: w.Resource, Mode: w.Mode, Waiting: true, BlockedBy: roots, Since: since}
		if len(roots) == 0 {
			u.Why = unnamed(req, blockers, why)
		}
		for _, r := range roots {
			u.Inferred = u.Inferred || inferredBy[r]
		}
		obs.Uses = append(obs.Uses, u)
		for _, b := range blockers[req] {
			if _, waits := wres[b]; waits {
				continue // a waiter ahead in the queue holds nothing yet
			}
			if k := [2]any{b, w.Resource}; !held[k] {
				held[k] = true
				obs.Uses = append(obs.Uses, guard.Use{Session: b, Resource: w.Resource, Held: true, Inferred: inferredBy[b]})
			}
		}
	}
	// Global read lock / table flush / MDL waits from PROCESSLIST states.
	var flushStart time.Time
	var flushers []int64
	for _, s := range obs.Sessions {
		if isFTWRL(s.Query) && s.WaitEvent != "" {
			flushers = append(flushers, s.ID)
			if flushStart.IsZero() || s.QueryStart.Before(flushStart) {
				flushStart = s.QueryStart
			}
		}
	}
	waiting := map[int64]bool{}
	for _, s := range obs.Sessions {
		if s.WaitEvent != "" {
			waiting[s.ID] = true
		}
	}
	for _, m := range mdl {
		if !waiting[m.Session] {
			addRes("mdl:" + m.Table)
			obs.Uses = append(obs.Uses, guard.Use{Session: m.Session, Resource: "mdl:" + m.Table, Mode: m.Mode, Held: true})
		}
	}
	inferred := map[string]*inference{}
	var tables []string // of inferred, in order
	var glrRoots []int64
	if !flushStart.IsZero() {
		for _, s := range obs.Sessions {
			if s.Active && s.WaitEvent == "" && s.Kind == "client" && !s.Own && s.QueryStart.Before(flushStart) && !isFTWRL(s.Query) {
				glrRoots = append(glrRoots, s.ID)
			}
		}
	}
	for _, s := range obs.Sessions {
		switch s.WaitEvent {
		case "Waiting for global read lock", "Waiting for table flush", "Waiting for backup lock":
			addRes("global-read-lock")
			// PROCESSLIST has no wait start: a statement waiting on the
			// global read lock or an MDL waits from its start (the lock is
			// taken when the statement opens its tables), so the wait is
			// dated from it rather than from the poll that first saw it.
			u := guard.Use{Session: s.ID, Resource: "global-read-lock", Mode: s.WaitEvent, Waiting: true, BlockedBy: glrRoots, Since: s.QueryStart}
			u.Soft = !isFTWRL(s.Query) && len(flushers) > 0
			obs.Uses = append(obs.Uses, u)
		case "Waiting for table metadata lock":
			table := tableOf(s.Query, s.Database)
			name := "mdl:" + table
			addRes(name)
			u := guard.Use{Session: s.ID, Resource: name, Mode: s.WaitEvent, Waiting: true, Soft: !isDDL(s.Query), Since: s.QueryStart}
			if mdl == nil {
				inf := inferred[table]
				if inf == nil {
					inf = inferMDL(obs.Sessions, table, waiting)
					inferred[table] = inf
					tables = append(tables, table)
				}
				if inf.holder != 0 {
					u.BlockedBy, u.Inferred = []int64{inf.holder}, true
				} else {
					u.Why = inf.why
				}
			}
			for _, m := range mdl {
				if m.Table == table && m.Session != s.ID && !waiting[m.Session] {
					u.BlockedBy = appendUnique(u.BlockedBy, m.Session)
				}
			}
			obs.Uses = append(obs.Uses, u)
		}
	}
	for _, table := range tables {
		if inf := inferred[table]; inf.holder != 0 {
			obs.Uses = append(obs.Uses, guard.Use{Session: inf.holder, Resource: "mdl:" + table, Mode: "inferred", Held: true, Inferred: true})
		}
	}
	if len(glrRoots) > 0 {
		for _, r := range glrRoots {
			obs.Uses = append(obs.Uses, guard.Use{Session: r, Resource: "global-read-lock", Mode: "statement in flight", Held: true})
		}
	}
}

// inference is the holder inferred of a table's metadata lock (0: none),
// and why none.
type inference struct {
	holder int64
	why    string
}

// inferMDL infers who holds the metadata lock of table that sessions wait
// for, without a metadata lock view: a metadata lock is held by a
// statement that opened the table, until its transaction ends. So the
// candidates are the client sessions, not waiting themselves, that began
// before the first waiter and either run a statement naming the table, or
// hold a transaction open (INNODB_TRX) in the table's database (an
// earlier statement of it may have opened the table). Exactly one
// candidate is the holder; with none or several, nobody is.
func inferMDL(sessions []guard.Session, table string, waiting map[int64]bool) *inference {
	var first time.Time
	for _, s := range sessions {
		if s.WaitEvent == "Waiting for table metadata lock" && tableOf(s.Query, s.Database) == table {
			if first.IsZero() || s.QueryStart.Before(first) {
				first = s.QueryStart
			}
		}
	}
	db, _, _ := strings.Cut(table, ".")
	var cands []int64
	for _, s := range sessions {
		if s.Kind != "client" || s.Own || waiting[s.ID] || first.IsZero() {
			continue
		}
		names := s.Active && !s.QueryStart.IsZero() && s.QueryStart.Before(first) && namesTable(s.Query, s.Database, table)
		inTrx := !s.XactStart.IsZero() && s.XactStart.Before(first) && s.Database == db
		if names || inTrx {
			cands = append(cands, s.ID)
		}
	}
	switch len(cands) {
	case 1:
		return &inference{holder: cands[0]}
	case 0:
		return &inference{why: "metadata lock holder not inferred (no metadata lock view): no session that began before the first waiter uses " + table}
	}
	return &inference{why: fmt.Sprintf("metadata lock holder not inferred (no metadata lock view): %d sessions may hold it", len(cands))}
}

// namesTable reports whether statement q (run in database db) names table
// (db.table) after FROM, INTO, UPDATE, TABLE or JOIN.
func namesTable(q, db, table string) bool {
	f := strings.Fields(q)
	for i := 0; i+1 < len(f); i++ {
		switch strings.ToUpper(f[i]) {
		case "FROM", "INTO", "UPDATE", "TABLE", "JOIN":
			if tableOf(f[i]+" "+f[i+1], db) == table {
				return true
			}
		}
	}
	return false
}

// roots returns the root blockers of s's chain: the blockers, followed
// through those that wait themselves (waiting), that do not wait. A
// waiter whose own blockers are unknown ends the walk with no root: it
// is never a root.
func roots(s int64, blockers map[int64][]int64, waiting map[int64]Wait) []int64 {
	var out []int64
	seen := map[int64]bool{s: true}
	var walk func(int64)
	walk = func(x int64) {
		for _, b := range blockers[x] {
			if seen[b] {
				continue
			}
			seen[b] = true
			if _, w := waiting[b]; w {
				walk(b)
			} else {
				out = appendUnique(out, b)
			}
		}
	}
	walk(s)
	return out
}

// resolveNoIDWaiters gives the waiters without a transaction id (a
// locking read waiting: requesting_trx_id 0, as its blocking_trx_id when
// it blocks) their blockers. Which id-less waiter a wait row is for does
// not show; a waiter's statement (it waits in it) names its table, so
// its rows are among those on that table, and when those are all on one
// record it waits for that record: it gets the blockers of all of them
// (queued ones lead, through their own waits, to the record's holders,
// the roots of every waiter of it). Rows on several records of its table
// leave it unnamed (the returned reasons). An id-less blocker of an
// id-less waiter is not named.
func resolveNoIDWaiters(rows []Wait, waiters []int64, byID map[int64]*guard.Session, trxThread map[string]int64, blockers map[int64][]int64, wres map[int64]Wait) map[int64]string {
	why := map[int64]string{}
	for _, z := range waiters {
		s := byID[z]
		var mine []Wait
		for _, w := range rows {
			if s != nil && namesTable(s.Query, s.Database, w.Table) {
				mine = append(mine, w)
			}
		}
		if len(mine) == 0 {
			continue // not seen waiting in the rows (the views' caches differ)
		}
		wres[z] = mine[0]
		one := true
		for _, w := range mine {
			one = one && w.Resource == mine[0].Resource
		}
		if !one {
			why[z] = fmt.Sprintf("the waiting transaction has no id in INNODB_TRX (a locking read): its wait is one of %d on several records of %s", len(mine), mine[0].Table)
			continue
		}
		for _, w := range mine {
			if b, ok := trxThread[w.Blocking]; ok && b != z {
				blockers[z] = appendUnique(blockers[z], b)
			}
		}
		if len(blockers[z]) == 0 {
			why[z] = "the waiting transaction and the lock's holder have no id in INNODB_TRX (locking reads)"
		}
	}
	return why
}

// resolveNoID names the holders of the locks whose blocking trx has no
// id (noID): a transaction that only took locking reads. INNODB_TRX
// shows such transactions, not which lock each holds; the candidates for
// a requester's noID rows are the id-less transactions holding row locks
// (and, with a metadata lock view, holding the table: a row lock implies
// its table's metadata lock). When the candidates are exactly as many as
// the requester's noID rows, each row is one of them and they are its
// blockers (marked inferred); otherwise the holder is not named, and
// why[req] says so. The real holders are always among the candidates, so
// a named one is never a bystander.
func resolveNoID(rows map[int64]int, wres map[int64]Wait, holders []int64, mdl []MDL, blockers map[int64][]int64) (inferred map[int64]bool, why map[int64]string) {
	inferred, why = map[int64]bool{}, map[int64]string{}
	for req, n := range rows {
		table := wres[req].Table
		var cands []int64
		for _, h := range holders {
			if h == req || (mdl != nil && !holdsMDL(mdl, h, table)) {
				continue
			}
			cands = append(cands, h)
		}
		if len(cands) != n {
			why[req] = fmt.Sprintf("the lock's holder has no transaction id in INNODB_TRX (it only took locking reads): %d such transaction(s) may hold the %d lock(s) it waits for", len(cands), n)
			continue
		}
		for _, h := range cands {
			blockers[req] = appendUnique(blockers[req], h)
			inferred[h] = true
		}
	}
	return inferred, why
}

func holdsMDL(mdl []MDL, session int64, table string) bool {
	for _, m := range mdl {
		if m.Session == session && m.Table == table {
			return true
		}
	}
	return false
}

// unnamed says why req's chain has no root: the first reason found along
// it (a holder without a transaction id), or that its blockers all wait.
func unnamed(req int64, blockers map[int64][]int64, why map[int64]string) string {
	seen := map[int64]bool{}
	var find func(int64) string
	find = func(x int64) string {
		if seen[x] {
			return ""
		}
		seen[x] = true
		if w := why[x]; w != "" {
			return w
		}
		for _, b := range blockers[x] {
			if w := find(b); w != "" {
				return w
			}
		}
		return ""
	}
	if w := find(req); w != "" {
		return w
	}
	return "every session it waits for waits itself"
}

func appendUnique(xs []int64, x int64) []int64 {
	for _, y := range xs {
		if y == x {
			return xs
		}
	}
	return append(xs, x)
}

func isFTWRL(q string) bool {
	u := strings.ToUpper(strings.Join(strings.Fields(q), " "))
	return strings.HasPrefix(u, "FLUSH TABLES") && strings.Contains(u, "READ LOCK") || strings.HasPrefix(u, "BACKUP STAGE")
}

func isDDL(q string) bool {
	u := strings.ToUpper(strings.TrimSpace(q))
	for _, p := range []string{"ALTER ", "DROP ", "CREATE ", "RENAME ", "TRUNCATE ", "OPTIMIZE ", "LOCK TABLE"} {
		if strings.HasPrefix(u, p) {
			return true
		}
	}
	return false
}

// tableOf finds the first table a statement names (after FROM, INTO,
// UPDATE, TABLE or JOIN); "?" when none.
func tableOf(q, db string) string {
	f := strings.Fields(q)
	for i := 0; i+1 < len(f); i++ {
		switch strings.ToUpper(f[i]) {
		case "FROM", "INTO", "UPDATE", "TABLE", "JOIN":
			t := strings.Trim(f[i+1], "`;(),")
			if t == "" {
				continue
			}
			t = strings.ReplaceAll(t, "`", "")
			if !strings.Contains(t, ".") && db != "" {
				t = db + "." + t
			}
			return t
		}
	}
	return "?"
}

// MDL is one granted metadata lock on a table.
type MDL struct {
	Session int64
	Mode    string
	Table   string // db.table
}

// ParseMDL parses one metadata lock row (thread, mode, schema, table); ok
// is false for rows that are not table locks or have NULLs.
func ParseMDL(thread sql.NullInt64, mode, schema, table sql.NullString) (MDL, bool) {
	if !thread.Valid || thread.Int64 <= 0 || !mode.Valid || !schema.Valid || !table.Valid || schema.String == "" || table.String == "" {
		return MDL{}, false
	}
	return MDL{Session: thread.Int64, Mode: mode.String, Table: schema.String + "." + table.String}, true
}
