// Package postgres is moirai guard's source for PostgreSQL 15 and later:
// it reads who holds and who waits for which lock from the server's own
// views and cancels statements with pg_cancel_backend, verified in the
// same statement against the backend's query_start and xact_start.
//
// One poll is one round trip: a pipeline of five statements in one
// implicit transaction, so the statistics views are read from one
// snapshot (cleared first with pg_stat_clear_snapshot):
//
//   - pg_stat_activity joined with pg_roles: the backends, their
//     statements, transaction and statement start, state, and whether
//     their role is a superuser;
//   - pg_locks with the relations' names: who holds and who waits for
//     relation, tuple, transaction, page, object and advisory locks, with
//     waitstart; pg_blocking_pids() only for the rows of backends waiting
//     on a Lock wait event (it is expensive);
//   - pg_stat_progress_* (vacuum, cluster and VACUUM FULL, create index,
//     copy, analyze): the progress of the statements that report one;
//   - pg_stat_database: committed and rolled back transactions; with it
//     the connection slots (max_connections less
//     superuser_reserved_connections, and the client backends using one),
//     reported as the resource "connection-slots" (a gauge: no uses).
//
// Waits are attributed to their root holders: a backend that waits behind
// another waiter (a query queued behind an ALTER TABLE that itself waits
// for a long reader) is soft-blocked, and blamed on the reader.
//
// The guard's role needs pg_monitor (to see every backend's statement and
// locks) and pg_signal_backend (to cancel them); Check says which one is
// missing. Superusers are never acted on unless the guard is told to.
//
// [Source.Lease] takes a session advisory lock (pg_try_advisory_lock) on
// a connection of its own, which also carries the actions while the
// lease is held (see guard.Leaser).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/moirai-go/moirai/guard"
	"github.com/moirai-go/moirai/resource"
)

// Source polls one PostgreSQL server.
type Source struct {
	pool     *pgxpool.Pool
	connCfg  *pgx.ConnConfig // for the lease's connection
	user     string
	database string

	lease     *pgx.Conn // the lease's own connection (see Lease)
	leaseHeld bool
	leaseKey  int64
}

var _ guard.Source = (*Source)(nil)

func init() {
	open := func(ctx context.Context, dsn string) (guard.Source, error) { return Open(ctx, dsn) }
	guard.Register("postgres", open)
	guard.Register("postgresql", open)
}

// queryTimeout bounds every statement of the guard on the server.
const queryTimeout = 2 * time.Second

// Open connects to the server of dsn (a postgres:// URL or key=value
// string) with a pool of at most two connections, named moirai-guard.
func Open(ctx context.Context, dsn string) (*Source, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("guard/postgres: bad DSN: %w", redact(err))
	}
	cfg.MaxConns = 2
	cfg.MinConns = 0
	rp := cfg.ConnConfig.RuntimeParams
	if rp["application_name"] == "" {
		rp["application_name"] = "moirai-guard"
	}
	rp["statement_timeout"] = strconv.Itoa(int(queryTimeout / time.Millisecond))
	rp["lock_timeout"] = strconv.Itoa(int(queryTimeout / time.Millisecond))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("guard/postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("guard/postgres: cannot reach %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	return &Source{pool: pool, connCfg: cfg.ConnConfig, user: cfg.ConnConfig.User, database: cfg.ConnConfig.Database}, nil
}

// Database returns the database the source connected to: the guard's
// scope unless it is told to act in every database.
func (s *Source) Database() string { return s.database }

var _ guard.Scoped = (*Source)(nil)

// redact keeps a DSN parse error from echoing a password.
func redact(err error) error {
	msg := err.Error()
	if u, perr := url.Parse(msg); perr == nil && u.User != nil {
		return errors.New(strings.ReplaceAll(msg, u.User.String(), "***"))
	}
	return err
}

// Name returns "postgres".
func (s *Source) Name() string { return "postgres" }

// Close closes the pool.
func (s *Source) Close() error {
	s.dropLease()
	s.pool.Close()
	return nil
}

// MinVersion is the oldest server version the source supports
// (pg_locks.waitstart appeared in 14; the guard is tested on 15).
const MinVersion = 150000

