package guard

import (
	"context"
	"errors"
	"time"

	"github.com/moirai-go/moirai/resource"
)

// Source is one database server as the guard sees it: a poller of the
// server's own views and the server's own cancel commands. Packages
// guard/postgres and guard/mysql implement it. A Source is used by one
// goroutine at a time.
type Source interface {
	// Name is the server family: "postgres" or "mysql".
	Name() string
	// Check verifies, once at start-up, that the server is reachable, its
	// version is supported and the guard's role has the privileges it
	// needs. A missing privilege is a *PrivilegeError naming it.
	Check(ctx context.Context) (ServerInfo, error)
	// Poll reads the server's views once and returns what it saw. Rows the
	// source cannot make sense of are skipped and counted in
	// Observation.Skipped, never guessed at.
	Poll(ctx context.Context) (*Observation, error)
	// Cancel cancels the statement identified by t, and only that
	// statement: the source verifies, in the same server-side statement
	// that cancels, that the session still runs it (PostgreSQL: pid and
	// query_start; MariaDB: KILL QUERY ID). It returns ErrVanished or
	// ErrChanged, and cancels nothing, when the session ended or moved on.
	Cancel(ctx context.Context, t Target) error
	// Terminate ends t's session (for a holder idle in transaction, which a
	// statement cancel cannot reach), with the same verification as Cancel.
	// The guard calls it only when the operator enabled it.
	Terminate(ctx context.Context, t Target) error
	// Close releases the source's connections.
	Close() error
}

// ServerInfo is what Check learned about the server.
type ServerInfo struct {
	Version   string // as the server reports it
	Superuser bool   // the guard's own role is a superuser (warn: least privilege)
	// Features the source found and will use, or degraded without: for
	// example "metadata_locks: performance_schema" or
	// "metadata_locks: unavailable".
	Features []string
}

// Observation is one poll of a server.
type Observation struct {
	// At is when the poll's statements ran, by the server's clock when the
	// source can read it (now() / NOW(6)), else the guard's; Took how long
	// the poll took from the guard's side; ServerTime the server-side time
	// the poll's statements cost, when the server reports it (0 if not).
	At         time.Time
	Took       time.Duration
	ServerTime time.Duration

	Sessions  []Session
	Resources []Resource
	// Uses says which session holds or waits for which resource. A session
	// may hold several resources and wait for at most one.
	Uses []Use

	// Committed and RolledBack are the server's cumulative transaction
	// counters (pg_stat_database xact_commit/xact_rollback; MariaDB
	// Handler_commit + Handler_rollback), for throughput; 0 if
	// unknown.
	Committed, RolledBack int64
	// CountersLag is how far behind the server the counters above may be:
	// PostgreSQL's backends publish their statistics about once a second,
	// so its counters move in bursts. The guard averages throughput over
	// at least twice this.
	CountersLag time.Duration
	// Refresh is how often, at most, the server refreshes some of the
	// views the poll read, and then only when they were last read at
	// least that long before: MariaDB's InnoDB transaction and lock views
	// are a cache refreshed on a read 100 ms after the last. The guard
	// starts polls far enough apart that each reads fresh views. 0: the
	// views are current whenever read.
	Refresh time.Duration

	// Skipped counts rows the source dropped as unexpected (NULLs where a
	// value must be, unknown states, values out of range), by view.
	Skipped map[string]int
}

