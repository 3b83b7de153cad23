// Package mysql is the guard's source for MariaDB (10.6 and later; built
// and tested against 10.11) over go-sql-driver/mysql.
//
// A poll reads information_schema.PROCESSLIST, INNODB_TRX,
// INNODB_LOCK_WAITS joined with INNODB_LOCKS, the metadata lock view when
// one exists (the METADATA_LOCK_INFO plugin, else Performance Schema's
// metadata_locks, else none: see Check's Features), and SHOW GLOBAL
// STATUS/VARIABLES for the buffer pool, connection slots and
// Handler_commit/Handler_rollback (every committed transaction, autocommit
// statements included). Rows are parsed by pure functions over the
// scanned sql.Null* values; a row with a NULL where a value must be, an
// unknown COMMAND word or a negative TIME_MS is skipped and counted in
// Observation.Skipped.
//
// Soft blocking: a FLUSH TABLES WITH READ LOCK or a DDL queued behind a
// long statement makes every later statement wait too. Every such waiter
// is attributed to the root holders (the long statements), never to the
// queued FTWRL/DDL, and waits of statements other than the queued
// FTWRL/DDL are marked Soft. With a metadata lock view a table metadata
// lock waiter is attributed to the non-waiting holders of an MDL on its
// table. Without one the holder is inferred: the client sessions that
// began before the table's first waiter and either run a statement naming
// the table or hold a transaction open in its database are the
// candidates; exactly one is the holder, marked Use.Inferred (the guard's
// decision says so); with none or several, nobody is blamed and the wait
// says why (Use.Why). A global read lock or table
// flush wait is tied to the sessions whose statements were running before
// the oldest queued FLUSH began and do not wait themselves: FTWRL waits
// for exactly those.
//
// INNODB_LOCK_WAITS lists a queued waiter as a blocker of the waiters
// behind it: every wait is resolved to the roots (the blockers that wait
// for nothing), and the guard's builder makes only those the holders.
//
// Superusers: a session is a superuser's when its user is root or any
// account of its user name has SUPER, directly or through a role, read
// from mysql.global_priv and mysql.roles_mapping (the guard needs SELECT
// on both; Check names them). Unreadable, every other account's session
// is treated as a superuser's and never acted on.
//
// Scope: Database is the DSN's database, the guard's scope by default;
// PROCESSLIST's DB column (the session's current database) places a
// session in it. The source's connections select no database (every
// statement names its schema), so the guard's account needs no privilege
// on the one it guards.
//
// Lease: [Source.Lease] takes GET_LOCK on a connection of its own, which
// also carries the actions while the lease is held (see guard.Leaser).
//
// Cancel uses KILL QUERY ID, which targets the statement id and so cannot
// hit a later statement; Terminate uses KILL CONNECTION after verifying the
// session still runs the same statement and transaction.
//
// # Options
//
// [Open] takes [Option] values, made by the With functions
// ([WithoutMDLView]); they set a configuration of the package's own, read
// once by Open.
package mysql