// Check verifies the server version and the role's privileges.
func (s *Source) Check(ctx context.Context) (guard.ServerInfo, error) {
	var (
		num                      int
		version, user            string
		super, monitor, signaler bool
	)
	err := s.pool.QueryRow(ctx, `SELECT current_setting('server_version_num')::int, current_setting('server_version'),
		current_user, r.rolsuper,
		pg_has_role(current_user, 'pg_monitor', 'USAGE'), pg_has_role(current_user, 'pg_signal_backend', 'USAGE')
		FROM pg_roles r WHERE r.rolname = current_user`).Scan(&num, &version, &user, &super, &monitor, &signaler)
	if err != nil {
		return guard.ServerInfo{}, fmt.Errorf("guard/postgres: reading the server's version and the role's privileges: %w", err)
	}
	info := guard.ServerInfo{Version: "PostgreSQL " + version, Superuser: super,
		Features: []string{"locks: pg_locks with waitstart", "blocking: pg_blocking_pids for Lock waits", "progress: pg_stat_progress_*",
			"superusers: pg_roles.rolsuper (readable by every role)"}}
	if num < MinVersion {
		return info, fmt.Errorf("guard/postgres: server version %s (%d) is not supported: PostgreSQL 15 or later is", version, num)
	}
	if super {
		return info, nil
	}
	var missing []string
	if !monitor {
		missing = append(missing, "pg_monitor")
	}
	if !signaler {
		missing = append(missing, "pg_signal_backend")
	}
	if len(missing) > 0 {
		return info, &guard.PrivilegeError{User: user, Missing: missing,
			Hint: fmt.Sprintf("GRANT %s TO %s", strings.Join(missing, ", "), pgx.Identifier{user}.Sanitize())}
	}
	return info, nil
}

const (
	qActivity = `SELECT a.pid, a.usename, a.application_name, a.datname, host(a.client_addr), a.backend_type,
		a.state, a.query, a.query_start, a.xact_start, a.state_change, a.wait_event_type, a.wait_event,
		r.rolsuper, a.pid = pg_backend_pid()
		FROM pg_stat_activity a LEFT JOIN pg_roles r ON r.oid = a.usesysid`
	qLocks = `SELECT l.pid, l.locktype, l.mode, l.granted, l.waitstart,
		CASE WHEN c.oid IS NOT NULL THEN n.nspname || '.' || c.relname ELSE l.relation::text END,
		l.transactionid::text, l.objid::text,
		CASE WHEN NOT l.granted AND a.wait_event_type = 'Lock' THEN pg_blocking_pids(l.pid) END,
		CASE WHEN l.database = 0 THEN '(shared)' ELSE coalesce(d.datname, l.database::text) END,
		l.classid::text, l.objsubid::text, l.page::text, l.tuple::text
		FROM pg_locks l
		LEFT JOIN pg_database d ON d.oid = l.database
		LEFT JOIN pg_class c ON c.oid = l.relation AND (l.database = 0 OR d.datname = current_database())
		LEFT JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.pid IS NOT NULL AND l.locktype IN ('relation', 'tuple', 'transactionid', 'page', 'object', 'advisory')`
	qProgress = `SELECT pid, heap_blks_scanned, heap_blks_total FROM pg_stat_progress_vacuum
		UNION ALL SELECT pid, heap_blks_scanned, heap_blks_total FROM pg_stat_progress_cluster
		UNION ALL SELECT pid, blocks_done, blocks_total FROM pg_stat_progress_create_index
		UNION ALL SELECT pid, bytes_processed, bytes_total FROM pg_stat_progress_copy
		UNION ALL SELECT pid, sample_blks_scanned, sample_blks_total FROM pg_stat_progress_analyze`
	// qXacts also reads the connection slots: the slots ordinary roles may
	// take (max_connections less superuser_reserved_connections) and the
	// client backends that take one now.
	qXacts = `SELECT coalesce(sum(xact_commit), 0)::bigint, coalesce(sum(xact_rollback), 0)::bigint,
		current_setting('max_connections')::bigint - current_setting('superuser_reserved_connections')::bigint,
		(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'),
		clock_timestamp() FROM pg_stat_database`
)