// Session is one server session: a PostgreSQL backend or a MariaDB
// connection thread.
type Session struct {
	// ID is the pid (PostgreSQL) or the connection/thread id (MariaDB).
	ID int64
	// Statement identifies the statement running now: MariaDB's QUERY_ID;
	// 0 on PostgreSQL, where Target.QueryStart identifies it.
	Statement int64

	User, Application, Database, ClientAddr string
	// Own marks the guard's own sessions, which it never acts on.
	Own bool
	// Kind is "client" for ordinary sessions; otherwise the server's own
	// word for it ("autovacuum worker", "walsender", "system user",
	// "replication", ...). The guard never acts on other kinds unless
	// allowed.
	Kind string
	// Superuser is true when the session's role is a superuser (PostgreSQL
	// rolsuper; MariaDB SUPER or the session of a root account).
	Superuser bool

	// State is the server's state word ("active", "idle in transaction",
	// "Query", "Sleep", ...); Active whether a statement is running;
	// IdleInTransaction whether the session holds a transaction open
	// between statements.
	State             string
	Active            bool
	IdleInTransaction bool
	// Running is true while the statement executes: active, and neither
	// waiting for a lock nor sleeping (PostgreSQL: no wait event, or an IO
	// one; MariaDB: a STATE that is no wait and not "User sleep"). A
	// running statement holds the resource [ServerResource].
	Running bool

	Query string // the statement's text, possibly truncated by the server
	// Fingerprint is the statement with literals removed: its class for
	// learning typical durations (see Fingerprint).
	Fingerprint string

	// QueryStart and XactStart are when the statement and the transaction
	// began (zero if none); StateChange when State last changed.
	QueryStart, XactStart, StateChange time.Time
	// Age is how long the statement has run, as the server counts it
	// (MariaDB TIME_MS), when the server gives it; else derived from
	// QueryStart and Observation.At.
	Age time.Duration

	// WaitEvent is what the session waits on, in the server's words
	// ("Lock:relation", "Waiting for table metadata lock", ...), empty if
	// not waiting.
	WaitEvent string

	// Done and Total are the statement's progress from the server's
	// progress views (pg_stat_progress_*, MariaDB PROGRESS), 0/0 if none.
	Done, Total int64
}

// Resource is one thing sessions contend on.
type Resource struct {
	// Name is stable across polls for the same thing, for example
	// "relation:public.accounts", "row:public.accounts", "tuple:...",
	// "transactionid", "mdl:test.t1", "global-read-lock",
	// "connection-slots", "buffer-pool".
	Name     string
	Kind     resource.Kind
	Capacity int64 // slots (connections, buffer pool pages); 0 for locks

	// InUse and Evictions (cumulative) describe a buffer pool: pages in use
	// and pages evicted (MariaDB Innodb_buffer_pool_pages_* and
	// reads/evictions; PostgreSQL has no eviction counter).
	InUse     int64
	Evictions int64
	Misses    int64 // cumulative reads that missed the pool
}

// Use is one session's relation to one resource in one poll.
type Use struct {
	Session  int64 // Session.ID
	Resource string
	Mode     string // the lock mode, in the server's words
	Held     bool   // granted
	Waiting  bool   // waiting for it
	// BlockedBy lists the sessions a waiting session waits for, already
	// resolved to the root holders: when it queues behind another waiter
	// (a DDL or FTWRL queued behind a long reader), the guard must blame
	// the reader, not the queued statement. Sources fill it from
	// pg_blocking_pids / INNODB_LOCK_WAITS / metadata lock views.
	BlockedBy []int64
	// Soft is true when the wait is only a queueing behind another waiter
	// (the lock itself is compatible with every holder).
	Soft bool
	// Since is when the wait began, when the server tells (PostgreSQL
	// pg_locks.waitstart, MariaDB trx_wait_started); zero otherwise.
	Since time.Time
	// Inferred is true when the server does not show this hold, or whom
	// this wait waits for, and the source inferred it (MariaDB's metadata
	// locks without a lock view): decisions that rest on it say so.
	Inferred bool
	// Why says, for a wait whose holder the source could not name
	// (BlockedBy empty), why not.
	Why string
}

// Target identifies one statement to act on, precisely enough that the
// source acts on nothing else.
type Target struct {
	Session    int64
	Statement  int64     // MariaDB QUERY_ID; 0 on PostgreSQL
	QueryStart time.Time // PostgreSQL: must equal the backend's query_start
	XactStart  time.Time // PostgreSQL: must equal the backend's xact_start
	Query      string    // for the audit log only
}

// Errors a Source returns from Cancel and Terminate.
var (
	// ErrVanished: the session no longer exists.
	ErrVanished = errors.New("guard: session vanished before the action")
	// ErrChanged: the session runs another statement or transaction now.
	ErrChanged = errors.New("guard: session moved on to another statement")
)

// PrivilegeError reports the privileges the guard's role lacks.
type PrivilegeError struct {
	User    string
	Missing []string // e.g. "pg_monitor", "pg_signal_backend", "PROCESS", "CONNECTION ADMIN"
	Hint    string   // the GRANT statement that fixes it
}

func (e *PrivilegeError) Error() string {
	s := "guard: role " + e.User + " lacks "
	for i, m := range e.Missing {
		if i > 0 {
			s += ", "
		}
		s += m
	}
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}