// Poll reads the views once, in one round trip.
func (s *Source) Poll(ctx context.Context) (*guard.Observation, error) {
	start := time.Now()
	var b pgx.Batch
	var (
		t0       time.Time
		acts     []activityRow
		locks    []lockRow
		progress []progressRow
		commit   int64
		rollback int64
		slots    int64
		inUse    int64
		t1       time.Time
	)
	b.Queue(`SELECT clock_timestamp() FROM (SELECT pg_stat_clear_snapshot()) AS cleared`).QueryRow(func(r pgx.Row) error {
		return r.Scan(&t0)
	})
	b.Queue(qActivity).Query(into(&acts, func(rows pgx.Rows, a *activityRow) error {
		return rows.Scan(&a.pid, &a.user, &a.app, &a.db, &a.addr, &a.backendType, &a.state, &a.query,
			&a.queryStart, &a.xactStart, &a.stateChange, &a.waitType, &a.wait, &a.super, &a.own)
	}))
	b.Queue(qLocks).Query(into(&locks, func(rows pgx.Rows, l *lockRow) error {
		return rows.Scan(&l.pid, &l.lockType, &l.mode, &l.granted, &l.waitStart, &l.relation, &l.xid, &l.objid, &l.blockers,
			&l.db, &l.classid, &l.objsubid, &l.page, &l.tuple)
	}))
	b.Queue(qProgress).Query(into(&progress, func(rows pgx.Rows, p *progressRow) error {
		return rows.Scan(&p.pid, &p.done, &p.total)
	}))
	b.Queue(qXacts).QueryRow(func(r pgx.Row) error { return r.Scan(&commit, &rollback, &slots, &inUse, &t1) })
	if err := s.pool.SendBatch(ctx, &b).Close(); err != nil {
		return nil, fmt.Errorf("guard/postgres: poll: %w", err)
	}
	obs := build(t0, acts, locks, progress)
	obs.Committed, obs.RolledBack = commit, rollback
	// A backend flushes its counters to pg_stat_database at most once a
	// second (PGSTAT_MIN_INTERVAL), when it finishes a transaction.
	obs.CountersLag = time.Second
	obs.Resources = append(obs.Resources, connectionSlots(slots, inUse))
	obs.Took = time.Since(start)
	if !t0.IsZero() && !t1.IsZero() {
		obs.ServerTime = max(t1.Sub(t0), 0)
	}
	return obs, nil
}

// into returns a batch query's callback that scans each row into a T
// with scan and appends it to dst.
func into[T any](dst *[]T, scan func(pgx.Rows, *T) error) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		for rows.Next() {
			var t T
			if err := scan(rows, &t); err != nil {
				return err
			}
			*dst = append(*dst, t)
		}
		return rows.Err()
	}
}

// The rows as scanned: pointers where the view may hold NULL.
type activityRow struct {
	pid                                     *int32
	user, app, db, addr, backendType, state *string
	query, waitType, wait                   *string
	queryStart, xactStart, stateChange      *time.Time
	super, own                              *bool
}

type lockRow struct {
	pid                  *int32
	lockType, mode       *string
	granted              *bool
	waitStart            *time.Time
	relation, xid, objid *string
	blockers             []int32
	// The rest of the lock tag: the database's name ("(shared)" for shared
	// catalogs), classid and objsubid of object and advisory locks, the
	// page and tuple of page and tuple locks.
	db, classid, objsubid, page, tuple *string
}

type progressRow struct {
	pid         *int32
	done, total *int64
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func tm(p *time.Time) time.Time {
	if p == nil {
		return time.Time{}
	}
	return *p
}

// session converts an activity row; ok is false for a row the guard
// cannot use (no pid).
func session(a *activityRow, at time.Time) (guard.Session, bool) {
	if a.pid == nil || *a.pid <= 0 {
		return guard.Session{}, false
	}
	s := guard.Session{
		ID: int64(*a.pid), User: str(a.user), Application: str(a.app), Database: str(a.db), ClientAddr: str(a.addr),
		Kind: str(a.backendType), State: str(a.state), Query: str(a.query),
		QueryStart: tm(a.queryStart), XactStart: tm(a.xactStart), StateChange: tm(a.stateChange),
	}
	if s.Kind == "client backend" {
		s.Kind = "client"
	}
	if s.Kind == "" {
		s.Kind = "unknown"
	}
	// A client whose role cannot be read (dropped while connected) is
	// treated as a superuser's: the detection fails closed.
	s.Superuser = a.super == nil && s.Kind == "client" || a.super != nil && *a.super
	s.Own = a.own != nil && *a.own
	switch s.State {
	case "active", "fastpath function call":
		s.Active = true
	case "idle in transaction", "idle in transaction (aborted)":
		s.IdleInTransaction = true
	}
	if s.Active && !s.QueryStart.IsZero() {
		s.Age = max(at.Sub(s.QueryStart), 0)
	}
	if str(a.waitType) != "" {
		s.WaitEvent = str(a.waitType) + ":" + str(a.wait)
	}
	// Reading or writing is executing; a lock, a latch, a client, a timer
	// (pg_sleep) is waiting.
	s.Running = s.Active && (str(a.waitType) == "" || str(a.waitType) == "IO")
	s.Fingerprint = guard.Fingerprint(s.Query)
	return s, true
}

// lockName returns the resource a lock row is about, and false for a row
// that names nothing usable. The name holds the lock's whole tag: the
// database (relations and advisory locks of two databases are two
// resources), the page and tuple of a row lock, and classid, objid and
// objsubid of object and advisory locks (pg_advisory_lock(1, 42) and
// pg_advisory_lock(2, 42) are two locks). A relation of another database
// is named by its oid: pg_class resolves only the current one's.
func lockName(l *lockRow) (string, bool) {
	db := str(l.db)
	switch str(l.lockType) {
	case "relation":
		if r := str(l.relation); r != "" && db != "" {
			return "relation:" + db + "." + r, true
		}
	case "tuple":
		if r, p, t := str(l.relation), str(l.page), str(l.tuple); r != "" && db != "" && p != "" && t != "" {
			return "tuple:" + db + "." + r + "(" + p + "," + t + ")", true
		}
	case "page":
		if r, p := str(l.relation), str(l.page); r != "" && db != "" && p != "" {
			return "page:" + db + "." + r + "(" + p + ")", true
		}
	case "transactionid":
		if x := str(l.xid); x != "" {
			return "transactionid:" + x, true
		}
	case "object", "advisory":
		if c, o, sub := str(l.classid), str(l.objid), str(l.objsubid); db != "" && c != "" && o != "" && sub != "" {
			return str(l.lockType) + ":" + db + ":" + c + ":" + o + ":" + sub, true
		}
	}
	return "", false
}

// build turns the rows into an observation. Rows without the values the
// guard needs are skipped and counted by view.
func build(at time.Time, acts []activityRow, locks []lockRow, progress []progressRow) *guard.Observation {
	if at.IsZero() {
		at = time.Now()
	}
	obs := &guard.Observation{At: at, Skipped: map[string]int{}}
	index := addSessions(obs, acts, progress, at)

	// The waits, and who waits for whom.
	waiting := map[int64]bool{}
	direct := map[int64][]int64{}
	for i := range locks {
		l := &locks[i]
		if l.pid != nil && l.granted != nil && !*l.granted {
			waiting[int64(*l.pid)] = true
			for _, b := range l.blockers {
				if b > 0 && !slices.Contains(direct[int64(*l.pid)], int64(b)) {
					direct[int64(*l.pid)] = append(direct[int64(*l.pid)], int64(b))
				}
			}
		}
	}
	contended := map[string]bool{}
	type use struct {
		guard.Use
		name string
	}
	var uses []use
	for i := range locks {
		l := &locks[i]
		name, ok := lockName(l)
		if !ok || l.pid == nil || l.granted == nil {
			obs.Skipped["pg_locks"]++
			continue
		}
		pid := int64(*l.pid)
		j, known := index[pid]
		if !known {
			obs.Skipped["pg_locks"]++ // a backend that ended between the two reads
			continue
		}
		if obs.Sessions[j].Own {
			continue // the guard's own poll
		}
		u := guard.Use{Session: pid, Resource: name, Mode: str(l.mode), Held: *l.granted, Waiting: !*l.granted, Since: tm(l.waitStart)}
		if u.Waiting {
			contended[name] = true
			u.BlockedBy, u.Soft = roots(pid, direct, waiting)
		}
		uses = append(uses, use{u, name})
	}
	// Only the resources someone waits for, and every relation (cheap,
	// few, and what a waiter will wait for next), are reported; a
	// transaction's own lock on its ID matters only when waited for.
	seen := map[string]bool{}
	for _, u := range uses {
		if !contended[u.name] && !strings.HasPrefix(u.name, "relation:") {
			continue
		}
		obs.Uses = append(obs.Uses, u.Use)
		if !seen[u.name] {
			seen[u.name] = true
			obs.Resources = append(obs.Resources, guard.Resource{Name: u.name, Kind: resource.KindLock})
		}
	}
	return obs
}

// addSessions adds the sessions of pg_stat_activity, with their progress,
// to obs, and returns the index of each pid in obs.Sessions.
func addSessions(obs *guard.Observation, acts []activityRow, progress []progressRow, at time.Time) map[int64]int {
	index := map[int64]int{}
	for i := range acts {
		s, ok := session(&acts[i], at)
		if !ok {
			obs.Skipped["pg_stat_activity"]++
			continue
		}
		if _, dup := index[s.ID]; dup {
			obs.Skipped["pg_stat_activity"]++
			continue
		}
		index[s.ID] = len(obs.Sessions)
		obs.Sessions = append(obs.Sessions, s)
	}
	for i := range progress {
		p := &progress[i]
		if p.pid == nil || p.done == nil || p.total == nil || *p.total <= 0 || *p.done < 0 {
			continue // a phase without a measurable total: no progress, not an error
		}
		if j, ok := index[int64(*p.pid)]; ok {
			obs.Sessions[j].Done, obs.Sessions[j].Total = min(*p.done, *p.total), *p.total
		}
	}
	return index
}

// roots resolves a waiter's blockers to the root holders: blockers that
// wait themselves are followed to whoever they wait for. soft is true when
// one of the waiter's own blockers is itself waiting (it queues behind a
// waiter). Cycles (a deadlock the server is about to break) end the walk.
func roots(pid int64, direct map[int64][]int64, waiting map[int64]bool) (out []int64, soft bool) {
	visited := map[int64]bool{pid: true}
	stack := slices.Clone(direct[pid])
	for _, b := range direct[pid] {
		if waiting[b] {
			soft = true
		}
	}
	for len(stack) > 0 {
		b := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if visited[b] {
			continue
		}
		visited[b] = true
		if waiting[b] && len(direct[b]) > 0 {
			stack = append(stack, direct[b]...)
			continue
		}
		out = append(out, b)
	}
	slices.Sort(out)
	return out, soft
}

// Cancel cancels t's statement if, at the moment of the cancel, the
// backend still runs the statement that began at t.QueryStart in the
// transaction that began at t.XactStart.
func (s *Source) Cancel(ctx context.Context, t guard.Target) error {
	return s.signal(ctx, "pg_cancel_backend", t, true)
}

// Terminate ends t's backend if it is still in the transaction that began
// at t.XactStart.
func (s *Source) Terminate(ctx context.Context, t guard.Target) error {
	return s.signal(ctx, "pg_terminate_backend", t, false)
}

// signal checks and signals in one statement. The check and the signal
// read one snapshot of pg_stat_activity: a statement that ends and a new
// one that starts in the microseconds between them is the only race left
// (PostgreSQL has no cancel-if-this-statement); the check makes every
// other mistake impossible.
func (s *Source) signal(ctx context.Context, fn string, t guard.Target, sameQuery bool) error {
	if t.Session <= 0 || t.Session > 1<<31-1 {
		return fmt.Errorf("guard/postgres: invalid backend pid %d", t.Session)
	}
	var xact, query any
	if !t.XactStart.IsZero() {
		xact = t.XactStart
	}
	if sameQuery {
		if t.QueryStart.IsZero() {
			return fmt.Errorf("guard/postgres: target of pid %d has no query start: refusing to cancel blind", t.Session)
		}
		query = t.QueryStart
	}
	q := `SELECT CASE
		WHEN NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1) THEN 'vanished'
		WHEN EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1
			AND xact_start IS NOT DISTINCT FROM $2::timestamptz
			AND ($3::timestamptz IS NULL OR (query_start = $3::timestamptz AND state = 'active')))
		THEN CASE WHEN ` + fn + `($1) THEN 'signalled' ELSE 'refused' END
		ELSE 'changed' END`
	var res string
	on := s.signaller()
	if err := on.QueryRow(ctx, q, int32(t.Session), xact, query).Scan(&res); err != nil {
		if on != s.pool {
			s.dropLease() // the lease's connection failed: the lease is gone
		}
		return fmt.Errorf("guard/postgres: %s(%d): %w", fn, t.Session, err)
	}
	switch res {
	case "signalled":
		return nil
	case "vanished":
		return guard.ErrVanished
	case "changed":
		return guard.ErrChanged
	}
	return fmt.Errorf("guard/postgres: %s(%d) refused by the server (privileges?)", fn, t.Session)
}

// ConnectionSlots is the name of the resource for the server's connection
// slots.
const ConnectionSlots = "connection-slots"

// connectionSlots is the connection-slot resource: capacity is the slots
// open to ordinary roles, InUse the client backends. It carries no uses:
// every client session holds one slot, and blaming a slot on a session would
// make every session a holder; the guard reads it as a gauge.
func connectionSlots(capacity, inUse int64) guard.Resource {
	return guard.Resource{Name: ConnectionSlots, Kind: resource.KindQueue, Capacity: max(capacity, 0), InUse: max(inUse, 0)}
}
